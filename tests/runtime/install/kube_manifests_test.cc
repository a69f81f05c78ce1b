// The Kubernetes manifests Capsule ships: every service account they grant
// a write on Nodes is held to its own Node's capsule.io/runtime label by a
// ValidatingAdmissionPolicy (RBAC cannot narrow a ClusterRole to one node)
// that is bound. The CEL itself is evaluated by the API server only; this
// checks the manifests stay wired the way SECURITY.md says.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace capsule::install {
namespace {

std::string SourceDir() {
  const char* s = std::getenv("CAPSULE_SOURCE_DIR");
  return s ? s : ".";
}

class KubeManifestsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KubeManifestsTest, NodeWritersAreHeldToTheirOwnNodesLabelByABoundPolicy) {
  const std::vector<YAML::Node> docs = YAML::LoadAllFromFile(SourceDir() + "/deploy/kubernetes/" + GetParam());
  std::map<std::string, bool> writes_nodes;  // ClusterRole -> may patch/update nodes
  std::map<std::string, std::string> bound;  // service account -> ClusterRole
  std::map<std::string, std::string> policy_of;  // policy -> its matchConditions, joined
  std::set<std::string> bindings;
  for (const YAML::Node& d : docs) {
    const std::string kind = d["kind"].as<std::string>("");
    const std::string name = d["metadata"]["name"].as<std::string>("");
    if (kind == "ClusterRole") {
      for (const auto& rule : d["rules"]) {
        bool nodes = false, write = false;
        for (const auto& r : rule["resources"]) nodes |= r.as<std::string>() == "nodes";
        for (const auto& v : rule["verbs"]) {
          const std::string verb = v.as<std::string>();
          write |= verb == "patch" || verb == "update" || verb == "*";
        }
        writes_nodes[name] |= nodes && write;
      }
    } else if (kind == "ClusterRoleBinding") {
      for (const auto& s : d["subjects"])
        if (s["kind"].as<std::string>("") == "ServiceAccount")
          bound[s["namespace"].as<std::string>("") + ":" + s["name"].as<std::string>("")] =
              d["roleRef"]["name"].as<std::string>("");
    } else if (kind == "ValidatingAdmissionPolicy") {
      EXPECT_EQ(d["spec"]["failurePolicy"].as<std::string>(""), "Fail") << name;
      std::string conditions;
      for (const auto& c : d["spec"]["matchConditions"]) conditions += c["expression"].as<std::string>("") + "\n";
      std::string validations;
      for (const auto& v : d["spec"]["validations"]) validations += v["expression"].as<std::string>("") + "\n";
      EXPECT_NE(validations.find("authentication.kubernetes.io/node-name"), std::string::npos) << name;
      EXPECT_NE(validations.find("capsule.io/runtime"), std::string::npos) << name;
      policy_of[name] = conditions;
    } else if (kind == "ValidatingAdmissionPolicyBinding") {
      bool denies = false;
      for (const auto& a : d["spec"]["validationActions"]) denies |= a.as<std::string>() == "Deny";
      if (denies) bindings.insert(d["spec"]["policyName"].as<std::string>(""));
    }
  }
  int writers = 0;
  for (const auto& [account, role] : bound) {
    if (!writes_nodes[role]) continue;
    ++writers;
    const std::string user = "system:serviceaccount:" + account;
    bool held = false;
    for (const auto& [policy, conditions] : policy_of)
      held |= bindings.count(policy) != 0 && conditions.find("'" + user + "'") != std::string::npos;
    EXPECT_TRUE(held) << account << " may patch Nodes and no bound policy holds it to its own Node";
  }
  EXPECT_GT(writers, 0) << "the manifest grants no Node writes: this test checks nothing";
}

INSTANTIATE_TEST_SUITE_P(Shipped, KubeManifestsTest,
                         ::testing::Values("capsule-deploy.yaml", "capsule-cleanup.yaml"),
                         [](const auto& p) { return p.param.substr(8, p.param.find('.') - 8); });

}  // namespace
}  // namespace capsule::install
