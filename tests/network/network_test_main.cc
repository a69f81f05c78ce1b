// main() of the pod network tests: as root, moves the test program into
// private network and mount namespaces before any thread exists, so the
// namespaces and mounts the tests make can never reach the host's and
// vanish with the process even if it crashes. Without root the tests skip.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (::geteuid() == 0) {
    if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) {
      std::perror("unshare(CLONE_NEWNET | CLONE_NEWNS)");
      return 1;
    }
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      std::perror("make / private");
      return 1;
    }
  }
  return RUN_ALL_TESTS();
}
