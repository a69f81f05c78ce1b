// See kube_api.h. httplib (Debian's build, with CPPHTTPLIB_OPENSSL_SUPPORT)
// does the HTTPS; its header stays in this file. A watchdog thread stops a
// call that outlives its deadline, and the response body is read only as
// far as an error message needs.
#include "runtime/install/kube_api.h"

#include <httplib.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtime/common/file_util.h"

namespace capsule::install {
namespace {

constexpr size_t kMaxErrorBodyBytes = 64 * 1024;  // a Kubernetes Status is well under 1 KiB
constexpr size_t kMaxMessageChars = 512;          // of the API's message, in our error
constexpr size_t kMaxExcerptChars = 120;          // of a body that is not a Status
constexpr size_t kMaxTokenBytes = 16 * 1024;      // service account JWTs are ~1 KiB
constexpr char kPemCertificate[] = "-----BEGIN CERTIFICATE-----";

// `s` as one printable line of at most `max` characters.
std::string Printable(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (s.size() > max) out += "...";
  return out;
}

bool ValidPort(std::string_view s, int* port) {
  if (s.empty() || s.size() > 5) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *port = v;
  return v > 0 && v <= 65535;
}

bool ValidHost(std::string_view host) {
  if (host.empty()) return false;
  for (char c : host) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
              c == ':';
    if (!ok) return false;
  }
  return true;
}

// https://HOST[:PORT][/] with HOST a name, an IPv4 or a [bracketed] IPv6 address.
Status ParseApiUrl(std::string_view url, std::string* host, int* port) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("Kubernetes API URL \"" + Printable(url, 200) + "\": " + std::string(why));
  };
  constexpr std::string_view kScheme = "https://";
  if (!url.starts_with(kScheme)) return bad("not https:// (the token is never sent in clear)");
  std::string_view rest = url.substr(kScheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos) return bad("only https://HOST[:PORT] is supported");
  std::string_view port_text;
  if (rest.starts_with('[')) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed [ in the host");
    *host = std::string(rest.substr(1, close - 1));
    std::string_view after = rest.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) return bad("junk after ]");
    if (!after.empty()) port_text = after.substr(1);
  } else {
    size_t colon = rest.find(':');
    *host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (!ValidHost(*host)) return bad("bad host");
  *port = 443;
  if (!port_text.empty() && !ValidPort(port_text, port)) return bad("bad port");
  return Status::Ok();
}

// The in-cluster URL kubelet gives every pod through its environment.
Result<std::string> InClusterUrl() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return FailedPrecondition(
        "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?); pass --kube-api");
  }
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return "https://" + h + ":" + port;
}

Result<std::string> ReadToken(const std::string& path) {
  auto data = ReadFile(path);
  if (!data.ok()) return std::move(data).status().WithContext("read the Kubernetes API token");
  std::string_view t = *data;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ' || t.back() == '\t')) {
    t.remove_suffix(1);
  }
  if (t.empty()) return FailedPrecondition("Kubernetes API token file " + path + " is empty");
  if (t.size() > kMaxTokenBytes) return InvalidArgument("Kubernetes API token file " + path + " is over 16 KiB");
  for (char c : t) {
    if (c <= 0x20 || c >= 0x7f) {
      return InvalidArgument("Kubernetes API token file " + path + " holds a character a bearer token cannot");
    }
  }
  return std::string(t);
}

Status CheckCaFile(const std::string& path) {
  auto data = ReadFile(path);
  if (!data.ok()) return std::move(data).status().WithContext("read the Kubernetes API CA");
  if (data->find(kPemCertificate) == std::string::npos) {
    return FailedPrecondition("Kubernetes API CA file " + path + " holds no PEM certificate");
  }
  return Status::Ok();
}

// Stops `cli` from another thread when the call outlives `limit`; the
// destructor ends the watch.
class CallDeadline {
 public:
  CallDeadline(httplib::ClientImpl& cli, std::chrono::milliseconds limit)
      : cli_(cli), thread_([this, limit] { Watch(limit); }) {}
  CallDeadline(const CallDeadline&) = delete;
  CallDeadline& operator=(const CallDeadline&) = delete;
  ~CallDeadline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  bool expired() const { return expired_.load(); }

 private:
  void Watch(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
    expired_.store(true);
    cli_.stop();
  }

  httplib::ClientImpl& cli_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::atomic<bool> expired_{false};
  std::thread thread_;  // last: starts once the fields above exist
};

