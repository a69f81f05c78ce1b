// The textual edit of containerd's `imports`: only the import changes,
// every other byte stays, and a second edit changes nothing.
#include "runtime/install/containerd_imports.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

namespace capsule::install {
namespace {

constexpr char kDropin[] = "/etc/capsule/containerd-runtime.toml";

std::string Added(std::string_view text) {
  auto e = AddImport(text, kDropin);
  EXPECT_OK(e);
  EXPECT_TRUE(e->changed);
  return e->text;
}

TEST(AddImport, NoImportsGoesAfterTheLastTopLevelKey) {
  std::string in = "# my config\nversion = 2\nroot = \"/var/lib/containerd\"\n\n[plugins]\n  x = 1\n";
  EXPECT_EQ(Added(in),
            "# my config\nversion = 2\nroot = \"/var/lib/containerd\"\n"
            "imports = [\"/etc/capsule/containerd-runtime.toml\"]\n\n[plugins]\n  x = 1\n");
}

TEST(AddImport, CommentsBeforeTheFirstTableStayWhereTheyAre) {
  std::string in = "# header comment\n\n# about plugins\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  a = \"b\"\n";
  EXPECT_EQ(Added(in),
            "# header comment\n\n# about plugins\nimports = [\"/etc/capsule/containerd-runtime.toml\"]\n"
            "[plugins.\"io.containerd.grpc.v1.cri\"]\n  a = \"b\"\n");
}

TEST(AddImport, ExistingSingleLineArrayGainsTheEntry) {
  std::string in = "version = 2\nimports = [\"/etc/containerd/a.toml\"] # mine\n[x]\n";
  EXPECT_EQ(Added(in), "version = 2\nimports = [\"/etc/containerd/a.toml\", \"/etc/capsule/containerd-runtime.toml\"] "
                       "# mine\n[x]\n");
}

TEST(AddImport, EmptyArrayGainsTheEntry) {
  EXPECT_EQ(Added("imports = []\n"), "imports = [\"/etc/capsule/containerd-runtime.toml\"]\n");
}

TEST(AddImport, MultiLineArrayWithCommentsAndTrailingComma) {
  std::string in =
      "version = 2\nimports = [\n  \"/etc/containerd/a.toml\", # first\n  '/etc/containerd/b.toml',\n]\n"
      "[plugins]\n";
  EXPECT_EQ(Added(in),
            "version = 2\nimports = [\n  \"/etc/containerd/a.toml\", # first\n  '/etc/containerd/b.toml', "
            "\"/etc/capsule/containerd-runtime.toml\",\n]\n[plugins]\n");
}

TEST(AddImport, SecondAddChangesNothing) {
  std::string once = Added("version = 2\n[plugins]\n");
  auto twice = AddImport(once, kDropin);
  ASSERT_OK(twice);
  EXPECT_FALSE(twice->changed);
  EXPECT_EQ(twice->text, once);
}

TEST(AddImport, FileWithoutTablesOrFinalNewline) {
  EXPECT_EQ(Added("version = 1"), "version = 1\nimports = [\"/etc/capsule/containerd-runtime.toml\"]\n");
  EXPECT_EQ(Added(""), "imports = [\"/etc/capsule/containerd-runtime.toml\"]\n");
}

TEST(AddImport, MultiLineStringsAndBracketsInValuesAreNotStatements) {
  std::string in = "a = \"\"\"\n[not a table]\nimports = 1\n\"\"\"\nb = [\n  [1, 2],\n]\n[t]\n";
  EXPECT_EQ(Added(in), "a = \"\"\"\n[not a table]\nimports = 1\n\"\"\"\nb = [\n  [1, 2],\n]\n"
                       "imports = [\"/etc/capsule/containerd-runtime.toml\"]\n[t]\n");
}

TEST(AddImport, ImportsThatIsNotAStringArrayIsAnErrorNamingTheLine) {
  auto e = AddImport("version = 2\nimports = 3\n", kDropin);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("line 2"), std::string::npos) << e.status().message();
}

TEST(AddImport, UnterminatedStringIsAnErrorNamingTheLine) {
  auto e = AddImport("version = 2\nroot = \"/x\n", kDropin);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("line 2"), std::string::npos) << e.status().message();
}

// (`imports = []` is the exception: after the add it reads exactly like the
// line AddImport writes, so the whole line goes; uninstall restores the
// saved original instead when the file is as install left it.)
TEST(RemoveImport, UndoesEachAddByteForByte) {
  for (std::string in : {"version = 2\n[plugins]\n", "imports = [\"/a.toml\"]\n", "imports = [\n  \"/a.toml\",\n]\n",
                         "# c\n[x]\n"}) {
    std::string added = Added(in);
    auto removed = RemoveImport(added, kDropin);
    ASSERT_OK(removed);
    EXPECT_TRUE(removed->changed);
    EXPECT_EQ(removed->text, in);
  }
}

TEST(RemoveImport, KeepsOtherEntriesAndEditsAroundIt) {
  std::string edited = "version = 2\nimports = [\"/etc/capsule/containerd-runtime.toml\", \"/mine.toml\"]\n"
                       "# user comment added later\n[plugins]\n";
  auto removed = RemoveImport(edited, kDropin);
  ASSERT_OK(removed);
  EXPECT_EQ(removed->text, "version = 2\nimports = [\"/mine.toml\"]\n# user comment added later\n[plugins]\n");
}

TEST(RemoveImport, AbsentImportChangesNothing) {
  auto removed = RemoveImport("version = 2\n", kDropin);
  ASSERT_OK(removed);
  EXPECT_FALSE(removed->changed);
}

TEST(ContainerdConfigVersion, ReadsTopLevelVersionDefaultingToOne) {
  EXPECT_EQ(*ContainerdConfigVersion("version = 2\n"), 2);
  EXPECT_EQ(*ContainerdConfigVersion("[plugins.cri]\nversion = 2\n"), 1);
  EXPECT_EQ(*ContainerdConfigVersion(""), 1);
  EXPECT_FALSE(ContainerdConfigVersion("version = 3\n").ok());
}

TEST(NewConfigWithImport, IsVersionTwoWithTheImport) {
  std::string text = NewConfigWithImport(kDropin);
  EXPECT_EQ(*ContainerdConfigVersion(text), 2);
  auto again = AddImport(text, kDropin);
  ASSERT_OK(again);
  EXPECT_FALSE(again->changed);
}

}  // namespace
}  // namespace capsule::install
