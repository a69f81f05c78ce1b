// Keeps the qmp_fuzzer seeds honest: the vm.json seed must reach the full
// parser (qmp_fuzzer_replay replays every seed in ordinary builds).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>

#include "runtime/common/file_util.h"
#include "runtime/hypervisor/vm_record.h"
#include "tests/support/status_matchers.h"

namespace capsule::hypervisor {
namespace {

TEST(QmpFuzzSeedsTest, SeedVmJsonParses) {
  const char* src = std::getenv("CAPSULE_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  auto text = ReadFile(std::string(src) + "/tests/fuzz/qmp/corpus/qmp_fuzzer/vm_json");
  ASSERT_OK(text);
  // Keeps the seed honest: it must reach the full vm.json path.
  auto rec = VmRecordFromJson(*text, "vm_json");
  ASSERT_OK(rec);
  EXPECT_EQ(rec->hotplugged.size(), 2u);
}

}  // namespace
}  // namespace capsule::hypervisor
