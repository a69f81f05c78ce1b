// TrimLogFile against a writer that holds the file open O_APPEND the way
// QEMU, virtiofsd and capsule-vsockd hold theirs.
#include "runtime/host/log_trim.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "runtime/common/unique_fd.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

void Append(int fd, const std::string& text) { ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size())); }

std::string Lines(int from, int to) {
  std::string out;
  for (int i = from; i < to; ++i) out += "guest line " + std::to_string(i) + " " + std::string(40, 'x') + "\n";
  return out;
}

TEST(LogTrimTest, KeepsTheTailFromALineStartAndTheWriterGoesOnAtTheNewEnd) {
  auto dir = TempDir::Create("log-trim");
  ASSERT_OK(dir);
  const std::string path = dir->Join("console.log");
  UniqueFd writer(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  ASSERT_TRUE(writer);
  Append(writer.get(), Lines(0, 20000));  // ~1 MiB
  const uint64_t before = FileSize(path).value_or(0);

  auto trim = TrimLogFile(path, 64 << 10, 16 << 10);
  ASSERT_OK(trim);
  EXPECT_EQ(trim->size_before, before);
  EXPECT_GT(trim->dropped, before - (16 << 10) - 1);
  EXPECT_LE(FileSize(path).value_or(0), (16u << 10) + 200);
  auto text = ReadFile(path);
  ASSERT_OK(text);
  EXPECT_EQ(text->rfind("[capsule: log reached " + std::to_string(before) + " bytes", 0), 0u) << text->substr(0, 200);
  const size_t first_line = text->find('\n') + 1;
  EXPECT_EQ(text->compare(first_line, 11, "guest line "), 0) << "the kept tail starts mid-line";
  EXPECT_NE(text->find("guest line 19999 "), std::string::npos);

  // The writer's offset is irrelevant under O_APPEND: no hole, no overwrite.
  Append(writer.get(), "after the trim\n");
  auto again = ReadFile(path);
  ASSERT_OK(again);
  EXPECT_EQ(again->size(), text->size() + 15);
  EXPECT_EQ(again->substr(text->size()), "after the trim\n");
}

TEST(LogTrimTest, AFileWithinItsLimitOrMissingIsLeftAlone) {
  auto dir = TempDir::Create("log-trim");
  ASSERT_OK(dir);
  const std::string path = dir->Join("vsockd.log");
  auto missing = TrimLogFile(path, 100, 10);
  ASSERT_OK(missing);
  EXPECT_EQ(missing->dropped, 0u);
  ASSERT_OK(WriteFile(path, Lines(0, 2)));
  auto small = TrimLogFile(path, 1 << 20, 10);
  ASSERT_OK(small);
  EXPECT_EQ(small->dropped, 0u);
  EXPECT_EQ(ReadFile(path).value_or(""), Lines(0, 2));
}

TEST(LogTrimTest, ASymlinkOrAFifoIsRefusedNotFollowed) {
  auto dir = TempDir::Create("log-trim");
  ASSERT_OK(dir);
  const std::string victim = dir->Join("victim");
  ASSERT_OK(WriteFile(victim, Lines(0, 100)));
  const std::string link = dir->Join("console.log");
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  auto st = TrimLogFile(link, 10, 5);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find(link), std::string::npos) << st.status().ToString();
  EXPECT_EQ(ReadFile(victim).value_or(""), Lines(0, 100)) << "the symlink's target was trimmed";

  const std::string fifo = dir->Join("qemu.log");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = TrimLogFile(fifo, 10, 5);
  EXPECT_FALSE(f.ok());
  EXPECT_REASON(f, reason::kWrongFileType);
}

}  // namespace
}  // namespace capsule
