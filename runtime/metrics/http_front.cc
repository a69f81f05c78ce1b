// See http_front.h. Requests are parsed only as far as answering needs:
// the request line, Content-Length and Transfer-Encoding.
#include "runtime/metrics/http_front.h"

#include <fcntl.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"

namespace capsule::metrics {
namespace {

using Clock = std::chrono::steady_clock;
const log::Logger kHttpFrontLog("metrics.http");

constexpr std::string_view kMetricsType = "text/plain; version=0.0.4; charset=utf-8";
constexpr std::string_view kIndex = "capsule-runtime metrics: GET /metrics\n";
// After an answer: what is read and dropped before the close (so the client
// reads the answer rather than a reset), at most.
constexpr size_t kMaxDrain = 64 * 1024;
constexpr std::chrono::milliseconds kDrainTime{1000};
// An answer that could not be written before a collection ended in time.
constexpr std::chrono::milliseconds kLateAnswerTime{1000};
constexpr int kMaxAcceptsPerWake = 64;
constexpr size_t kReadChunk = 64 * 1024;

enum class State { kReading, kWaiting, kWriting, kDraining, kClosed };

struct Connection {
  UniqueFd fd;
  State state = State::kReading;
  Clock::time_point accepted;
  Clock::time_point deadline;
  std::string in;  // the request head so far, at most max_request_head + one read
  bool head_only = false;
  std::string out_head;
  std::shared_ptr<const std::string> body;
  size_t written = 0;  // of out_head, then body
  size_t drained = 0;
};

struct Answer {
  int code;
  std::string_view reason;
  std::string detail;  // the body of an error
  std::string_view extra_header = {};
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && ::strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

// Where the head ends (past its blank line), if it has.
std::optional<size_t> HeadEnd(const std::string& in) {
  const size_t crlf = in.find("\r\n\r\n");
  const size_t lf = in.find("\n\n");
  if (crlf == std::string::npos && lf == std::string::npos) return std::nullopt;
  if (lf == std::string::npos || (crlf != std::string::npos && crlf < lf)) return crlf + 4;
  return lf + 2;
}

struct Request {
  bool head_only = false;
  bool metrics = false;  // else the index
};

// The request, or the answer that refuses it.
std::variant<Request, Answer> Parse(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
  }
  const Answer bad{400, "Bad Request", "malformed request line or header\n"};
  if (lines.empty()) return bad;
  std::string_view line = lines[0];
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return bad;
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method) || !IsToken(target) || target[0] != '/') return bad;
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    return Answer{505, "HTTP Version Not Supported", "HTTP/1.0 and HTTP/1.1 only\n"};
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) break;
    const size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos || colon == 0) return bad;
    const std::string_view name = lines[i].substr(0, colon);
    const std::string_view value = Trim(lines[i].substr(colon + 1));
    if (EqualsIgnoreCase(name, "transfer-encoding") || (EqualsIgnoreCase(name, "content-length") && value != "0"))
      return Answer{413, "Content Too Large", "a request here has no body\n"};
  }
  if (method != "GET" && method != "HEAD")
    return Answer{405, "Method Not Allowed", "GET or HEAD only\n", "Allow: GET, HEAD\r\n"};
  const std::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics" && path != "/") return Answer{404, "Not Found", "GET /metrics\n"};
  return Request{method == "HEAD", path == "/metrics"};
}

std::string HeadText(int code, std::string_view reason, std::string_view type, size_t length,
                     std::string_view extra_header) {
  std::string h = "HTTP/1.1 " + std::to_string(code) + " " + std::string(reason) + "\r\n";
  h += "Content-Type: " + std::string(type) + "\r\n";
  h += "Content-Length: " + std::to_string(length) + "\r\n";
  h += extra_header;
  h += "Connection: close\r\n\r\n";
  return h;
}

class Front {
 public:
  Front(int listen_fd, int collector_fd, const HttpFrontOptions& o)
      : listen_fd_(listen_fd), collector_fd_(collector_fd), o_(o) {}

