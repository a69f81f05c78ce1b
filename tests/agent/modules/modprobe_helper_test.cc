// The modprobe helper's resolution, without loading anything into this
// host's kernel: aliases and softdeps as depmod writes them (lines from the
// Debian 6.1 guest kernel's files), and what a request that no tree knows
// answers. Loading for real, in a guest, is tests/e2e (a privileged
// container's bridge and iptables nat rule).
#include "agent/modules/modprobe_helper.h"

#include <gtest/gtest.h>

#include "agent/modules/module_aliases.h"
#include "agent/modules/module_policy.h"
#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::modules {
namespace {

constexpr std::string_view kAliases =
    "# Aliases extracted from modules themselves.\n"
    "alias rtnl-link-bridge bridge\n"
    "alias nft-chain-2-nat nft_chain_nat\n"
    "alias ipt_REDIRECT xt_REDIRECT\n"
    "alias net-pf-16-proto-12-family-nftables nf_tables\n"
    "alias crypto-crc32c crc32c_generic\n"
    "alias crc32c crc32c_generic\n"
    "alias crc32c crc32c-intel\n"
    "alias pci:v00001AF4d00001041sv*sd*bc*sc*i* virtio_net\n"
    "alias broken\n";

TEST(ModuleAliasesTest, ResolvesNamesAndGlobPatternsInFileOrder) {
  ModuleAliases a = ModuleAliases::Parse(kAliases);
  EXPECT_EQ(a.size(), 8u);  // the line without a module is skipped
  EXPECT_EQ(a.Resolve("rtnl-link-bridge"), std::vector<std::string>{"bridge"});
  EXPECT_EQ(a.Resolve("nft-chain-2-nat"), std::vector<std::string>{"nft_chain_nat"});
  EXPECT_EQ(a.Resolve("crc32c"), (std::vector<std::string>{"crc32c_generic", "crc32c_intel"}));
  EXPECT_EQ(a.Resolve("pci:v00001AF4d00001041sv00001AF4sd00001100bc02sc00i00"), std::vector<std::string>{"virtio_net"});
  EXPECT_TRUE(a.Resolve("rtnl-link-nope").empty());
}

TEST(ModuleAliasesTest, SoftdepPreListsOnly) {
  auto s = ParseSoftdepPre("softdep libcrc32c pre: crc32c\nsoftdep nf_x pre: a b post: c\nsoftdep\n# c\n");
  EXPECT_EQ(s["libcrc32c"], std::vector<std::string>{"crc32c"});
  EXPECT_EQ(s["nf_x"], (std::vector<std::string>{"a", "b"}));
}

TEST(ModprobeHelperTest, TheBinaryKnowsItsHelperName) {
  EXPECT_TRUE(IsModprobeHelper(kModprobeHelperPath));
  EXPECT_TRUE(IsModprobeHelper("capsule-modprobe"));
  EXPECT_FALSE(IsModprobeHelper("/init"));
  EXPECT_FALSE(IsModprobeHelper("/sbin/modprobe"));
}

TEST(ModprobeHelperTest, TheHostTreeInTheShareComesBeforeTheImagesOwn) {
  auto trees = ModuleTrees("6.1.0-57-amd64");
  ASSERT_EQ(trees.size(), 2u);
  EXPECT_EQ(trees[0], "/run/capsule/shared/.capsule-modules/6.1.0-57-amd64");
  EXPECT_EQ(trees[1], "/lib/modules/6.1.0-57-amd64");
}

TEST(ModprobeHelperTest, ARequestNoTreeKnowsIsNotFoundNamingItAndTheTreesSearched) {
  auto dir = TempDir::Create("capsule-modprobe");
  ASSERT_OK(dir);
  ASSERT_TRUE(WriteFile(dir->Join("modules.dep"), "kernel/net/bridge/bridge.ko: kernel/net/llc/llc.ko\n"
                                                   "kernel/net/llc/llc.ko:\n").ok());
  ASSERT_OK(WriteFile(dir->Join("modules.alias"), std::string(kAliases)));
  // An alias whose module the tree does not ship, and a plain unknown name.
  for (const char* request : {"nft-chain-2-nat", "no_such_module"}) {
    Status st = LoadModuleRequest(request, {dir->path(), dir->Join("missing-tree")}, ModulePolicy::Default());
    EXPECT_EQ(st.code(), Code::kNotFound) << st.ToString();
    EXPECT_NE(st.message().find(request), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(dir->path()), std::string::npos) << st.message();
  }
  EXPECT_EQ(LoadModuleRequest("", {dir->path()}, ModulePolicy::Default()).code(), Code::kInvalidArgument);
  EXPECT_EQ(LoadModuleRequest(std::string(300, 'x'), {dir->path()}, ModulePolicy::Default()).code(),
            Code::kInvalidArgument);
}

// The kernel asks for a protocol family by alias (net-pf-38 is AF_ALG): a
// module outside the allowlist is refused, naming the module and the
// request, before anything is read for loading (the tree has no .ko files:
// an attempt to load would fail differently).
TEST(ModprobeHelperTest, AModuleOutsideTheAllowlistIsRefusedNamingItAndTheRequest) {
  auto dir = TempDir::Create("capsule-modprobe");
  ASSERT_OK(dir);
  ASSERT_TRUE(WriteFile(dir->Join("modules.dep"), "kernel/crypto/af_alg.ko:\n"
                                                   "kernel/net/can/can.ko:\n").ok());
  ASSERT_OK(WriteFile(dir->Join("modules.alias"), "alias net-pf-38 af_alg\nalias net-pf-29 can\n"));
  for (auto [request, module] : {std::pair{"net-pf-38", "af_alg"}, std::pair{"net-pf-29", "can"},
                                 std::pair{"af_alg", "af_alg"}}) {
    Status st = LoadModuleRequest(request, {dir->path()}, ModulePolicy::Default());
    EXPECT_EQ(st.code(), Code::kPermissionDenied) << st.ToString();
    EXPECT_NE(st.message().find(module), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(request), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("guest.modules_allow"), std::string::npos) << st.message();
  }
  // Allowed by the operator: the load is attempted (and fails here, with no
  // module file, for another reason than the policy).
  Status st = LoadModuleRequest("net-pf-29", {dir->path()}, ModulePolicy::WithExtra({"can"}));
  EXPECT_NE(st.code(), Code::kPermissionDenied) << st.ToString();
  EXPECT_FALSE(st.ok());
}

TEST(ModulePolicyTest, TheBuiltInListHasWhatPodsUseAndNotTheRareFamilies) {
  const ModulePolicy p = ModulePolicy::Default();
  for (const char* m : {"nf_tables", "nft_chain_nat", "nf_nat", "xt_REDIRECT", "ip_tables", "iptable_nat",
                        "ip6table_filter", "ebtable_nat", "ip_set_hash_ip", "br_netfilter", "ip_vs_rr", "bridge",
                        "veth", "vxlan", "tun", "wireguard", "sch_htb", "cls_bpf", "act_mirred", "overlay",
                        "nf-conntrack", "8021q", "libcrc32c"})
    EXPECT_TRUE(p.Allows(m)) << m;
  for (const char* m : {"af_alg", "algif_hash", "algif_skcipher", "can", "can_raw", "can_bcm", "vcan", "rxrpc",
                        "kcm", "smc", "tipc", "sctp", "dccp", "rds", "appletalk", "ax25", "netrom", "rose", "x25",
                        "l2tp_core", "n_hdlc", "bluetooth", "ieee802154", "atm", "vivid", "fuse"})
    EXPECT_FALSE(p.Allows(m)) << m;
}

TEST(ModulePolicyTest, ExtraPatternsAddToTheBuiltInListAndTheFileRoundTrips) {
  const ModulePolicy p = ModulePolicy::WithExtra({"can-*", "sctp", "bad pattern", "x/y"});
  EXPECT_EQ(p.size(), ModulePolicy::Default().size() + 2) << "invalid patterns are skipped";
  EXPECT_TRUE(p.Allows("can_raw"));
  EXPECT_TRUE(p.Allows("can-bcm"));
  EXPECT_TRUE(p.Allows("sctp"));
  EXPECT_FALSE(p.Allows("can")) << "can-* does not match can itself";
  EXPECT_TRUE(p.Allows("bridge"));

  auto dir = TempDir::Create("capsule-module-policy");
  ASSERT_OK(dir);
  // Its directory need not exist yet: at boot /run is an empty tmpfs.
  const std::string path = dir->Join("capsule/modules.allow");
  ASSERT_OK(WriteModulePolicy(p, path));
  const ModulePolicy read = ReadModulePolicy(path);
  EXPECT_EQ(read.ToText(), p.ToText());
  EXPECT_TRUE(read.Allows("sctp"));
  // A missing file means the built-in list, never everything.
  const ModulePolicy fallback = ReadModulePolicy(dir->Join("missing"));
  EXPECT_EQ(fallback.ToText(), ModulePolicy::Default().ToText());
  EXPECT_FALSE(fallback.Allows("sctp"));
}

}  // namespace
}  // namespace capsule::agent::modules
