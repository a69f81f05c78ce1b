#include "runtime/vm/pod_record.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "tests/support/status_matchers.h"

namespace capsule::vm {
namespace {

PodRecord SamplePodRecord() {
  PodRecord r;
  r.sandbox_id = "0123456789abcdef";
  r.ns = "k8s.io";
  r.pod_name = "web-7d9f";
  r.pod_namespace = "shop";
  r.shim_pid = 4242;
  r.started_unix_ms = 1764748800000;
  r.claimed = true;
  r.vm_ms = 41.5;
  r.setup_ms = 120.25;
  return r;
}

TEST(PodRecordTest, RoundTripsThroughItsFile) {
  auto dir = TempDir::Create("pod-record");
  ASSERT_OK(dir);
  ASSERT_OK(WritePodRecord(dir->path(), SamplePodRecord()));
  struct stat st{};
  ASSERT_EQ(::stat(dir->Join(kPodRecordFile).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = ReadPodRecord(dir->path());
  ASSERT_OK(back);
  EXPECT_EQ(back->sandbox_id, "0123456789abcdef");
  EXPECT_EQ(back->ns, "k8s.io");
  EXPECT_EQ(back->pod_name, "web-7d9f");
  EXPECT_EQ(back->pod_namespace, "shop");
  EXPECT_EQ(back->shim_pid, 4242);
  EXPECT_EQ(back->started_unix_ms, 1764748800000);
  EXPECT_TRUE(back->claimed);
  EXPECT_DOUBLE_EQ(back->vm_ms, 41.5);
  EXPECT_DOUBLE_EQ(back->setup_ms, 120.25);
}

TEST(PodRecordTest, AVmWithoutAPodIsNotFound) {
  auto dir = TempDir::Create("pod-record");
  ASSERT_OK(dir);
  EXPECT_EQ(ReadPodRecord(dir->path()).status().code(), Code::kNotFound);
}

TEST(PodRecordTest, EachBadFieldIsNamed) {
  struct Case {
    const char* field;
    const char* value;
  } cases[] = {
      {"sandbox_id", "\"\""},       {"sandbox_id", "7"},          {"namespace", "null"},
      {"pod_name", "\"a\\u0001b\""}, {"shim_pid", "0"},            {"shim_pid", "-3"},
      {"shim_pid", "1.5"},           {"shim_pid", "99999999999"},  {"started_unix_ms", "-1"},
      {"started_unix_ms", "\"now\""}, {"claimed", "1"},            {"vm_ms", "-2"},
      {"setup_ms", "1e300"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = nlohmann::json::parse(PodRecordToJson(SamplePodRecord()));
    j[c.field] = nlohmann::json::parse(c.value);
    auto r = PodRecordFromJson(j.dump(), "pod.json");
    ASSERT_FALSE(r.ok()) << c.field << "=" << c.value;
    EXPECT_EQ(r.status().message().rfind(std::string("pod.json: ") + c.field + ": ", 0), 0u) << r.status().ToString();
  }
  nlohmann::json j = nlohmann::json::parse(PodRecordToJson(SamplePodRecord()));
  j["pod_name"] = std::string(300, 'x');
  EXPECT_FALSE(PodRecordFromJson(j.dump(), "pod.json").ok());
  EXPECT_FALSE(PodRecordFromJson("[1,2]", "pod.json").ok());
  EXPECT_FALSE(PodRecordFromJson("{", "pod.json").ok());
  EXPECT_FALSE(PodRecordFromJson(std::string(20000, ' '), "pod.json").ok());
}

TEST(PodRecordTest, ASymlinkOrHugeFileIsRefused) {
  auto dir = TempDir::Create("pod-record");
  ASSERT_OK(dir);
  ASSERT_EQ(::symlink("/etc/passwd", dir->Join(kPodRecordFile).c_str()), 0);
  auto r = ReadPodRecord(dir->path());
  ASSERT_FALSE(r.ok());
  EXPECT_REASON(r, reason::kWrongFileType);
  ASSERT_EQ(::unlink(dir->Join(kPodRecordFile).c_str()), 0);
  ASSERT_OK(WriteFile(dir->Join(kPodRecordFile), std::string(1 << 20, ' ')));
  EXPECT_EQ(ReadPodRecord(dir->path()).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace capsule::vm
