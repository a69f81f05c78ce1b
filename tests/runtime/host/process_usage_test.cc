#include "runtime/host/process_usage.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace capsule {
namespace {

TEST(ProcessUsageTest, OurOwnMemoryAndCpuAreSeen) {
  std::vector<char> touched(64 << 20, 1);  // 64 MiB resident
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile uint64_t spin = 0;
  while (std::chrono::steady_clock::now() < end) spin = spin + touched[spin % touched.size()];
  auto u = ProcessUsage(::getpid());
  ASSERT_OK(u);
  EXPECT_GE(u->rss_bytes, 64u << 20);
  EXPECT_GT(u->cpu_seconds, 0.1);
}

// A child that sleeps adds (almost) nothing to its threads' busy time; one
// that spins adds about the time it spun.
TEST(ProcessUsageTest, ThreadsBusyTimeGrowsOnlyWhileAThreadRuns) {
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(1);
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    volatile uint64_t spin = 0;
    while (std::chrono::steady_clock::now() < end) spin = spin + 1;
    ::pause();
    ::_exit(0);
  }
  ::close(go[0]);
  auto asleep = ThreadsBusyNs(child);
  ASSERT_OK(asleep);
  ::usleep(100 * 1000);
  auto still = ThreadsBusyNs(child);
  ASSERT_OK(still);
  EXPECT_LT(*still - *asleep, 20'000'000u) << "a sleeping process counted busy";
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  ::usleep(400 * 1000);  // its 200 ms of spinning are over
  auto spun = ThreadsBusyNs(child);
  ASSERT_OK(spun);
  EXPECT_GE(*spun - *still, 150'000'000u);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(go[1]);
  EXPECT_EQ(ThreadsBusyNs(child).status().code(), Code::kNotFound);
}

TEST(ProcessUsageTest, AGoneProcessIsNotFound) {
  EXPECT_EQ(ProcessUsage(0x3ffffff0).status().code(), Code::kNotFound);
  EXPECT_EQ(ThreadsBusyNs(0x3ffffff0).status().code(), Code::kNotFound);
  EXPECT_EQ(ReadProcessMemory(0x3ffffff0).status().code(), Code::kNotFound);
  EXPECT_EQ(TcgCacheBytes(0x3ffffff0).status().code(), Code::kNotFound);
  EXPECT_EQ(OwnBytesIn(0x3ffffff0, "x").status().code(), Code::kNotFound);
}

// Anonymous memory we wrote is ours alone; a shared mapping of a memfd that
// a child maps too is not, and Pss splits it between us.
TEST(ProcessUsageTest, OwnMemoryIsWhatNoOtherProcessMaps) {
  const int fd = ::memfd_create("usage-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 32 << 20), 0);
  char* shared = static_cast<char*>(::mmap(nullptr, 32 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(shared, MAP_FAILED);
  int go[2], ready[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(ready), 0);
  // Forked before we allocate: our anonymous pages after this are ours alone.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(1);
    volatile char sum = 0;
    for (size_t i = 0; i < (32u << 20); i += 4096) sum = static_cast<char>(sum + shared[i]);  // maps every page
    (void)!::write(ready[1], "x", 1);
    ::pause();
    ::_exit(0);
  }
  std::vector<char> own(32 << 20, 1);
  for (size_t i = 0; i < (32u << 20); i += 4096) shared[i] = 1;
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  char x;
  ASSERT_EQ(::read(ready[0], &x, 1), 1);
  auto m = ReadProcessMemory(::getpid());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::munmap(shared, 32 << 20);
  for (int f : {fd, go[0], go[1], ready[0], ready[1]}) ::close(f);
  ASSERT_OK(m);
  EXPECT_GE(m->rss, 64u << 20);
  EXPECT_GE(m->rss_shmem, 32u << 20);
  EXPECT_GE(m->own_bytes, 32u << 20) << "our own vector";
  EXPECT_LT(m->own_bytes, m->rss - (16u << 20)) << "the memfd pages the child maps too are not ours";
  EXPECT_LT(m->pss, m->rss) << "Pss halves the pages shared with the child";
  EXPECT_EQ(own[4096], 1);
}

// A copy-on-write clone's case: pages of a file mapped private that only we
// map are still the file's (smaps counts them Private_*); the pages we wrote
// are copies of our own.
TEST(ProcessUsageTest, AFilesPagesOnlyWeMapAreNotOursButOurCopiesOfThemAre) {
  constexpr size_t kFile = 16 << 20, kWritten = 4 << 20;
  const int fd = ::memfd_create("usage-template", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::vector<char> page(4096, 7);
  for (size_t at = 0; at < kFile; at += page.size()) ASSERT_EQ(::write(fd, page.data(), page.size()), 4096);
  auto before = ReadProcessMemory(::getpid());
  ASSERT_OK(before);
  char* ram = static_cast<char*>(::mmap(nullptr, kFile, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0));
  ASSERT_NE(ram, MAP_FAILED);
  volatile char sum = 0;
  for (size_t i = 0; i < kFile; i += 4096) sum = static_cast<char>(sum + ram[i]);
  for (size_t i = 0; i < kWritten; i += 4096) ram[i] = 1;
  auto after = ReadProcessMemory(::getpid());
  auto in_file = OwnBytesIn(::getpid(), "usage-template");
  ::munmap(ram, kFile);
  ::close(fd);
  ASSERT_OK(after);
  EXPECT_GE(after->rss_shmem, kFile - kWritten) << "the pages read are mapped";
  EXPECT_GE(after->own_bytes, before->own_bytes + kWritten) << "the pages written are ours";
  EXPECT_LT(after->own_bytes, before->own_bytes + kWritten + (4 << 20)) << "the pages only read are the file's";
  ASSERT_OK(in_file);
  EXPECT_EQ(*in_file, kWritten) << "our copies, in the file's mapping";
  EXPECT_EQ(OwnBytesIn(::getpid(), "no-such-file").value_or(1), 0u);
}

}  // namespace
}  // namespace capsule
