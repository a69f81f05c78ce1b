// See cancel_token.h.
#include "shim/pod/cancel_token.h"

#include <sys/eventfd.h>
#include <unistd.h>

namespace capsule::shim::pod {

Result<std::shared_ptr<CancelToken>> CancelToken::Make() {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) return ErrnoStatus("eventfd for a cancel token");
  return std::shared_ptr<CancelToken>(new CancelToken(std::move(fd)));
}

void CancelToken::Cancel(Status why) {
  std::map<uint64_t, std::function<void()>> callbacks;
  {
    std::lock_guard lock(mu_);
    if (why_) return;
    why_ = std::move(why);
    callbacks.swap(callbacks_);
    callbacks_running_ = true;
  }
  uint64_t one = 1;
  (void)!::write(fd_.get(), &one, sizeof one);
  for (auto& [id, fn] : callbacks) fn();
  std::lock_guard lock(mu_);
  callbacks_running_ = false;
  idle_.notify_all();
}

bool CancelToken::cancelled() const {
  std::lock_guard lock(mu_);
  return why_.has_value();
}

Status CancelToken::reason() const {
  std::lock_guard lock(mu_);
  return why_.value_or(Status::Ok());
}

CancelToken::Registration CancelToken::OnCancel(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (!why_) {
      const uint64_t id = next_id_++;
      callbacks_.emplace(id, std::move(fn));
      return Registration(this, id);
    }
  }
  fn();
  return Registration();
}

void CancelToken::Unregister(uint64_t id) {
  std::unique_lock lock(mu_);
  if (callbacks_.erase(id) != 0) return;
  // Taken by a Cancel that may be running it now: the callback's captures
  // must outlive that.
  idle_.wait(lock, [this] { return !callbacks_running_; });
}

CancelToken::Registration::~Registration() {
  if (token_ != nullptr) token_->Unregister(id_);
}

CancelToken::Deadline::Deadline(std::shared_ptr<CancelToken> token, std::chrono::steady_clock::time_point deadline,
                                Status why) {
  thread_ = std::thread([this, token = std::move(token), deadline, why = std::move(why)]() mutable {
    std::unique_lock lock(mu_);
    if (cv_.wait_until(lock, deadline, [this] { return done_; })) return;
    lock.unlock();
    token->Cancel(std::move(why));
  });
}

CancelToken::Deadline::~Deadline() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace capsule::shim::pod
