// FindPod: which VM `capsule-runtime exec POD` means.
#include "runtime/vm/pod_lookup.h"

#include <gtest/gtest.h>

namespace capsule::vm {
namespace {

VmListing Vm(const std::string& id, const std::string& sandbox, const std::string& ns = "", const std::string& name = "") {
  VmListing l;
  l.id = id;
  l.state_dir = "/run/capsule/vm/" + id;
  if (!sandbox.empty()) {
    PodRecord p;
    p.sandbox_id = sandbox;
    p.ns = "k8s.io";
    p.pod_namespace = ns;
    p.pod_name = name;
    l.pod = p;
  }
  return l;
}

const std::vector<VmListing> kVms = {
    Vm("vm-a", "abcdef0123", "default", "web"),
    Vm("vm-b", "abcd99", "team", "web"),
    Vm("vm-c", "ffee00"),
    Vm("vm-idle", ""),  // a pool VM: serves no pod
};

TEST(PodLookupTest, SandboxIdNamespaceNameVmIdAndAUniquePrefixEachFindThePod) {
  EXPECT_EQ(FindPod(kVms, "abcdef0123")->id, "vm-a");
  EXPECT_EQ(FindPod(kVms, "team/web")->id, "vm-b");
  EXPECT_EQ(FindPod(kVms, "vm-c")->id, "vm-c");
  EXPECT_EQ(FindPod(kVms, "abcde")->id, "vm-a");
  EXPECT_EQ(FindPod(kVms, "ffee")->id, "vm-c");
  // An exact id wins over being another's prefix.
  EXPECT_EQ(FindPod(kVms, "abcd99")->id, "vm-b");
}

TEST(PodLookupTest, UnknownShortAmbiguousAndIdleAreErrorsNamingTheArgument) {
  auto none = FindPod(kVms, "nope-nope");
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  EXPECT_NE(none.status().message().find("\"nope-nope\""), std::string::npos) << none.status().message();
  // Too short to be a prefix.
  EXPECT_EQ(FindPod(kVms, "ffe").status().code(), Code::kNotFound);
  auto both = FindPod(kVms, "abcd");
  EXPECT_EQ(both.status().code(), Code::kInvalidArgument);
  EXPECT_NE(both.status().message().find("default/web (abcdef0123)"), std::string::npos) << both.status().message();
  EXPECT_NE(both.status().message().find("team/web (abcd99)"), std::string::npos) << both.status().message();
  // A VM with no pod is not a pod, even by its id.
  EXPECT_EQ(FindPod(kVms, "vm-idle").status().code(), Code::kNotFound);
  EXPECT_EQ(FindPod(kVms, "").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FindPod(kVms, "default/nope").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace capsule::vm
