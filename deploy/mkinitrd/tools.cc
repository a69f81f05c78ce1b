// Subprocess plumbing over capsule's ChildProcess; output goes through temp
// files (not pipes) so a chatty child can never deadlock against us.
#include "deploy/mkinitrd/tools.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>

#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"
#include "runtime/common/unique_fd.h"

namespace capsule::deploy {
namespace {

Result<UniqueFd> TempFile(const TempDir& dir, const char* name) {
  std::string path = dir.Join(name);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return ErrnoStatus("create " + path);
  return fd;
}

Status RunToFds(const std::vector<std::string>& argv, int in_fd, int out_fd, const TempDir& scratch) {
  ASSIGN_OR_RETURN(UniqueFd err, TempFile(scratch, "stderr"));
  SpawnOptions so;
  so.argv = argv;
  so.stdin_fd = in_fd;
  so.stdout_fd = out_fd;
  so.stderr_fd = err.get();
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(so));
  ASSIGN_OR_RETURN(int status, child.Wait());
  if (ExitCode(status) == 0) return Status::Ok();
  std::string msg = ReadFile(scratch.Join("stderr")).value_or("");
  if (msg.size() > 2000) msg.resize(2000);
  return Internal(fmt::format("{} exited with {}: {}", argv[0], ExitCode(status), msg));
}

}  // namespace

Result<std::string> FindProgram(const std::string& name, const std::string& package) {
  const char* env = std::getenv("PATH");
  std::string path = std::string(env ? env : "/usr/bin:/bin") + ":/usr/sbin:/sbin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string candidate = path.substr(start, end - start) + "/" + name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  std::string hint = package.empty() ? "" : fmt::format(" (apt-get install {}, or run `make deps`)", package);
  return NotFound(fmt::format("program {} not found on PATH{}", name, hint));
}

Result<std::string> RunCapture(const std::vector<std::string>& argv) {
  ASSIGN_OR_RETURN(TempDir scratch, TempDir::Create("mkinitrd"));
  ASSIGN_OR_RETURN(UniqueFd out, TempFile(scratch, "stdout"));
  RETURN_IF_ERROR(RunToFds(argv, -1, out.get(), scratch));
  return ReadFile(scratch.Join("stdout"));
}

Status RunFilter(const std::vector<std::string>& argv, const std::string& in_path, const std::string& out_path) {
  ASSIGN_OR_RETURN(TempDir scratch, TempDir::Create("mkinitrd"));
  UniqueFd in(::open(in_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return ErrnoStatus("open " + in_path);
  UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return ErrnoStatus("create " + out_path);
  return RunToFds(argv, in.get(), out.get(), scratch);
}

}  // namespace capsule::deploy