  Status Run() {
    for (;;) {
      Expire(Clock::now());
      std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {collector_fd_, POLLIN, 0}};
      std::vector<Connection*> polled;
      for (auto& c : conns_) {
        short events = 0;
        if (c->state == State::kReading || c->state == State::kDraining) events = POLLIN;
        if (c->state == State::kWriting) events = POLLOUT;
        fds.push_back({c->fd.get(), events, 0});
        polled.push_back(c.get());
      }
      if (::poll(fds.data(), fds.size(), Timeout()) < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("metrics front end: poll");
      }
      if (fds[1].revents != 0) {
        ASSIGN_OR_RETURN(bool open, OnCollector());
        if (!open) return Status::Ok();
      }
      for (size_t i = 0; i < polled.size(); ++i) {
        Connection& c = *polled[i];
        const short r = fds[i + 2].revents;
        if (r == 0 || c.state == State::kClosed) continue;
        if (c.state == State::kReading) OnReadable(c);
        else if (c.state == State::kDraining) Drain(c);
        else if (c.state == State::kWriting) Write(c);
        else if (r & (POLLHUP | POLLERR)) Close(c);  // gave up waiting for its collection
      }
      if (fds[0].revents & POLLIN) Accept();
      std::erase_if(conns_, [](const auto& c) { return c->state == State::kClosed; });
    }
  }

 private:
  int Timeout() const {
    if (conns_.empty()) return -1;
    Clock::time_point next = Clock::time_point::max();
    for (const auto& c : conns_) next = std::min(next, c->deadline);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, 60000));
  }

  void Expire(Clock::time_point now) {
    for (auto& c : conns_) {
      if (c->deadline > now) continue;
      if (c->state == State::kReading && !c->in.empty()) {
        Refuse(*c, {408, "Request Timeout", "the request did not arrive in time\n"});
        c->deadline = now + kLateAnswerTime;
      } else if (c->state == State::kWaiting) {
        Refuse(*c, {503, "Service Unavailable", "the collection is taking too long\n"});
        c->deadline = now + kLateAnswerTime;
      } else {
        Close(*c);
      }
    }
  }

  void Accept() {
    for (int i = 0; i < kMaxAcceptsPerWake; ++i) {
      UniqueFd fd(::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
          kHttpFrontLog.Warn("accept: {}", std::strerror(errno));
        return;
      }
      if (LiveConnections() >= o_.max_connections && !EvictOne()) continue;  // every slot answers: drop the newcomer
      auto c = std::make_unique<Connection>();
      c->fd = std::move(fd);
      c->accepted = Clock::now();
      c->deadline = c->accepted + o_.request_timeout;
      conns_.push_back(std::move(c));
    }
  }

  size_t LiveConnections() const {
    return std::count_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->state != State::kClosed; });
  }

  // A connection done with (draining), else the one that has waited longest
  // for its request.
  bool EvictOne() {
    Connection* victim = nullptr;
    for (auto& c : conns_) {
      if (c->state == State::kDraining) {
        victim = c.get();
        break;
      }
      if (c->state == State::kReading && (victim == nullptr || c->accepted < victim->accepted)) victim = c.get();
    }
    if (victim == nullptr) return false;
    Close(*victim);
    return true;
  }

  void OnReadable(Connection& c) {
    char buf[4096];
    const ssize_t n = ::read(c.fd.get(), buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return Close(c);
    if (n < 0) return;
    c.in.append(buf, static_cast<size_t>(n));
    const std::optional<size_t> end = HeadEnd(c.in);
    if (!end || *end > o_.max_request_head) {
      if (c.in.size() >= o_.max_request_head)
        Refuse(c, {431, "Request Header Fields Too Large",
                   "the request head is over " + std::to_string(o_.max_request_head) + " bytes\n"});
      return;
    }
    auto parsed = Parse(std::string_view(c.in).substr(0, *end));
    c.in.clear();
    c.in.shrink_to_fit();
    if (auto* refusal = std::get_if<Answer>(&parsed)) return Refuse(c, *refusal);
    const Request req = std::get<Request>(parsed);
    c.head_only = req.head_only;
    c.deadline = Clock::now() + o_.response_timeout;
    if (!req.metrics) return Send(c, 200, "OK", "text/plain", std::make_shared<const std::string>(kIndex));
    if (cache_ && Clock::now() - cached_at_ < o_.cache_for) return Send(c, 200, "OK", kMetricsType, cache_);
    c.state = State::kWaiting;
    if (!collecting_) AskCollector();
  }

  void AskCollector() {
    const char req = kCollectRequest;
    if (::send(collector_fd_, &req, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
      kHttpFrontLog.Error("cannot ask the collector for metrics: {}", std::strerror(errno));
      return;  // the collector is gone: its close ends the loop
    }
    collecting_ = true;
  }

  // false when the collector closed its end (the serve command stops).
  Result<bool> OnCollector() {
    char buf[kReadChunk];
    const ssize_t n = ::read(collector_fd_, buf, sizeof buf);
    if (n == 0) return false;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return true;
      return ErrnoStatus("metrics front end: read from the collector");
    }
    if (!collecting_) return Internal("metrics front end: the collector sent metrics nobody asked for");
    collected_.append(buf, static_cast<size_t>(n));
    if (collected_.size() < kCollectLengthBytes) return true;
    uint64_t length = 0;
    for (size_t i = 0; i < kCollectLengthBytes; ++i)
      length |= uint64_t{static_cast<unsigned char>(collected_[i])} << (8 * i);
    if (length > kMaxCollectionBytes)
      return Internal("metrics front end: the collector announced " + std::to_string(length) + " bytes");
    if (collected_.size() < kCollectLengthBytes + length) return true;
    if (collected_.size() > kCollectLengthBytes + length)
      return Internal("metrics front end: the collector sent more than it announced");
    cache_ = std::make_shared<const std::string>(collected_.substr(kCollectLengthBytes));
    cached_at_ = Clock::now();
    collected_.clear();
    collected_.shrink_to_fit();
    collecting_ = false;
    for (auto& c : conns_) {
      if (c->state == State::kWaiting) Send(*c, 200, "OK", kMetricsType, cache_);
    }
    return true;
  }

  void Refuse(Connection& c, const Answer& a) {
    c.in.clear();
    c.in.shrink_to_fit();
    c.head_only = false;
    Send(c, a.code, a.reason, "text/plain", std::make_shared<const std::string>(a.detail), a.extra_header);
  }

  void Send(Connection& c, int code, std::string_view reason, std::string_view type,
            std::shared_ptr<const std::string> body, std::string_view extra_header = {}) {
    c.out_head = HeadText(code, reason, type, body->size(), extra_header);
    c.body = c.head_only ? nullptr : std::move(body);
    c.written = 0;
    c.state = State::kWriting;
    Write(c);
  }

  void Write(Connection& c) {
    for (;;) {
      const size_t head_left = c.written < c.out_head.size() ? c.out_head.size() - c.written : 0;
      const size_t body_done = c.written - (c.out_head.size() - head_left);
      const size_t body_left = c.body ? c.body->size() - body_done : 0;
      if (head_left == 0 && body_left == 0) break;
      iovec iov[2];
      int count = 0;
      if (head_left > 0) iov[count++] = {c.out_head.data() + c.written, head_left};
      if (body_left > 0) iov[count++] = {const_cast<char*>(c.body->data()) + body_done, body_left};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = count;
      const ssize_t n = ::sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        return Close(c);
      }
      c.written += static_cast<size_t>(n);
    }
    // Answered: no more to say, and what the client still sends is read
    // and dropped for a while so that it reads the answer, not a reset.
    ::shutdown(c.fd.get(), SHUT_WR);
    c.body.reset();
    c.out_head.clear();
    c.out_head.shrink_to_fit();
    c.state = State::kDraining;
    c.deadline = std::min(c.deadline, Clock::now() + kDrainTime);
  }

  void Drain(Connection& c) {
    char buf[4096];
    const ssize_t n = ::read(c.fd.get(), buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) return Close(c);
    c.drained += static_cast<size_t>(n);
    if (c.drained > kMaxDrain) Close(c);
  }

  void Close(Connection& c) {
    c.fd.reset();
    c.state = State::kClosed;
    c.body.reset();
  }

  const int listen_fd_;
  const int collector_fd_;
  const HttpFrontOptions o_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::shared_ptr<const std::string> cache_;
  Clock::time_point cached_at_;
  bool collecting_ = false;
  std::string collected_;  // length, then text, as it arrives
};

}  // namespace

Status ServeHttpFront(int listen_fd, int collector_fd, const HttpFrontOptions& options) {
  for (int fd : {listen_fd, collector_fd}) RETURN_IF_ERROR_CTX(SetNonBlocking(fd), "metrics front end");
  kHttpFrontLog.Info("answering scrapes (at most {} connections, {} ms per request head of {} bytes at most)",
                     options.max_connections, options.request_timeout.count(), options.max_request_head);
  return Front(listen_fd, collector_fd, options).Run();
}

}  // namespace capsule::metrics
