#include "runtime/common/unix_stream.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

using Existing = UnixListenOptions::Existing;

struct stat StatOf(const std::string& path) {
  struct stat st{};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

TEST(UnixListenTest, ModeIsSetAndTheExistingFilePolicyHolds) {
  auto dir = TempDir::Create("unix-listen");
  ASSERT_OK(dir);
  const std::string path = dir->Join("s.sock");
  UnixListenOptions o;
  o.mode = 0660;
  auto live = ListenUnix(path, o);
  ASSERT_OK(live);
  EXPECT_TRUE(S_ISSOCK(StatOf(path).st_mode));
  EXPECT_EQ(StatOf(path).st_mode & 0777, 0660u);

  // A live socket: refused by kRefuse and kReplaceStale, taken by kReplace.
  EXPECT_EQ(ListenUnix(path, o).status().code(), Code::kAlreadyExists);
  o.existing = Existing::kReplaceStale;
  auto busy = ListenUnix(path, o);
  EXPECT_EQ(busy.status().code(), Code::kAlreadyExists);
  EXPECT_NE(busy.status().message().find("another process serves it"), std::string::npos);
  live->reset();  // now stale: nobody accepts on it
  auto replaced = ListenUnix(path, o);
  ASSERT_OK(replaced);
  o.existing = Existing::kReplace;
  EXPECT_OK(ListenUnix(path, o));

  // A file that is no socket is never replaced by kReplaceStale.
  const std::string file = dir->Join("plain");
  ASSERT_OK(WriteFile(file, "x"));
  o.existing = Existing::kReplaceStale;
  EXPECT_EQ(ListenUnix(file, o).status().code(), Code::kFailedPrecondition);
  EXPECT_OK(ReadFile(file));

  auto too_long = ListenUnix("/" + std::string(200, 'x'), o);
  EXPECT_EQ(too_long.status().code(), Code::kInvalidArgument);
  o.restrict_umask_at_bind = true;
  o.existing = Existing::kRefuse;
  o.mode = 0600;
  const std::string tight = dir->Join("tight.sock");
  ASSERT_OK(ListenUnix(tight, o));
  EXPECT_EQ(StatOf(tight).st_mode & 0777, 0600u);
}

}  // namespace
}  // namespace capsule
