// FakeProcessStdio: a scripted ProcessStdio for I/O tests. Output chunks
// are queued per stream and handed out by blocking Read calls; stdin writes
// and CloseStdin are recorded and can be awaited.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>

#include "shim/io/process_stdio.h"

namespace capsule::shim::io {

class FakeProcessStdio : public ProcessStdio {
 public:
  void Emit(OutputStream s, std::string data) {
    {
      std::lock_guard lock(mu_);
      Stream(s).chunks.push_back(std::move(data));
    }
    cv_.notify_all();
  }
  void End(OutputStream s) {
    {
      std::lock_guard lock(mu_);
      Stream(s).ended = true;
    }
    cv_.notify_all();
  }
  // Later Reads of `s` fail (an agent connection that broke).
  void Fail(OutputStream s) {
    {
      std::lock_guard lock(mu_);
      Stream(s).fail = true;
    }
    cv_.notify_all();
  }

  Result<ReadChunk> Read(OutputStream s, size_t max_bytes) override {
    std::unique_lock lock(mu_);
    State& st = Stream(s);
    ++st.reads;
    cv_.wait(lock, [&] { return st.fail || st.ended || !st.chunks.empty(); });
    if (st.fail) return Unavailable("fake: stream broken");
    ReadChunk out;
    if (!st.chunks.empty()) {
      std::string& front = st.chunks.front();
      const size_t n = std::min(max_bytes, front.size());
      out.data = front.substr(0, n);
      front.erase(0, n);
      if (front.empty()) st.chunks.pop_front();
    }
    out.eof = st.chunks.empty() && st.ended;
    return out;
  }

  Status Write(std::string_view data) override {
    {
      std::lock_guard lock(mu_);
      if (stdin_closed_) return FailedPrecondition("fake: stdin closed");
      stdin_.append(data);
    }
    cv_.notify_all();
    return Status::Ok();
  }

  Status CloseStdin() override {
    {
      std::lock_guard lock(mu_);
      stdin_closed_ = true;
      ++close_count_;
    }
    cv_.notify_all();
    return Status::Ok();
  }

  // True once stdin holds exactly `want` (or it already did).
  bool WaitStdin(const std::string& want, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return stdin_ == want; });
  }
  bool WaitStdinClosed(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return stdin_closed_; });
  }
  std::string stdin_data() {
    std::lock_guard lock(mu_);
    return stdin_;
  }
  int close_count() {
    std::lock_guard lock(mu_);
    return close_count_;
  }
  int reads(OutputStream s) {
    std::lock_guard lock(mu_);
    return Stream(s).reads;
  }

 private:
  struct State {
    std::deque<std::string> chunks;
    bool ended = false;
    bool fail = false;
    int reads = 0;
  };
  State& Stream(OutputStream s) { return s == OutputStream::kStdout ? out_ : err_; }

  std::mutex mu_;
  std::condition_variable cv_;
  State out_, err_;            // guarded by mu_
  std::string stdin_;          // guarded by mu_
  bool stdin_closed_ = false;  // guarded by mu_
  int close_count_ = 0;        // guarded by mu_
};

}  // namespace capsule::shim::io
