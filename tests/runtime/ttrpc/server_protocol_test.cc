#include "runtime/ttrpc/server_protocol.h"

#include <gtest/gtest.h>

namespace capsule::ttrpc {
namespace {

DecodedFrame Frame(uint32_t id, uint8_t type, std::string payload) {
  DecodedFrame f;
  f.header = {static_cast<uint32_t>(payload.size()), id, type, 0};
  f.payload = std::move(payload);
  return f;
}

std::string RequestBytes(const std::string& service, const std::string& method) {
  ::ttrpc::Request r;
  r.set_service(service);
  r.set_method(method);
  return r.SerializeAsString();
}

TEST(RequestStreamTest, ValidRequestBecomesCall) {
  RequestStream s;
  FrameAction a = s.Classify(Frame(1, 1, RequestBytes("svc", "M")));
  auto* call = std::get_if<InboundCall>(&a);
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->stream_id, 1u);
  EXPECT_EQ(call->request.service(), "svc");
  EXPECT_EQ(call->request.method(), "M");
}

TEST(RequestStreamTest, EvenStreamIdIsInvalidArgumentOnThatStream) {
  RequestStream s;
  FrameAction a = s.Classify(Frame(2, 1, RequestBytes("svc", "M")));
  auto* r = std::get_if<ImmediateReply>(&a);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->stream_id, 2u);
  EXPECT_EQ(r->status.code(), Code::kInvalidArgument);
}

TEST(RequestStreamTest, ReusedOrDecreasingStreamIdIsInvalidArgument) {
  RequestStream s;
  ASSERT_TRUE(std::holds_alternative<InboundCall>(s.Classify(Frame(5, 1, RequestBytes("a", "b")))));
  for (uint32_t id : {5u, 3u}) {
    FrameAction a = s.Classify(Frame(id, 1, RequestBytes("a", "b")));
    auto* r = std::get_if<ImmediateReply>(&a);
    ASSERT_NE(r, nullptr) << id;
    EXPECT_EQ(r->status.code(), Code::kInvalidArgument);
    EXPECT_NE(r->status.message().find("not increasing"), std::string::npos);
  }
  EXPECT_TRUE(std::holds_alternative<InboundCall>(s.Classify(Frame(7, 1, RequestBytes("a", "b")))));
}

TEST(RequestStreamTest, OversizedIsResourceExhaustedOnItsStream) {
  RequestStream s;
  DecodedFrame f;
  f.header = {kMaxPayloadBytes + 1, 9, 1, 0};
  f.oversized = true;
  FrameAction a = s.Classify(std::move(f));
  auto* r = std::get_if<ImmediateReply>(&a);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->stream_id, 9u);
  EXPECT_EQ(r->status.code(), Code::kResourceExhausted);
}

TEST(RequestStreamTest, NonRequestTypeClosesConnection) {
  for (uint8_t type : {0, 2, 3, 255}) {
    RequestStream s;
    FrameAction a = s.Classify(Frame(1, type, RequestBytes("a", "b")));
    auto* c = std::get_if<CloseConnection>(&a);
    ASSERT_NE(c, nullptr) << int(type);
    EXPECT_NE(c->reason.find("type " + std::to_string(type)), std::string::npos);
  }
}

TEST(RequestStreamTest, UnparsableRequestClosesConnection) {
  RequestStream s;
  FrameAction a = s.Classify(Frame(1, 1, std::string("\xff\xff\xff\xff", 4)));
  auto* c = std::get_if<CloseConnection>(&a);
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->reason.find("unparsable"), std::string::npos);
}

TEST(RequestStreamTest, EmptyPayloadIsAnEmptyRequest) {
  RequestStream s;
  FrameAction a = s.Classify(Frame(1, 1, ""));
  auto* call = std::get_if<InboundCall>(&a);
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->request.service(), "");
}

}  // namespace
}  // namespace capsule::ttrpc
