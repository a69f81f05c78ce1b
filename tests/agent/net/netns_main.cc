// main() of netlink_network_test: moves the whole test program into a
// fresh network namespace before any thread exists, so every link, address
// and route the tests make (and the capsule-agent they spawn, which
// inherits it) lives there and vanishes with the process. Without root the
// tests skip.
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::geteuid() == 0 && ::unshare(CLONE_NEWNET) != 0) {
    std::perror("unshare(CLONE_NEWNET)");
    return 1;
  }
  return RUN_ALL_TESTS();
}
