// LogGuard keeps every guest-writable log of a VM dir within its bound
// while writers keep appending, and stops with its owner.
#include "runtime/vm/log_guard.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "tests/support/status_matchers.h"

namespace capsule::vm {
namespace {

using namespace std::chrono_literals;

TEST(LogGuardTest, NamesTheConsoleAndEachDaemonLogOfTheVmDir) {
  auto files = LogGuard::GuestWritableLogs("/run/capsule/vm/pod1");
  for (const char* name : {"console.log", "qemu.log", "virtiofsd.log", "vsockd.log"}) {
    EXPECT_NE(std::find(files.begin(), files.end(), std::string("/run/capsule/vm/pod1/") + name), files.end()) << name;
  }
}

// The checks run on the writer's thread here (CheckNow between bursts, the
// guard's own thread idle for an hour), so what is bounded and counted does
// not depend on how a loaded host schedules the guard's thread: under
// ASan on 2 busy cores it once fell behind the writer, and a trim racing an
// append loses bytes it cannot count.
TEST(LogGuardTest, AFloodingWriterStaysWithinTheBoundAndEveryDroppedByteIsCounted) {
  auto dir = TempDir::Create("log-guard");
  ASSERT_OK(dir);
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
  o.interval = std::chrono::hours(1);
  uint64_t peak = 0;
  LogGuard guard("pod1", files, o);
  // 4 MiB into each file, checked after every 256 KiB.
  for (int i = 0; i < 1024; ++i) {
    for (auto& w : writers) ASSERT_EQ(::write(w.get(), chunk.data(), chunk.size()), 4096);
    for (const auto& f : files) peak = std::max(peak, FileSize(f).value_or(0));
    if (i % 64 == 63) guard.CheckNow();
  }
  guard.CheckNow();
  uint64_t left = 0;
  for (const auto& f : files) {
    EXPECT_LE(FileSize(f).value_or(0), o.max_bytes) << f;
    left += FileSize(f).value_or(0);
  }
  // Everything written is either still there or counted as dropped (the
  // trim's one-line marker is what the files hold beyond what was kept).
  const uint64_t written = files.size() * (4u << 20);
  EXPECT_GE(guard.dropped_bytes() + left, written);
  EXPECT_LE(guard.dropped_bytes(), written);
  // Bounded by the limit plus what was written between two checks.
  EXPECT_LE(peak, o.max_bytes + (256u << 10));
}

// The guard's own thread trims without being asked, and nothing trims once
// the guard is gone.
TEST(LogGuardTest, TheGuardTrimsOnItsOwnUntilItStops) {
  auto dir = TempDir::Create("log-guard");
  ASSERT_OK(dir);
  const auto files = LogGuard::GuestWritableLogs(dir->path());
  UniqueFd w(::open(files[0].c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  ASSERT_TRUE(w);
  const std::string chunk(4096, 'g');
  LogGuardOptions o;
  o.max_bytes = 64 << 10;
  o.keep_bytes = 8 << 10;
  o.interval = 10ms;
  {
    LogGuard guard("pod1", files, o);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(::write(w.get(), chunk.data(), chunk.size()), 4096);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    // The guard counts what it dropped just after the trim: wait for both.
    while ((FileSize(files[0]).value_or(0) > o.max_bytes || guard.dropped_bytes() == 0) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    EXPECT_LE(FileSize(files[0]).value_or(0), o.max_bytes) << "the guard's thread never trimmed";
    EXPECT_GT(guard.dropped_bytes(), 0u);
  }
  for (int i = 0; i < 32; ++i) ASSERT_EQ(::write(w.get(), chunk.data(), chunk.size()), 4096);
  const uint64_t grown = FileSize(files[0]).value_or(0);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(FileSize(files[0]).value_or(0), grown);
  EXPECT_GT(grown, o.max_bytes);
}

}  // namespace
}  // namespace capsule::vm
