// OomWatcher: one thread with an inotify fd over every container's
// memory.events; an increase of oom_kill queues the container id, which
// GetOOMEvent long-polls with Next().
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::engine {

class OomWatcher {
 public:
  static Result<std::unique_ptr<OomWatcher>> Create();
  ~OomWatcher();
  OomWatcher(const OomWatcher&) = delete;
  OomWatcher& operator=(const OomWatcher&) = delete;

  // Starts watching `memory_events` (a cgroup's memory.events) for `id`.
  Status Watch(const std::string& id, const std::string& memory_events);
  // Stops watching; queued events for `id` stay.
  void Unwatch(const std::string& id);
  // Next container id with a new OOM kill; nullopt after `timeout`.
  std::optional<std::string> Next(std::chrono::milliseconds timeout);

 private:
  struct Watched {
    std::string id;
    std::string path;
    uint64_t oom_kills = 0;
  };

  OomWatcher(UniqueFd inotify, UniqueFd stop) : inotify_(std::move(inotify)), stop_(std::move(stop)) {}
  void Loop();
  void Check(int wd);

  UniqueFd inotify_;
  UniqueFd stop_;  // eventfd
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, Watched> watches_;    // guarded by mu_, by inotify wd
  std::deque<std::string> events_;  // guarded by mu_
};

}  // namespace capsule::engine
