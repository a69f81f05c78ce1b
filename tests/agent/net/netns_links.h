// Links for the network tests, made with iproute2 inside the test's private
// network namespace (netns_main.cc): a veth pair that is deleted again when
// the object goes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/support/command.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::net::testing {

inline bool InPrivateNetns() { return ::geteuid() == 0; }

// iproute2's `ip` (spawning does not search PATH).
inline std::string IpPath() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "ip";  // the spawn error then names it
}

// Runs `ip args...`; the test fails with ip's stderr if it does.
inline void Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {IpPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = capsule::testing::RunCommand(argv, std::chrono::seconds(10));
  ASSERT_OK(r);
  ASSERT_TRUE(r->ok()) << "ip " << ::testing::PrintToString(args) << ": " << r->err;
}

class VethPair {
 public:
  VethPair(std::string a, std::string b) : a_(std::move(a)), b_(std::move(b)) {
    Ip({"link", "add", a_, "type", "veth", "peer", "name", b_});
  }
  ~VethPair() { (void)capsule::testing::RunCommand({IpPath(), "link", "del", a_}, std::chrono::seconds(10)); }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  std::string a_, b_;
};

}  // namespace capsule::agent::net::testing
