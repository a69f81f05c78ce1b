// capsule-poold's socket directory: made root's alone, or refused when it
// belongs to someone else or others can write to it (they could swap the
// socket for their own and answer the shims' claims).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/common/file_util.h"
#include "runtime/pool/pool_daemon.h"
#include "tests/support/status_matchers.h"

namespace capsule::pool {
namespace {

TEST(PoolSocketTest, TheDirectoryIsMadeOursAloneOrRefusedWhenOthersCouldSwapTheSocket) {
  auto tmp = TempDir::Create("capsule-pool-sock");
  ASSERT_OK(tmp);
  const std::string made = tmp->Join("run/capsule");
  ASSERT_OK(PreparePoolSocket(made + "/pool.sock"));
  struct stat st{};
  ASSERT_EQ(::stat(made.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);

  for (mode_t mode : {01777, 0777, 0770, 0730}) {
    const std::string dir = tmp->Join("mode-" + std::to_string(mode));
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    Status refused = PreparePoolSocket(dir + "/pool.sock");
    EXPECT_EQ(refused.code(), Code::kFailedPrecondition) << std::oct << mode << ": " << refused.ToString();
    EXPECT_NE(refused.message().find(dir), std::string::npos) << refused.message();
  }
  const std::string readable = tmp->Join("readable");
  ASSERT_EQ(::mkdir(readable.c_str(), 0755), 0);
  EXPECT_OK(PreparePoolSocket(readable + "/pool.sock")) << "the socket itself is 0600";

  if (::geteuid() == 0) {
    const std::string theirs = tmp->Join("theirs");
    ASSERT_EQ(::mkdir(theirs.c_str(), 0700), 0);
    ASSERT_EQ(::chown(theirs.c_str(), 65534, 65534), 0);
    Status refused = PreparePoolSocket(theirs + "/pool.sock");
    EXPECT_EQ(refused.code(), Code::kFailedPrecondition) << refused.ToString();
    EXPECT_NE(refused.message().find("belongs to uid 65534"), std::string::npos) << refused.message();
  }
}

}  // namespace
}  // namespace capsule::pool
