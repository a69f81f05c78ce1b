// The real image: capsule-mkinitrd run twice on the kernel from `make deps`
// gives the same bytes, and the image built by `make` holds what the agent
// needs at boot.
#include <gtest/gtest.h>

#include <cstdlib>

#include "agent/modules/module_index.h"
#include "deploy/mkinitrd/image_builder.h"
#include "deploy/mkinitrd/tools.h"
#include "runtime/common/file_util.h"
#include "tests/deploy/cpio_reader.h"
#include "tests/support/status_matchers.h"

namespace capsule::deploy {
namespace {

std::string BuildDir() { return std::getenv("CAPSULE_BUILD_DIR") ? std::getenv("CAPSULE_BUILD_DIR") : "."; }
std::string SourceDir() { return std::getenv("CAPSULE_SOURCE_DIR") ? std::getenv("CAPSULE_SOURCE_DIR") : "."; }

Status Build(const std::string& out) {
  return RunCapture({BuildDir() + "/deploy/mkinitrd/capsule-mkinitrd", "--agent",
                     BuildDir() + "/deploy/capsule-agent.stripped", "--kernel-dir",
                     SourceDir() + "/.cache/guest-kernel/current", "--output", out})
      .status();
}

Result<std::string> Unpacked(const std::string& image) {
  ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("img"));
  ASSIGN_OR_RETURN(std::string zstd, FindProgram("zstd", "zstd"));
  RETURN_IF_ERROR(RunFilter({zstd, "-dc"}, image, dir.Join("raw")));
  return ReadFile(dir.Join("raw"));
}

TEST(GuestImage, TwoBuildsAreByteIdentical) {
  auto dir = TempDir::Create("repro");
  ASSERT_OK(dir);
  ASSERT_OK(Build(dir->Join("a.img")));
  ASSERT_OK(Build(dir->Join("b.img")));
  auto a = ReadFile(dir->Join("a.img"));
  ASSERT_OK(a);
  EXPECT_TRUE(*a == *ReadFile(dir->Join("b.img"))) << "image is not reproducible";
}

TEST(GuestImage, HoldsInitLibrariesModulesAndLoadOrder) {
  auto raw = Unpacked(BuildDir() + "/deploy/capsule-initrd.img");
  ASSERT_OK(raw);
  std::string error;
  auto entries = testing::ReadCpio(*raw, &error);
  ASSERT_EQ(error, "");
  std::map<std::string, std::string> files;
  for (const auto& e : entries) files[e.name] = e.data;
  ASSERT_EQ(files.count("init"), 1u);
  EXPECT_EQ(files["init"].substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(files.count("lib64/ld-linux-x86-64.so.2"), 1u);
  EXPECT_EQ(files.count("dev/console"), 1u);
  EXPECT_EQ(files.count("bin/busybox"), 0u) << "the production image has no shell";

  auto kernel = FindKernel(SourceDir() + "/.cache/guest-kernel/current");
  ASSERT_OK(kernel);
  std::string mod_dir = "lib/modules/" + kernel->release + "/";
  ASSERT_EQ(files.count(mod_dir + "capsule-modules.order"), 1u);
  auto index = agent::modules::ModuleIndex::Parse(files[mod_dir + "modules.dep"], "image modules.dep");
  ASSERT_OK(index);
  // Every requested module is there, each after its dependencies.
  std::vector<std::string> seen;
  std::string order = files[mod_dir + "capsule-modules.order"];
  for (size_t pos = 0; pos < order.size();) {
    size_t nl = order.find('\n', pos);
    std::string line = order.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(files.count(mod_dir + line), 1u) << line;
    std::string name = agent::modules::ModuleNameFromPath(line);
    auto deps = index->DependenciesOf(name);
    ASSERT_OK(deps) << name;
    for (const auto& dep : *deps) {
      EXPECT_NE(std::find(seen.begin(), seen.end(), dep), seen.end()) << dep << " after " << name;
    }
    seen.push_back(name);
  }
  for (const auto& m : kDefaultBootModules) {
    EXPECT_NE(std::find(seen.begin(), seen.end(), m), seen.end()) << m;
  }
}

}  // namespace
}  // namespace capsule::deploy