// Blocks SIGPIPE on this thread for one call: OpenSSL writes with write(2),
// so a peer that hung up (or the deadline's shutdown) would otherwise kill
// the process. A SIGPIPE raised meanwhile is dropped; the mask is restored.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
    sigset_t pending;
    ::sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;
  ~SigpipeBlocked() {
    if (!was_pending_) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      timespec zero{};
      while (::sigtimedwait(&set, nullptr, &zero) == SIGPIPE) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

// Keeps the first kMaxErrorBodyBytes of an error body; a 2xx body is not
// needed at all, so reading stops at once.
struct BoundedBody {
  std::string data;
  bool truncated = false;
};

// What went wrong below HTTP, for `what` (e.g. "PATCH https://...").
Status TransportError(const httplib::SSLClient& cli, httplib::Error err, bool expired, const std::string& what,
                      const KubeApiOptions& opts, const std::string& host) {
  using E = httplib::Error;
  if (expired) {
    return DeadlineExceeded(what + ": no answer within " + std::to_string(opts.request_deadline_ms) + " ms");
  }
  switch (err) {
    case E::SSLServerVerification: {
      long vr = cli.get_openssl_verify_result();
      if (vr != X509_V_OK) {
        return Status(Code::kUnauthenticated, what + ": the server's certificate does not verify against CA file " +
                                                  opts.ca_file + ": " + X509_verify_cert_error_string(vr));
      }
      return Status(Code::kUnauthenticated, what + ": the server's certificate does not name " + host);
    }
    case E::SSLLoadingCerts:
      return FailedPrecondition(what + ": cannot load CA file " + opts.ca_file);
    case E::ConnectionTimeout:
      return Unavailable(what + ": connect timed out after " + std::to_string(opts.connect_timeout_ms) + " ms");
    case E::Connection:
      return Unavailable(what + ": cannot connect");
    case E::SSLConnection:
      return Unavailable(what + ": TLS handshake failed");
    case E::Read:
      return Unavailable(what + ": no complete answer (read failed or timed out after " +
                         std::to_string(opts.io_timeout_ms) + " ms)");
    case E::Write:
      return Unavailable(what + ": sending the request failed");
    default:
      return Unavailable(what + ": " + httplib::to_string(err));
  }
}

}  // namespace

std::string DescribeErrorBody(std::string_view body, bool truncated) {
  if (truncated) {
    return "error body not read in full (over " + std::to_string(kMaxErrorBodyBytes / 1024) +
           " KiB or cut short), starting \"" + Printable(body, kMaxExcerptChars) + "\"";
  }
  if (body.empty()) return "no response body";
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    std::string out = Printable(j["message"].get<std::string>(), kMaxMessageChars);
    if (j.contains("reason") && j["reason"].is_string() && !j["reason"].get<std::string>().empty()) {
      out += " (reason " + Printable(j["reason"].get<std::string>(), 64) + ")";
    }
    return out;
  }
  return "answer is not a Kubernetes Status: \"" + Printable(body, kMaxExcerptChars) + "\"";
}

Code CodeForHttpStatus(int http_status) {
  switch (http_status) {
    case 400: return Code::kInvalidArgument;
    case 401: return Code::kUnauthenticated;
    case 403: return Code::kPermissionDenied;
    case 404: return Code::kNotFound;
    case 409: return Code::kAborted;
    case 422: return Code::kInvalidArgument;
    case 429: return Code::kUnavailable;
    default: return http_status >= 500 ? Code::kUnavailable : Code::kUnknown;
  }
}

Result<KubeApi> KubeApi::Create(const KubeApiOptions& opts) {
  KubeApi api;
  api.opts_ = opts;
  if (opts.api_url.empty()) {
    ASSIGN_OR_RETURN(api.url_, InClusterUrl());
  } else {
    api.url_ = opts.api_url;
  }
  RETURN_IF_ERROR(ParseApiUrl(api.url_, &api.host_, &api.port_));
  if (api.url_.ends_with('/')) api.url_.pop_back();
  ASSIGN_OR_RETURN(api.token_, ReadToken(opts.token_file));
  RETURN_IF_ERROR(CheckCaFile(opts.ca_file));
  return api;
}

Status KubeApi::MergePatch(const std::string& path, const std::string& json_patch) const {
  const std::string what = "PATCH " + url_ + path;
  SigpipeBlocked no_sigpipe;  // first: outlives the client, whose destructor may write a TLS close
  httplib::SSLClient cli(host_, port_);
  if (!cli.is_valid()) return Internal(what + ": cannot create a TLS context");
  cli.set_ca_cert_path(opts_.ca_file);
  cli.enable_server_certificate_verification(true);
  cli.set_follow_location(false);  // the token goes to this server only
  cli.set_connection_timeout(std::chrono::milliseconds(opts_.connect_timeout_ms));
  cli.set_read_timeout(std::chrono::milliseconds(opts_.io_timeout_ms));
  cli.set_write_timeout(std::chrono::milliseconds(opts_.io_timeout_ms));

  httplib::Request req;
  req.method = "PATCH";
  req.path = path;
  req.body = json_patch;
  req.set_header("Content-Type", "application/merge-patch+json");
  req.set_header("Accept", "application/json");
  req.set_header("Authorization", "Bearer " + token_);
  req.set_header("User-Agent", "capsule-runtime-install");
  httplib::Response res;
  BoundedBody body;
  req.content_receiver = [&res, &body](const char* data, size_t len, uint64_t, uint64_t) {
    if (res.status >= 200 && res.status < 300) return false;  // done: the body is not needed
    size_t room = kMaxErrorBodyBytes - body.data.size();
    body.data.append(data, std::min(len, room));
    if (len > room) body.truncated = true;
    return !body.truncated;
  };
  httplib::Error err = httplib::Error::Success;
  bool expired = false;
  {
    CallDeadline deadline(cli, std::chrono::milliseconds(opts_.request_deadline_ms));
    cli.send(req, res, err);
    expired = deadline.expired();
  }
  if (res.status >= 200 && res.status < 300) return Status::Ok();
  if (res.status <= 0) return TransportError(cli, err, expired, what, opts_, host_);
  // An error body cut short by the peer or the deadline is partial too.
  bool partial = body.truncated || (err != httplib::Error::Success);
  std::string msg = what + ": HTTP " + std::to_string(res.status);
  if (!res.reason.empty()) msg += " " + Printable(res.reason, 64);
  msg += ": " + DescribeErrorBody(body.data, partial);
  return Status(CodeForHttpStatus(res.status), msg);
}

}  // namespace capsule::install
