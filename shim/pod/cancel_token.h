// CancelToken: one-shot cancellation of a task's creation, shared by the
// Create that does the work and whoever gives up on it: containerd's
// deadline (the Create request's timeout_nano) or containerd's Delete of a
// task whose Create is still running. The work learns of it three ways: it
// polls cancelled(), a poll loop watches fd() (the wait for a booting
// guest), and a blocked agent call is cut by an OnCancel callback (which
// revokes the new VM's agent).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::shim::pod {

class CancelToken {
 public:
  // Unregisters its callback on destruction; waits while it runs.
  class Registration {
   public:
    Registration() = default;
    Registration(Registration&& other) noexcept : token_(std::exchange(other.token_, nullptr)), id_(other.id_) {}
    Registration& operator=(Registration&&) = delete;
    ~Registration();

   private:
    friend class CancelToken;
    Registration(CancelToken* token, uint64_t id) : token_(token), id_(id) {}
    CancelToken* token_ = nullptr;
    uint64_t id_ = 0;
  };

  // Cancels the token when `deadline` passes, unless destroyed first.
  class Deadline {
   public:
    Deadline(std::shared_ptr<CancelToken> token, std::chrono::steady_clock::time_point deadline, Status why);
    ~Deadline();
    Deadline(const Deadline&) = delete;
    Deadline& operator=(const Deadline&) = delete;

   private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;  // guarded by mu_
    std::thread thread_;
  };

  // The eventfd behind fd() cannot be made: an error naming it.
  static Result<std::shared_ptr<CancelToken>> Make();
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // The first call wins: records `why`, makes fd() readable and runs the
  // callbacks on the caller's thread. Later calls do nothing.
  void Cancel(Status why);
  bool cancelled() const;
  // Why it was cancelled; OK while it is not.
  Status reason() const;
  // Readable (POLLIN) once cancelled; owned by the token.
  int fd() const { return fd_.get(); }
  // Runs `fn` at Cancel, or at once (on this thread) when already cancelled.
  // `fn` must not destroy its own Registration.
  [[nodiscard]] Registration OnCancel(std::function<void()> fn);

 private:
  explicit CancelToken(UniqueFd fd) : fd_(std::move(fd)) {}
  void Unregister(uint64_t id);

  const UniqueFd fd_;
  mutable std::mutex mu_;
  std::condition_variable idle_;                      // callbacks_running_ became false
  std::optional<Status> why_;                         // guarded by mu_
  std::map<uint64_t, std::function<void()>> callbacks_;  // guarded by mu_
  uint64_t next_id_ = 1;                              // guarded by mu_
  bool callbacks_running_ = false;                    // guarded by mu_
};
using CancelTokenPtr = std::shared_ptr<CancelToken>;

}  // namespace capsule::shim::pod
