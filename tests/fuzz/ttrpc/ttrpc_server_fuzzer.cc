// libFuzzer target: raw bytes from a "client" into a real Server connection
// (socketpair + ServeConnection). Whatever arrives, the server must answer
// only with well-formed response frames and then close, without crashing.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "containerd/task/v2/shim.pb.h"
#include "runtime/common/logging.h"
#include "runtime/ttrpc/frame.h"
#include "runtime/ttrpc/server.h"
#include "runtime/ttrpc/socket_io.h"
#include "ttrpc/request.pb.h"

namespace {

using capsule::Result;
using capsule::UniqueFd;
namespace log = capsule::log;
namespace rpc = capsule::ttrpc;
namespace task = ::containerd::task::v2;

// A server per input, shut down before the input ends: Shutdown joins the
// connection's threads, so nothing of one input is still running (and
// holding memory LeakSanitizer would count) when the next begins.
std::unique_ptr<rpc::Server> NewServer() {
  static const bool quiet = [] {
    log::SetLevel(log::Level::kError);  // garbage is expected; keep output readable
    return true;
  }();
  (void)quiet;
  {
    auto s = std::make_unique<rpc::Server>(rpc::ServerOptions{});
    s->Register("svc", "Echo", [](const rpc::CallContext&, std::string_view p) {
      return Result<std::string>(std::string(p));
    });
    s->Register("svc", "Fail", [](const rpc::CallContext& ctx, std::string_view) {
      return Result<std::string>(capsule::InvalidArgument("fail " + ctx.Get("k").value_or("")));
    });
    s->RegisterMethod<task::StateRequest, task::StateResponse>(
        "containerd.task.v2.Task", "State",
        [](const rpc::CallContext&, const task::StateRequest& r) {
          task::StateResponse resp;
          resp.set_id(r.id());
          return Result<task::StateResponse>(resp);
        });
    return s;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  UniqueFd client(sv[0]);
  std::unique_ptr<rpc::Server> server = NewServer();
  if (!server->ServeConnection(UniqueFd(sv[1])).ok()) __builtin_trap();
  // Inputs are far smaller than the socket buffers, so writing everything
  // before reading cannot deadlock against the server's replies.
  (void)rpc::SendAll(client.get(), std::string_view(reinterpret_cast<const char*>(data), size));
  ::shutdown(client.get(), SHUT_WR);
  rpc::FrameDecoder decoder;
  char buf[65536];
  while (true) {
    ssize_t n = ::read(client.get(), buf, sizeof buf);
    if (n <= 0) break;
    decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
    while (auto f = decoder.Next()) {
      if (f->oversized || f->header.type != 2 || f->header.flags != 0) __builtin_trap();
      ::ttrpc::Response resp;
      if (!resp.ParseFromString(f->payload) || !resp.has_status()) __builtin_trap();
    }
  }
  if (!decoder.AtFrameBoundary()) __builtin_trap();  // a torn response
  server->Shutdown();
  return 0;
}
