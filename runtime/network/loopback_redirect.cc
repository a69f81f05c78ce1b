#include "runtime/network/loopback_redirect.h"

#include <nftables/libnftables.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include "runtime/common/logging.h"
#include "runtime/network/netns.h"

namespace capsule::network {
namespace {

const log::Logger kLoopbackRedirectLog("network");

struct NftCtxDeleter {
  void operator()(nft_ctx* c) const { nft_ctx_free(c); }
};

// On the calling thread, which is inside the target netns: libnftables
// opens its netlink socket in the thread's namespace.
Status RunHere(const std::string& script) {
  std::unique_ptr<nft_ctx, NftCtxDeleter> ctx(nft_ctx_new(NFT_CTX_DEFAULT));
  if (!ctx) return Internal("nftables: nft_ctx_new failed");
  nft_ctx_buffer_output(ctx.get());
  nft_ctx_buffer_error(ctx.get());
  if (nft_run_cmd_from_buffer(ctx.get(), script.c_str()) != 0) {
    std::string err = nft_ctx_get_error_buffer(ctx.get());
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    return FailedPrecondition("nftables: " + (err.empty() ? std::string("the command failed") : err));
  }
  return Status::Ok();
}

}  // namespace

std::string LoopbackRedirectScript(uint16_t to_port, bool ipv6) {
  std::string s = fmt::format(
      "add table inet {0}\n"
      "add chain inet {0} output {{ type nat hook output priority -100 ; policy accept ; }}\n"
      "add rule inet {0} output meta l4proto tcp ip daddr 127.0.0.0/8 redirect to :{1}\n",
      kPortForwardTable, to_port);
  if (ipv6) s += fmt::format("add rule inet {0} output meta l4proto tcp ip6 daddr ::1 redirect to :{1}\n", kPortForwardTable, to_port);
  return s;
}

Status RunNftablesIn(const std::string& netns_path, const std::string& script) {
  ASSIGN_OR_RETURN(NetnsGuard guard, NetnsGuard::Enter(netns_path));
  return RunHere(script);
}

Result<std::unique_ptr<LoopbackRedirect>> LoopbackRedirect::Install(const std::string& netns_path, uint16_t to_port,
                                                                    bool ipv6) {
  // A table left by an earlier shim of this pod (killed before it removed
  // it) is replaced, not added to.
  const std::string script = fmt::format("add table inet {0}\ndelete table inet {0}\n", kPortForwardTable) +
                             LoopbackRedirectScript(to_port, ipv6);
  RETURN_IF_ERROR_CTX(RunNftablesIn(netns_path, script), "redirect loopback TCP to port " + std::to_string(to_port) +
                                                             " in netns " + netns_path);
  return std::make_unique<LoopbackRedirect>(Token{}, netns_path);
}

LoopbackRedirect::~LoopbackRedirect() {
  if (Status st = Remove(); !st.ok()) kLoopbackRedirectLog.Warn("{}", st.ToString());
}

Status LoopbackRedirect::Remove() {
  if (removed_) return Status::Ok();
  removed_ = true;
  struct stat st {};
  if (::stat(netns_path_.c_str(), &st) != 0) return Status::Ok();  // the netns is gone, and the table with it
  return RunNftablesIn(netns_path_, fmt::format("delete table inet {}\n", kPortForwardTable))
      .WithContext("remove the port-forward redirect from netns " + netns_path_);
}

}  // namespace capsule::network
