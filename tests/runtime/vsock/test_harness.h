// Test harness for the vsock back end: a VsockService on its own event-loop
// thread (as capsule-vsockd runs it) in a temp dir, plus host-side helpers
// for the hybrid socket. Paired with FakeDriver for the QEMU/guest side.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"
#include "runtime/common/unix_stream.h"
#include "runtime/vsock/event_loop.h"
#include "runtime/vsock/unix_socket.h"
#include "runtime/vsock/vsock_service.h"
#include "tests/runtime/vsock/fake_driver.h"

namespace capsule::vsock::testing {

inline constexpr uint64_t kGuestCid = 3;

class InProcessBackend {
 public:
  static Result<std::unique_ptr<InProcessBackend>> Start(VsockServiceOptions o = {}) {
    std::unique_ptr<InProcessBackend> b(new InProcessBackend());
    ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("vsock-test"));
    b->dir_ = std::make_unique<TempDir>(std::move(dir));
    if (o.vhost_user_socket.empty() && o.serial_socket.empty()) o.vhost_user_socket = b->dir_->Join("vhost-vsock.sock");
    if (o.uds_path.empty()) o.uds_path = b->dir_->Join("vsock.sock");
    o.guest_cid = kGuestCid;
    ASSIGN_OR_RETURN(b->loop_, EventLoop::Create());
    InProcessBackend* self = b.get();
    ASSIGN_OR_RETURN(b->svc_, VsockService::Start(*b->loop_, o, [self](const Status&) { self->gone_ = true; }));
    b->thread_ = std::thread([self] { (void)self->loop_->Run(); });
    return b;
  }

  ~InProcessBackend() { Stop(); }

  void Stop() {
    if (!thread_.joinable()) return;
    loop_->Stop();
    thread_.join();
    svc_.reset();
  }

  // Runs `fn` on the loop thread and returns its result.
  template <typename F>
  auto OnLoop(F fn) -> decltype(fn()) {
    std::promise<decltype(fn())> p;
    auto f = p.get_future();
    loop_->Post([&] { p.set_value(fn()); });
    return f.get();
  }

  size_t connections() {
    return OnLoop([this] { return svc_->connection_count(); });
  }
  uint64_t malformed() {
    return OnLoop([this] { return svc_->device().malformed_packets(); });
  }
  // Read through the loop so a disconnect being handled has finished.
  bool frontend_gone() {
    return OnLoop([this] { return gone_.load(); });
  }

  const std::string& vhost_socket() const { return svc_->options().vhost_user_socket; }
  const std::string& serial_socket() const { return svc_->options().serial_socket; }
  const std::string& uds() const { return svc_->options().uds_path; }
  std::string Join(const std::string& name) const { return dir_->Join(name); }

 private:
  InProcessBackend() = default;
  std::unique_ptr<TempDir> dir_;
  EventLoopPtr loop_;
  VsockServicePtr svc_;
  std::thread thread_;
  std::atomic<bool> gone_{false};
};

// Connects to the hybrid socket and writes "CONNECT <port>\n" (+ extra).
inline Result<UniqueFd> HostConnect(const std::string& uds, uint32_t port, const std::string& extra = "") {
  ASSIGN_OR_RETURN(UniqueFd fd, ConnectUnix(uds));
  std::string line = "CONNECT " + std::to_string(port) + "\n" + extra;
  if (::send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size()))
    return ErrnoStatus("write CONNECT");
  return fd;
}

// Reads exactly `n` bytes (or until EOF) within the timeout.
inline std::string ReadN(int fd, size_t n, std::chrono::milliseconds timeout = kWait) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (out.size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !WaitFd(fd, POLLIN, left, "host read").ok()) break;
    char buf[65536];
    ssize_t r = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), MSG_DONTWAIT);
    if (r == 0) break;
    if (r < 0) {
      if (errno == EAGAIN) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

// Reads one '\n'-terminated line.
inline std::string ReadLine(int fd, std::chrono::milliseconds timeout = kWait) {
  std::string out;
  while (out.empty() || out.back() != '\n') {
    std::string c = ReadN(fd, 1, timeout);
    if (c.empty()) break;
    out += c;
  }
  return out;
}

// True when the peer closed: a read reports EOF (or reset) within timeout.
inline bool WaitEof(int fd, std::chrono::milliseconds timeout = kWait) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !WaitFd(fd, POLLIN, left, "eof").ok()) return false;
    char buf[4096];
    ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN)) return true;
  }
}

}  // namespace capsule::vsock::testing
