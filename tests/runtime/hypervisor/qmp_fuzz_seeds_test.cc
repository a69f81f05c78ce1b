// Replays the qmp_fuzzer seed corpus through the fuzz target in ordinary
// (and sanitizer) builds, so the target keeps compiling and its seeds pass.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

#include "runtime/common/file_util.h"
#include "runtime/hypervisor/vm_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace capsule::hypervisor {
namespace {

TEST(QmpFuzzSeedsTest, EverySeedRunsCleanly) {
  const char* src = std::getenv("CAPSULE_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "CAPSULE_SOURCE_DIR is set by ctest";
  std::filesystem::path dir = std::filesystem::path(src) / "tests/fuzz/qmp/corpus/qmp_fuzzer";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    auto bytes = ReadFile(e.path().string());
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_EQ(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()), 0);
    ++n;
  }
  EXPECT_GE(n, 5);
}

TEST(QmpFuzzSeedsTest, SeedVmJsonParses) {
  const char* src = std::getenv("CAPSULE_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  auto text = ReadFile(std::string(src) + "/tests/fuzz/qmp/corpus/qmp_fuzzer/vm_json");
  ASSERT_TRUE(text.ok());
  // Keeps the seed honest: it must reach the full vm.json path.
  auto rec = VmRecordFromJson(*text, "vm_json");
  ASSERT_TRUE(rec.ok()) << rec.status().ToString();
  EXPECT_EQ(rec->hotplugged.size(), 2u);
}

}  // namespace
}  // namespace capsule::hypervisor
