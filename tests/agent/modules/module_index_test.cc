// Load order from a modules.dep sample taken from Debian's 6.1 kernel.
#include "agent/modules/module_index.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace capsule::agent::modules {
namespace {

constexpr std::string_view kSample = R"(kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/net/vmw_vsock/vsock.ko:
kernel/net/vmw_vsock/vmw_vsock_virtio_transport_common.ko: kernel/net/vmw_vsock/vsock.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/net/vmw_vsock/vmw_vsock_virtio_transport.ko: kernel/net/vmw_vsock/vmw_vsock_virtio_transport_common.ko kernel/net/vmw_vsock/vsock.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/fs/fuse/fuse.ko:
kernel/fs/fuse/virtiofs.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko kernel/fs/fuse/fuse.ko
kernel/fs/overlayfs/overlay.ko:
kernel/net/core/failover.ko:
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/sound/snd-hda.ko.xz:
)";

ModuleIndex Sample() {
  auto index = ModuleIndex::Parse(kSample, "modules.dep");
  EXPECT_OK(index);
  return std::move(index).value();
}

size_t Pos(const std::vector<std::string>& order, std::string_view name) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (ModuleNameFromPath(order[i]) == name) return i;
  }
  ADD_FAILURE() << name << " missing from the order";
  return order.size();
}

TEST(ModuleIndex, NamesFromPaths) {
  EXPECT_EQ(ModuleNameFromPath("kernel/fs/fuse/fuse.ko"), "fuse");
  EXPECT_EQ(ModuleNameFromPath("kernel/sound/snd-hda.ko.xz"), "snd_hda");
  EXPECT_EQ(ModuleNameFromPath("virtio_pci.ko.zst"), "virtio_pci");
}

TEST(ModuleIndex, EveryModuleComesAfterItsDependencies) {
  auto index = Sample();
  auto order = index.LoadOrder({"virtio_pci", "vmw_vsock_virtio_transport", "virtiofs", "overlay", "virtio_net",
                                "virtio_blk"});
  ASSERT_OK(order);
  EXPECT_EQ(order->size(), 15u);  // every module in the sample but snd-hda, once
  for (const auto& path : *order) {
    auto deps = index.DependenciesOf(ModuleNameFromPath(path));
    ASSERT_OK(deps);
    for (const auto& dep : *deps) EXPECT_LT(Pos(*order, dep), Pos(*order, ModuleNameFromPath(path))) << path;
  }
  // The PCI transport first, so devices bind as their drivers arrive.
  EXPECT_LT(Pos(*order, "virtio_pci"), Pos(*order, "vmw_vsock_virtio_transport"));
  EXPECT_EQ(ModuleNameFromPath(order->back()), "virtio_blk");
}

TEST(ModuleIndex, RequestOrderKeptAmongIndependentModules) {
  auto order = Sample().LoadOrder({"overlay", "fuse"});
  ASSERT_OK(order);
  EXPECT_EQ(*order, (std::vector<std::string>{"kernel/fs/overlayfs/overlay.ko", "kernel/fs/fuse/fuse.ko"}));
}

TEST(ModuleIndex, DashAndUnderscoreAreTheSameName) {
  auto index = Sample();
  EXPECT_TRUE(index.Contains("snd_hda"));
  EXPECT_TRUE(index.Contains("snd-hda"));
  EXPECT_EQ(*index.PathOf("virtio-blk"), "kernel/drivers/block/virtio_blk.ko");
}

TEST(ModuleIndex, MissingModuleIsNotFoundAndNamesIt) {
  auto order = Sample().LoadOrder({"virtio_pci", "nosuch"});
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.status().code(), Code::kNotFound);
  EXPECT_NE(order.status().message().find("nosuch"), std::string::npos);
}

TEST(ModuleIndex, MissingDependencySaysWhoNeedsIt) {
  auto index = ModuleIndex::Parse("a.ko: b.ko\n", "dep");
  ASSERT_OK(index);
  auto order = index->LoadOrder({"a"});
  ASSERT_FALSE(order.ok());
  EXPECT_NE(order.status().message().find("needed by a"), std::string::npos);
}

TEST(ModuleIndex, CycleIsReported) {
  auto index = ModuleIndex::Parse("a.ko: b.ko\nb.ko: a.ko\n", "dep");
  ASSERT_OK(index);
  auto order = index->LoadOrder({"a"});
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(order.status().message().find("cycle"), std::string::npos);
}

TEST(ModuleIndex, MalformedLineNamesFileAndLine) {
  auto index = ModuleIndex::Parse("a.ko:\nnot a module line\n", "/lib/modules/x/modules.dep");
  ASSERT_FALSE(index.ok());
  EXPECT_EQ(index.status().code(), Code::kInvalidArgument);
  EXPECT_NE(index.status().message().find("modules.dep:2"), std::string::npos);
}

TEST(ModuleIndex, SubsetKeepsOnlyShippedModulesAndReparses) {
  auto index = Sample();
  auto order = index.LoadOrder({"virtiofs"});
  ASSERT_OK(order);
  std::string text = index.Subset(*order);
  auto sub = ModuleIndex::Parse(text, "subset");
  ASSERT_OK(sub) << text;
  EXPECT_EQ(sub->size(), 4u);
  EXPECT_FALSE(sub->Contains("overlay"));
  auto again = sub->LoadOrder({"virtiofs"});
  ASSERT_OK(again);
  EXPECT_EQ(*again, *order);
}

TEST(ModuleIndex, BuiltinList) {
  auto names = ParseBuiltinModules("kernel/drivers/char/hw_random/rng-core.ko\n\nkernel/fs/ext4/ext4.ko\n");
  EXPECT_EQ(names.size(), 2u);
  EXPECT_EQ(names.count("rng_core"), 1u);
  EXPECT_EQ(names.count("ext4"), 1u);
}

}  // namespace
}  // namespace capsule::agent::modules
