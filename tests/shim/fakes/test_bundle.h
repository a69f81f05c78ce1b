// Bundles and stdio FIFOs for the shim's unit tests: a bundle dir with a
// config.json like containerd writes (ctr's or CRI's), and FIFOs whose
// output a background reader collects until EOF (the shim closing them).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"

namespace capsule::testing {

// A minimal valid OCI spec: sh in a rootfs, ctr's default mounts.
inline nlohmann::json BaseSpec(const std::map<std::string, std::string>& annotations = {}) {
  nlohmann::json spec = {
      {"ociVersion", "1.0.2"},
      {"process", {{"args", {"sh"}}, {"cwd", "/"}, {"env", {"PATH=/bin"}}}},
      {"root", {{"path", "rootfs"}}},
      {"hostname", "box"},
      {"mounts",
       {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
        {{"destination", "/dev/shm"}, {"type", "tmpfs"}, {"source", "shm"}, {"options", {"nosuid", "size=65536k"}}}}},
      {"linux",
       {{"namespaces",
         {{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}, {{"type", "network"}}}}}},
  };
  for (const auto& [k, v] : annotations) spec["annotations"][k] = v;
  return spec;
}

inline std::string MakeBundle(const std::string& parent, const std::string& id, const nlohmann::json& spec) {
  const std::string dir = parent + "/" + id;
  (void)MkdirAll(dir + "/rootfs");
  (void)WriteFile(dir + "/config.json", spec.dump());
  return dir;
}

// A FIFO at `path`, read to EOF in the background once Start() is called
// (after the shim opened its end at Create: before that a FIFO with no
// writer reads as EOF at once).
class FifoReader {
 public:
  explicit FifoReader(std::string path) : path_(std::move(path)) {
    ::mkfifo(path_.c_str(), 0600);
    fd_.reset(::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  }
  const std::string& path() const { return path_; }
  ~FifoReader() { stop_ = true; }
  void Start() {
    result_ = std::async(std::launch::async, [this] {
      std::string out;
      char buf[4096];
      while (!stop_) {
        pollfd p{fd_.get(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        ssize_t n = ::read(fd_.get(), buf, sizeof buf);
        if (n > 0) out.append(buf, static_cast<size_t>(n));
        if (n == 0) return out;  // every writer closed
      }
      return out + "<stopped>";
    });
  }
  // All bytes once every writer closed; "<timeout>" if that takes too long.
  std::string Get(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    if (result_.wait_for(timeout) != std::future_status::ready) {
      stop_ = true;
      return "<timeout>: " + result_.get();
    }
    return result_.get();
  }

 private:
  std::string path_;
  UniqueFd fd_;
  std::atomic<bool> stop_{false};
  std::future<std::string> result_;  // last: joined first on destruction
};

}  // namespace capsule::testing
