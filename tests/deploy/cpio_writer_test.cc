// The newc writer: fields the kernel reads, ordering, parents, conflicts,
// and that GNU cpio (an independent reader) lists the archive.
#include "deploy/mkinitrd/cpio_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "deploy/mkinitrd/tools.h"
#include "runtime/common/file_util.h"
#include "tests/deploy/cpio_reader.h"
#include "tests/support/status_matchers.h"

namespace capsule::deploy {
namespace {

using testing::CpioEntry;
using testing::ReadCpio;

CpioArchive Sample() {
  CpioArchive a(1700000000);
  EXPECT_OK(a.AddFile("/init", "#!agent", 0755));
  EXPECT_OK(a.AddFile("/lib/x86_64-linux-gnu/libc.so.6", std::string(13, 'c'), 0644));
  EXPECT_OK(a.AddCharDevice("/dev/console", 0600, 5, 1));
  EXPECT_OK(a.AddSymlink("/bin/sh", "/bin/busybox"));
  EXPECT_OK(a.AddDirectory("/tmp", 01777));
  return a;
}

std::vector<CpioEntry> Parse(const CpioArchive& a) {
  std::string error;
  auto entries = ReadCpio(a.Serialize(), &error);
  EXPECT_EQ(error, "");
  return entries;
}

const CpioEntry& Find(const std::vector<CpioEntry>& es, std::string_view name) {
  for (const auto& e : es) {
    if (e.name == name) return e;
  }
  ADD_FAILURE() << name << " not in archive";
  static CpioEntry none{};
  return none;
}

TEST(CpioWriter, EntriesSortedWithParentsFirstAndNumbered) {
  auto es = Parse(Sample());
  std::vector<std::string> names;
  for (const auto& e : es) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{"bin", "bin/sh", "dev", "dev/console", "init", "lib",
                                             "lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu/libc.so.6", "tmp"}));
  for (size_t i = 0; i < es.size(); ++i) EXPECT_EQ(es[i].ino, i + 1);
}

TEST(CpioWriter, HeaderFieldsAreFixedForReproducibility) {
  for (const auto& e : Parse(Sample())) {
    EXPECT_EQ(e.uid, 0u) << e.name;
    EXPECT_EQ(e.gid, 0u) << e.name;
    EXPECT_EQ(e.mtime, 1700000000u) << e.name;
    EXPECT_EQ(e.nlink, S_ISDIR(e.mode) ? 2u : 1u) << e.name;
  }
}

TEST(CpioWriter, TypesModesDataAndDevices) {
  auto es = Parse(Sample());
  EXPECT_EQ(Find(es, "init").mode, static_cast<uint32_t>(S_IFREG | 0755));
  EXPECT_EQ(Find(es, "init").data, "#!agent");
  EXPECT_EQ(Find(es, "lib/x86_64-linux-gnu/libc.so.6").data.size(), 13u);  // not a multiple of 4: padding
  EXPECT_EQ(Find(es, "dev/console").mode, static_cast<uint32_t>(S_IFCHR | 0600));
  EXPECT_EQ(Find(es, "dev/console").rdev_major, 5u);
  EXPECT_EQ(Find(es, "dev/console").rdev_minor, 1u);
  EXPECT_EQ(Find(es, "bin/sh").mode, static_cast<uint32_t>(S_IFLNK | 0777));
  EXPECT_EQ(Find(es, "bin/sh").data, "/bin/busybox");
  EXPECT_EQ(Find(es, "tmp").mode, static_cast<uint32_t>(S_IFDIR | 01777));
  EXPECT_EQ(Find(es, "bin").mode, static_cast<uint32_t>(S_IFDIR | 0755));
}

TEST(CpioWriter, SameInputSameBytesWhateverTheInsertionOrder) {
  CpioArchive a(7), b(7);
  ASSERT_OK(a.AddFile("/x/1", "one", 0644));
  ASSERT_OK(a.AddFile("/y", "two", 0644));
  ASSERT_OK(b.AddFile("/y", "two", 0644));
  ASSERT_OK(b.AddFile("/x/1", "one", 0644));
  EXPECT_EQ(a.Serialize(), b.Serialize());
}

TEST(CpioWriter, ConflictsAndBadPathsAreErrors) {
  CpioArchive a(0);
  ASSERT_OK(a.AddFile("/f", "1", 0644));
  EXPECT_OK(a.AddFile("/f", "1", 0644)) << "same content twice is fine";
  EXPECT_EQ(a.AddFile("/f", "2", 0644).code(), Code::kInvalidArgument);
  EXPECT_EQ(a.AddFile("/f/under-a-file", "x", 0644).code(), Code::kInvalidArgument);
  EXPECT_EQ(a.AddFile("/a/../b", "x", 0644).code(), Code::kInvalidArgument);
  EXPECT_EQ(a.AddFile("/", "x", 0644).code(), Code::kInvalidArgument);
  EXPECT_EQ(a.AddSymlink("/l", "").code(), Code::kInvalidArgument);
  ASSERT_OK(a.AddFile("/d/f", "x", 0644));
  EXPECT_OK(a.AddDirectory("/d", 0700)) << "explicit mode for an implicit parent";
}

TEST(CpioWriter, GnuCpioListsTheArchive) {
  auto cpio = FindProgram("cpio", "cpio");
  ASSERT_OK(cpio);
  auto dir = TempDir::Create("cpio");
  ASSERT_OK(dir);
  ASSERT_OK(WriteFile(dir->Join("a.cpio"), Sample().Serialize()));
  ASSERT_OK(RunFilter({*cpio, "-it", "--quiet"}, dir->Join("a.cpio"), dir->Join("list")));
  EXPECT_EQ(*ReadFile(dir->Join("list")),
            "bin\nbin/sh\ndev\ndev/console\ninit\nlib\nlib/x86_64-linux-gnu\nlib/x86_64-linux-gnu/libc.so.6\ntmp\n");
}

}  // namespace
}  // namespace capsule::deploy
