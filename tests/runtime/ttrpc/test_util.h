// Helpers for the ttrpc unit tests: a raw peer that speaks frames by hand
// (to send what a well-behaved client never would), and fd/thread counters
// for leak checks.
#pragma once

#include <dirent.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <optional>
#include <string>
#include <utility>

#include "runtime/common/unique_fd.h"
#include "runtime/ttrpc/frame.h"
#include "runtime/ttrpc/socket_io.h"
#include "ttrpc/request.pb.h"

namespace capsule::ttrpc::testing {

// Entries in a /proc/self directory: open fds or live threads.
inline int CountEntries(const char* dir) {
  DIR* d = ::opendir(dir);
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}
inline int OpenFds() { return CountEntries("/proc/self/fd") - 1; }  // minus opendir's own
inline int Threads() { return CountEntries("/proc/self/task"); }

// Two connected unix stream sockets.
inline std::pair<UniqueFd, UniqueFd> SocketPair() {
  int sv[2] = {-1, -1};
  ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// A hand-driven peer. Reads time out after 10 s so a broken server fails
// the test instead of hanging it.
class RawPeer {
 public:
  explicit RawPeer(UniqueFd fd) : fd_(std::move(fd)) {
    timeval tv{10, 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  int fd() const { return fd_.get(); }

  bool WriteBytes(std::string_view bytes) { return SendAll(fd_.get(), bytes).ok(); }
  bool WriteFrame(uint32_t stream_id, uint8_t type, std::string_view payload) {
    std::string f = EncodeFrame(stream_id, FrameType::kRequest, payload);
    f[8] = static_cast<char>(type);
    return WriteBytes(f);
  }
  bool WriteRequest(uint32_t stream_id, const ::ttrpc::Request& req) {
    return WriteFrame(stream_id, 1, req.SerializeAsString());
  }

  // Next frame, or nullopt at EOF / error / timeout.
  std::optional<DecodedFrame> ReadFrame() {
    while (true) {
      if (auto f = decoder_.Next()) return f;
      char buf[65536];
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      decoder_.Feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  std::optional<::ttrpc::Response> ReadResponse(uint32_t* stream_id = nullptr) {
    auto f = ReadFrame();
    if (!f) return std::nullopt;
    if (stream_id != nullptr) *stream_id = f->header.stream_id;
    ::ttrpc::Response r;
    if (!r.ParseFromString(f->payload)) return std::nullopt;
    return r;
  }
  // True when the server closed the connection (EOF, or reset).
  bool ReadsEof() {
    char c;
    ssize_t n = ::read(fd_.get(), &c, 1);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  UniqueFd fd_;
  FrameDecoder decoder_;
};

inline ::ttrpc::Request MakeRequest(const std::string& service, const std::string& method,
                                    const std::string& payload = "") {
  ::ttrpc::Request r;
  r.set_service(service);
  r.set_method(method);
  r.set_payload(payload);
  return r;
}

}  // namespace capsule::ttrpc::testing
