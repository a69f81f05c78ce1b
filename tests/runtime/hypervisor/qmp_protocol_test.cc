#include "runtime/hypervisor/qmp_protocol.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

namespace capsule::hypervisor {
namespace {

using nlohmann::json;

TEST(QmpLineReaderTest, SplitsCrLfLinesAcrossArbitraryChunks) {
  QmpLineReader r;
  std::string stream = "{\"a\":1}\r\n{\"b\":2}\n{\"c\"";
  for (char c : stream) ASSERT_OK(r.Feed(std::string_view(&c, 1)));
  EXPECT_EQ(r.Next(), "{\"a\":1}");
  EXPECT_EQ(r.Next(), "{\"b\":2}");
  EXPECT_EQ(r.Next(), std::nullopt);
  EXPECT_EQ(r.buffered(), 4u);
  ASSERT_OK(r.Feed(":3}\r\n"));
  EXPECT_EQ(r.Next(), "{\"c\":3}");
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(QmpLineReaderTest, RefusesAnEndlessLine) {
  QmpLineReader r;
  std::string chunk(1 << 20, 'x');
  Status st;
  for (int i = 0; i < 20 && st.ok(); ++i) st = r.Feed(chunk);
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
}

TEST(QmpProtocolTest, ParsesGreeting) {
  auto m = ParseQmpMessage(
      R"({"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2"}, "capabilities": ["oob"]}})");
  ASSERT_OK(m);
  auto& g = std::get<QmpGreeting>(*m);
  EXPECT_EQ(g.VersionString(), "7.2.22");
  EXPECT_EQ(g.package, "Debian 1:7.2");
  EXPECT_EQ(g.capabilities, std::vector<std::string>{"oob"});
}

TEST(QmpProtocolTest, ParsesReturnAndErrorReplies) {
  auto ok = ParseQmpMessage(R"({"return": {"status": "running"}, "id": 7})");
  ASSERT_OK(ok);
  auto& r = std::get<QmpReply>(*ok);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.id, 7u);
  EXPECT_EQ(r.value["status"], "running");

  auto err = ParseQmpMessage(R"({"error": {"class": "DeviceNotFound", "desc": "Device 'nic9' not found"}, "id": 8})");
  ASSERT_OK(err);
  auto& e = std::get<QmpReply>(*err);
  EXPECT_FALSE(e.ok);
  Status st = QmpErrorStatus("device_del", e);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_EQ(st.message(), "QMP device_del: DeviceNotFound: Device 'nic9' not found");

  auto noid = ParseQmpMessage(R"({"error": {"class": "GenericError", "desc": "JSON parse error"}})");
  ASSERT_OK(noid);
  EXPECT_EQ(std::get<QmpReply>(*noid).id, std::nullopt);
}

TEST(QmpProtocolTest, ErrorClassesMapToCodes) {
  QmpReply r;
  r.ok = false;
  r.error_desc = "x";
  for (auto [cls, code] : std::vector<std::pair<std::string, Code>>{{"GenericError", Code::kFailedPrecondition},
                                                                    {"CommandNotFound", Code::kUnimplemented},
                                                                    {"DeviceNotActive", Code::kFailedPrecondition},
                                                                    {"KVMMissingCap", Code::kUnavailable},
                                                                    {"SomethingNew", Code::kUnknown}}) {
    r.error_class = cls;
    EXPECT_EQ(QmpErrorStatus("c", r).code(), code) << cls;
  }
}

TEST(QmpProtocolTest, ParsesEvent) {
  auto m = ParseQmpMessage(
      R"({"timestamp": {"seconds": 17, "microseconds": 5}, "event": "DEVICE_DELETED", "data": {"device": "nic0", "path": "/machine/peripheral/nic0"}})");
  ASSERT_OK(m);
  auto& e = std::get<QmpEvent>(*m);
  EXPECT_EQ(e.name, "DEVICE_DELETED");
  EXPECT_EQ(e.data["device"], "nic0");
  EXPECT_EQ(e.seconds, 17);
  EXPECT_EQ(e.microseconds, 5);
  auto bare = ParseQmpMessage(R"({"event": "STOP"})");
  ASSERT_OK(bare);
  EXPECT_TRUE(std::get<QmpEvent>(*bare).data.is_object());
}

TEST(QmpProtocolTest, RejectsMalformedMessagesWithReasons) {
  struct Case {
    const char* line;
    const char* want;
  };
  for (const Case& c : {Case{"not json", "not JSON"}, Case{"[1,2]", "not a JSON object"},
                        Case{R"({"hello": 1})", "neither greeting, reply nor event"},
                        Case{R"({"event": 5})", "event name is not a string"},
                        Case{R"({"return": {}, "id": "abc"})", "id is not an unsigned integer"},
                        Case{R"({"return": {}, "id": -1})", "id is not an unsigned integer"},
                        Case{R"({"error": "boom"})", "'error' is not an object"},
                        Case{R"({"QMP": 3})", "greeting 'QMP' is not an object"},
                        Case{R"({"QMP": {"capabilities": 3}})", "capabilities is not an array"},
                        Case{"{\"return\": {}", "not JSON"}}) {
    auto m = ParseQmpMessage(c.line);
    ASSERT_FALSE(m.ok()) << c.line;
    EXPECT_EQ(m.status().code(), Code::kInvalidArgument) << c.line;
    EXPECT_NE(m.status().message().find(c.want), std::string::npos) << c.line << " -> " << m.status().message();
  }
}

TEST(QmpProtocolTest, OddButValidFieldsDoNotThrow) {
  // Wrong types in optional fields degrade to defaults instead of throwing.
  auto g = ParseQmpMessage(R"({"QMP": {"version": {"qemu": {"major": "7"}, "package": 1}, "capabilities": [1, "oob"]}})");
  ASSERT_OK(g);
  EXPECT_EQ(std::get<QmpGreeting>(*g).major, 0);
  EXPECT_EQ(std::get<QmpGreeting>(*g).capabilities, std::vector<std::string>{"oob"});
  auto e = ParseQmpMessage(R"({"event": "X", "data": [1], "timestamp": {"seconds": "x"}})");
  ASSERT_OK(e);
  EXPECT_TRUE(std::get<QmpEvent>(*e).data.is_object());
  auto r = ParseQmpMessage(R"({"error": {"class": 3}})");
  ASSERT_OK(r);
  EXPECT_EQ(std::get<QmpReply>(*r).error_class, "GenericError");
}

TEST(QmpProtocolTest, EncodesCommands) {
  EXPECT_EQ(EncodeQmpCommand("query-status", nullptr, 3), "{\"execute\":\"query-status\",\"id\":3}\n");
  EXPECT_EQ(EncodeQmpCommand("cont", json::object(), 4), "{\"execute\":\"cont\",\"id\":4}\n");
  json parsed = json::parse(EncodeQmpCommand("device_del", json{{"id", "nic0"}}, 5));
  EXPECT_EQ(parsed, (json{{"execute", "device_del"}, {"id", 5}, {"arguments", {{"id", "nic0"}}}}));
}

}  // namespace
}  // namespace capsule::hypervisor
