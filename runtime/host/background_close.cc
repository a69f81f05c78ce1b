// See background_close.h.
#include "runtime/host/background_close.h"

#include <sys/resource.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

namespace capsule {
namespace {

// Nice 19: the frees yield to every other thread of the process.
constexpr int kWorkerNice = 19;

class Closer {
 public:
  ~Closer() {
    std::thread worker;
    {
      std::lock_guard lock(mu_);
      done_ = true;
      worker = std::move(worker_);
    }
    cv_.notify_all();
    if (worker.joinable()) worker.join();
  }

  void Add(UniqueFd fd) {
    std::unique_lock lock(mu_);
    if (done_) return;  // exiting: fd closes here, as it goes out of scope
    if (!worker_.joinable()) {
      try {
        worker_ = std::thread([this] { Run(); });
      } catch (const std::system_error&) {
        return;  // no thread: fd closes on the caller's
      }
    }
    queue_.push_back(std::move(fd));
    ++queued_;
    cv_.notify_all();
  }

  void Flush() {
    std::unique_lock lock(mu_);
    const uint64_t target = queued_;
    cv_.wait(lock, [&] { return closed_ >= target || !worker_.joinable(); });
  }

 private:
  void Run() {
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWorkerNice);
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return done_ || !queue_.empty(); });
      if (queue_.empty()) return;  // done_ and nothing left
      UniqueFd fd = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      fd.reset();
      lock.lock();
      ++closed_;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<UniqueFd> queue_;
  uint64_t queued_ = 0;
  uint64_t closed_ = 0;
  bool done_ = false;
  std::thread worker_;
};

Closer& TheCloser() {
  static Closer closer;
  return closer;
}

}  // namespace

void CloseInBackground(UniqueFd fd) {
  if (fd) TheCloser().Add(std::move(fd));
}

void FlushBackgroundCloses() { TheCloser().Flush(); }

}  // namespace capsule
