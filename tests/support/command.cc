// See command.h. Output is drained with poll(2) on both pipes so a chatty
// child can never block on a full pipe while we wait for it.
#include "tests/support/command.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>

extern char** environ;

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;

Result<std::pair<UniqueFd, UniqueFd>> Pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  return std::make_pair(UniqueFd(p[0]), UniqueFd(p[1]));
}

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Appends what is readable on fd; false at EOF or error.
bool Drain(int fd, std::string* into) {
  char buf[8192];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  into->append(buf, static_cast<size_t>(n));
  return true;
}

std::string Quote(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

std::vector<std::string> EnvironmentWith(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced = replaced || k == key;
    if (!replaced) env.push_back(std::move(entry));
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout,
                                 std::optional<std::vector<std::string>> env) {
  ASSIGN_OR_RETURN(auto out, Pipe());
  ASSIGN_OR_RETURN(auto err, Pipe());
  SpawnOptions o;
  o.argv = argv;
  o.env = std::move(env);
  o.stdout_fd = out.second.get();
  o.stderr_fd = err.second.get();
  o.die_with_parent = true;
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  out.second.reset();
  err.second.reset();
  CommandResult r;
  const auto deadline = Clock::now() + timeout;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd fds[2] = {{out_open ? out.first.get() : -1, POLLIN, 0},
                     {err_open ? err.first.get() : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, MillisLeft(deadline));
    if (n < 0 && errno != EINTR) return ErrnoStatus("poll output of " + argv[0]);
    if (n == 0) {
      return DeadlineExceeded(Quote(argv) + " still running after " +
                              std::to_string(timeout.count()) + " ms; output: " + r.out + r.err);
    }
    if (fds[0].revents != 0) out_open = Drain(out.first.get(), &r.out);
    if (fds[1].revents != 0) err_open = Drain(err.first.get(), &r.err);
  }
  ASSIGN_OR_RETURN(int status, child.Wait(std::chrono::milliseconds(MillisLeft(deadline) + 1000)));
  r.exit_code = ExitCode(status);
  return r;
}

Result<StreamingCommand> StreamingCommand::Start(const std::vector<std::string>& argv,
                                                 std::optional<std::vector<std::string>> env) {
  ASSIGN_OR_RETURN(auto out, Pipe());
  SpawnOptions o;
  o.argv = argv;
  o.env = std::move(env);
  o.stdout_fd = out.second.get();
  o.stderr_fd = out.second.get();
  o.die_with_parent = true;
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  return StreamingCommand(std::move(child), std::move(out.first));
}

Result<std::string> StreamingCommand::WaitForOutput(const std::string& needle,
                                                    std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (output_.find(needle) == std::string::npos) {
    pollfd p{out_.get(), POLLIN, 0};
    int n = ::poll(&p, 1, MillisLeft(deadline));
    if (n < 0 && errno != EINTR) return ErrnoStatus("poll command output");
    if (n == 0) {
      return DeadlineExceeded("no \"" + needle + "\" in output after " +
                              std::to_string(timeout.count()) + " ms; output so far: " + output_);
    }
    if (!Drain(out_.get(), &output_)) {
      return Unavailable("command exited before printing \"" + needle + "\"; output: " + output_);
    }
  }
  return output_;
}

void StreamingCommand::ReadAvailable() {
  if (!out_) return;
  pollfd p{out_.get(), POLLIN, 0};
  while (::poll(&p, 1, 0) > 0 && Drain(out_.get(), &output_)) {
  }
}

Result<int> StreamingCommand::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!child_.TryReap()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return DeadlineExceeded("command still running after " + std::to_string(timeout.count()) + " ms; output: " +
                              output_);
    ReadAvailable();
    ::usleep(20 * 1000);
  }
  ReadAvailable();
  return child_.Wait(std::chrono::milliseconds(0));
}

void StreamingCommand::Stop(std::chrono::milliseconds grace) {
  if (child_.pid() > 0 && !child_.reaped()) child_.Terminate(grace);
  if (out_) {
    // Keep whatever it printed last, without waiting on a pipe a
    // grandchild might still hold open.
    pollfd p{out_.get(), POLLIN, 0};
    while (::poll(&p, 1, 0) > 0 && Drain(out_.get(), &output_)) {
    }
    out_.reset();
  }
}

}  // namespace capsule::testing
