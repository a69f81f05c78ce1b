// PodNamespaces: which container anchors the pod's namespaces and what the
// others join; pure bookkeeping, no system calls.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "agent/pod/pod_namespaces.h"
#include "runtime/common/reasons.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::pod {
namespace {

using oci::NamespaceType;

oci::Spec SpecWith(std::map<std::string, std::string> annotations, std::string pid_path = "") {
  oci::Spec s;
  s.annotations = std::move(annotations);
  s.linux.namespaces = {{NamespaceType::kPid, pid_path}, {NamespaceType::kIpc, "/proc/9/ns/ipc"},
                        {NamespaceType::kMount, ""}};
  return s;
}

const std::map<std::string, std::string> kSandbox = {{"io.kubernetes.cri.container-type", "sandbox"},
                                                     {"io.kubernetes.cri.sandbox-id", "pause"}};
const std::map<std::string, std::string> kApp = {{"io.kubernetes.cri.container-type", "container"},
                                                 {"io.kubernetes.cri.sandbox-id", "pause"}};

TEST(PodNamespacesTest, AnnotationsGiveTheRole) {
  auto none = RoleFromAnnotations(SpecWith({}));
  ASSERT_OK(none);
  EXPECT_EQ(none->kind, ContainerKind::kUnannotated);
  EXPECT_EQ(RoleFromAnnotations(SpecWith(kSandbox))->kind, ContainerKind::kSandbox);
  auto app = RoleFromAnnotations(SpecWith(kApp));
  EXPECT_EQ(app->kind, ContainerKind::kContainer);
  EXPECT_EQ(app->sandbox_id, "pause");
  auto bogus = RoleFromAnnotations(SpecWith({{"io.kubernetes.cri.container-type", "pod"}}));
  EXPECT_EQ(bogus.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bogus.status().message().find("io.kubernetes.cri.container-type"), std::string::npos);
  auto orphan = RoleFromAnnotations(SpecWith({{"io.kubernetes.cri.container-type", "container"}}));
  EXPECT_NE(orphan.status().message().find("io.kubernetes.cri.sandbox-id"), std::string::npos);
}

TEST(PodNamespacesTest, FirstUnannotatedContainerAnchorsAndTheNextJoinIpcAndUts) {
  PodNamespaces pod(false);
  oci::Spec a = SpecWith({});
  auto first = pod.Plan("a", {}, false, &a);
  ASSERT_OK(first);
  EXPECT_TRUE(first->anchor);
  pod.Created("a", *first);
  EXPECT_EQ(pod.anchor(), "a");
  oci::Spec b = SpecWith({});
  auto second = pod.Plan("b", {}, false, &b);
  ASSERT_OK(second);
  EXPECT_FALSE(second->anchor);
  EXPECT_EQ(second->share_from, "a");
  EXPECT_EQ(second->share_types, (std::vector<NamespaceType>{NamespaceType::kIpc, NamespaceType::kUts}));
  for (const auto& ns : b.linux.namespaces) EXPECT_TRUE(ns.path.empty()) << "host path kept";
}

TEST(PodNamespacesTest, PidIsSharedWhenRequestSandboxOrSpecAsks) {
  const std::vector<NamespaceType> with_pid = {NamespaceType::kIpc, NamespaceType::kUts, NamespaceType::kPid};
  for (int way = 0; way < 3; ++way) {
    PodNamespaces pod(/*sandbox_pidns=*/way == 1);
    oci::Spec a = SpecWith({});
    pod.Created("a", *pod.Plan("a", {}, false, &a));
    oci::Spec b = SpecWith({}, way == 2 ? "/proc/77/ns/pid" : "");
    auto plan = pod.Plan("b", {}, /*request_pidns=*/way == 0, &b);
    ASSERT_OK(plan);
    EXPECT_EQ(plan->share_types, with_pid) << "way " << way;
  }
}

TEST(PodNamespacesTest, CriSandboxIsTheAnchorAndContainersMustNameIt) {
  PodNamespaces pod(false);
  oci::Spec app = SpecWith(kApp);
  auto early = pod.Plan("app", *RoleFromAnnotations(app), false, &app);
  EXPECT_EQ(early.status().code(), Code::kFailedPrecondition);
  EXPECT_REASON(early, reason::kSandboxContainerOrder);
  oci::Spec pause = SpecWith(kSandbox);
  pod.Created("pause", *pod.Plan("pause", *RoleFromAnnotations(pause), false, &pause));
  auto plan = pod.Plan("app", *RoleFromAnnotations(app), false, &app);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->share_from, "pause");
  oci::Spec second = SpecWith(kSandbox);
  auto dup = pod.Plan("pause2", *RoleFromAnnotations(second), false, &second);
  EXPECT_EQ(dup.status().code(), Code::kFailedPrecondition);
  EXPECT_REASON(dup, reason::kSandboxContainerOrder);
  EXPECT_NE(dup.status().message().find("container pause already is"), std::string::npos) << "it names the one there";
  oci::Spec other = SpecWith({{"io.kubernetes.cri.container-type", "container"},
                              {"io.kubernetes.cri.sandbox-id", "elsewhere"}});
  EXPECT_EQ(pod.Plan("x", *RoleFromAnnotations(other), false, &other).status().code(), Code::kFailedPrecondition);
}

TEST(PodNamespacesTest, RemovingTheAnchorLetsTheNextContainerAnchor) {
  PodNamespaces pod(false);
  oci::Spec a = SpecWith({});
  pod.Created("a", *pod.Plan("a", {}, false, &a));
  pod.Removed("b");  // not the anchor: no change
  EXPECT_EQ(pod.anchor(), "a");
  pod.Removed("a");
  EXPECT_FALSE(pod.anchor().has_value());
  oci::Spec c = SpecWith({});
  EXPECT_TRUE(pod.Plan("c", {}, false, &c)->anchor);
}

}  // namespace
}  // namespace capsule::agent::pod
