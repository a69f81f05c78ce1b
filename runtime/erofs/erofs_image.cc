// mkfs.erofs runs as a child with its output captured; the image appears
// under its name only once complete, so a reader never maps half of one.
#include "runtime/erofs/erofs_image.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/host/run_capture.h"

namespace capsule::erofs {

Status MakeErofsImage(const std::string& source_dir, const std::string& image, const ErofsOptions& options) {
  const std::string what = fmt::format("erofs image {} of {}", image, source_dir);
  struct stat st{};
  if (::stat(source_dir.c_str(), &st) != 0) return ErrnoStatus(what + ": source");
  if (!S_ISDIR(st.st_mode)) return InvalidArgument(what + ": the source is not a directory");
  if (::access(options.mkfs.c_str(), X_OK) != 0)
    return FailedPrecondition(fmt::format("{}: {} is missing (install erofs-utils: make deps)", what, options.mkfs));
  const std::string partial = image + ".partial";
  ::unlink(partial.c_str());
  Result<Captured> ran =
      RunAndCapture({options.mkfs, "--quiet", "--preserve-mtime", partial, source_dir}, options.timeout);
  if (!ran.ok()) {
    ::unlink(partial.c_str());
    return ran.status().WithContext(what);
  }
  const Captured& run = *ran;
  if (run.exit_code != 0) {
    ::unlink(partial.c_str());
    std::string words = run.output.size() > 2000 ? run.output.substr(run.output.size() - 2000) : run.output;
    while (!words.empty() && words.back() == '\n') words.pop_back();
    return Internal(fmt::format("{}: mkfs.erofs exited {}: {}", what, run.exit_code, words));
  }
  if (::chmod(partial.c_str(), 0644) != 0 || ::rename(partial.c_str(), image.c_str()) != 0) {
    Status s = ErrnoStatus(what + ": put it in place");
    ::unlink(partial.c_str());
    return s;
  }
  return Status::Ok();
}

}  // namespace capsule::erofs
