// LogGuard keeps every guest-writable log of a VM dir within its bound
// while writers keep appending, and stops with its owner.
#include "runtime/vm/log_guard.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"

namespace capsule::vm {
namespace {

using namespace std::chrono_literals;

TEST(LogGuardTest, NamesTheConsoleAndEachDaemonLogOfTheVmDir) {
  auto files = LogGuard::GuestWritableLogs("/run/capsule/vm/pod1");
  for (const char* name : {"console.log", "qemu.log", "virtiofsd.log", "vsockd.log"}) {
    EXPECT_NE(std::find(files.begin(), files.end(), std::string("/run/capsule/vm/pod1/") + name), files.end()) << name;
  }
}

TEST(LogGuardTest, AFloodingWriterStaysWithinTheBoundUntilTheGuardStops) {
  auto dir = TempDir::Create("log-guard");
  ASSERT_TRUE(dir.ok());
  const auto files = LogGuard::GuestWritableLogs(dir->path());
  std::vector<UniqueFd> writers;
  for (const auto& f : files) {
    writers.emplace_back(::open(f.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    ASSERT_TRUE(writers.back()) << f;
  }
  const std::string chunk(4096, 'g');
  LogGuardOptions o;
  o.max_bytes = 64 << 10;
  o.keep_bytes = 8 << 10;
  o.interval = 10ms;
  uint64_t peak = 0;
  {
    LogGuard guard("pod1", files, o);
    // 4 MiB into each file, at a pace the guard can follow (a guest's
    // console under TCG is far slower than this).
    for (int i = 0; i < 1024; ++i) {
      for (auto& w : writers) ASSERT_EQ(::write(w.get(), chunk.data(), chunk.size()), 4096);
      if (i % 64 == 63) std::this_thread::sleep_for(15ms);
      for (const auto& f : files) peak = std::max(peak, FileSize(f).value_or(0));
    }
    guard.CheckNow();
    for (const auto& f : files) EXPECT_LE(FileSize(f).value_or(0), o.max_bytes) << f;
    EXPECT_GE(guard.dropped_bytes(), 4u * ((4u << 20) - o.max_bytes));
  }
  // Bounded by the limit plus what was written in one interval.
  EXPECT_LE(peak, o.max_bytes + (256u << 10));
  // Stopped: nothing trims any more.
  for (auto& w : writers)
    for (int i = 0; i < 32; ++i) ASSERT_EQ(::write(w.get(), chunk.data(), chunk.size()), 4096);
  const uint64_t grown = FileSize(files[0]).value_or(0);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(FileSize(files[0]).value_or(0), grown);
  EXPECT_GT(grown, o.max_bytes);
}

}  // namespace
}  // namespace capsule::vm
