#include "runtime/ttrpc/frame.h"

#include <gtest/gtest.h>

#include <string>

namespace capsule::ttrpc {
namespace {

TEST(FrameTest, HeaderIsBigEndianLengthStreamTypeFlags) {
  std::string f = EncodeFrame(0x01020304, FrameType::kResponse, "abc");
  ASSERT_EQ(f.size(), kFrameHeaderSize + 3);
  EXPECT_EQ(f.substr(0, 10), std::string("\x00\x00\x00\x03\x01\x02\x03\x04\x02\x00", 10));
  EXPECT_EQ(f.substr(10), "abc");
  FrameHeader h = DecodeFrameHeader(f.data());
  EXPECT_EQ(h.length, 3u);
  EXPECT_EQ(h.stream_id, 0x01020304u);
  EXPECT_EQ(h.type, 2);
  EXPECT_EQ(h.flags, 0);
}

TEST(FrameTest, HighBitsSurviveRoundTrip) {
  char buf[kFrameHeaderSize];
  EncodeFrameHeader({0xfedcba98, 0xffffffff, 0xff, 0x81}, buf);
  FrameHeader h = DecodeFrameHeader(buf);
  EXPECT_EQ(h.length, 0xfedcba98u);
  EXPECT_EQ(h.stream_id, 0xffffffffu);
  EXPECT_EQ(h.type, 0xff);
  EXPECT_EQ(h.flags, 0x81);
}

TEST(FrameDecoderTest, ByteByByteFeedYieldsEachFrameOnce) {
  std::string wire = EncodeFrame(1, FrameType::kRequest, "hello") +
                     EncodeFrame(3, FrameType::kRequest, "") +
                     EncodeFrame(5, FrameType::kRequest, std::string(1000, 'x'));
  FrameDecoder d;
  std::vector<DecodedFrame> got;
  for (char c : wire) {
    d.Feed(std::string_view(&c, 1));
    while (auto f = d.Next()) got.push_back(std::move(*f));
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].header.stream_id, 1u);
  EXPECT_EQ(got[0].payload, "hello");
  EXPECT_EQ(got[1].header.stream_id, 3u);
  EXPECT_EQ(got[1].payload, "");
  EXPECT_EQ(got[2].payload, std::string(1000, 'x'));
  EXPECT_TRUE(d.AtFrameBoundary());
}

TEST(FrameDecoderTest, PartialFrameIsNotABoundary) {
  std::string wire = EncodeFrame(1, FrameType::kRequest, "hello");
  FrameDecoder d;
  d.Feed(std::string_view(wire).substr(0, 4));
  EXPECT_FALSE(d.Next());
  EXPECT_FALSE(d.AtFrameBoundary());
  d.Feed(std::string_view(wire).substr(4, 8));
  EXPECT_FALSE(d.Next());
  EXPECT_FALSE(d.AtFrameBoundary());
  d.Feed(std::string_view(wire).substr(12));
  ASSERT_TRUE(d.Next());
  EXPECT_TRUE(d.AtFrameBoundary());
}

TEST(FrameDecoderTest, OversizedPayloadIsSkippedAndReportedThenStreamResyncs) {
  const uint32_t big = kMaxPayloadBytes + 1;
  char hdr[kFrameHeaderSize];
  EncodeFrameHeader({big, 7, 1, 0}, hdr);
  FrameDecoder d;
  d.Feed(std::string_view(hdr, sizeof hdr));
  EXPECT_FALSE(d.Next());  // reported only once the payload has gone by
  std::string chunk(1 << 20, 'z');
  uint32_t left = big;
  while (left > 0) {
    size_t n = std::min<size_t>(left, chunk.size());
    d.Feed(std::string_view(chunk).substr(0, n));
    left -= static_cast<uint32_t>(n);
    // Discarded bytes are not held.
    EXPECT_EQ(d.buffered(), 0u);
    if (left > 0) {
      EXPECT_FALSE(d.Next());
    }
  }
  auto f = d.Next();
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->oversized);
  EXPECT_EQ(f->header.stream_id, 7u);
  EXPECT_EQ(f->header.length, big);
  EXPECT_TRUE(f->payload.empty());
  d.Feed(EncodeFrame(9, FrameType::kRequest, "after"));
  auto g = d.Next();
  ASSERT_TRUE(g);
  EXPECT_FALSE(g->oversized);
  EXPECT_EQ(g->payload, "after");
}

TEST(FrameDecoderTest, OversizedFrameFollowedByFrameInSameFeed) {
  const uint32_t big = kMaxPayloadBytes + 10;
  std::string wire(kFrameHeaderSize, '\0');
  EncodeFrameHeader({big, 1, 1, 0}, wire.data());
  wire += std::string(big, 'q');
  wire += EncodeFrame(3, FrameType::kRequest, "ok");
  FrameDecoder d;
  d.Feed(wire);
  auto a = d.Next();
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->oversized);
  auto b = d.Next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->payload, "ok");
  EXPECT_FALSE(d.Next());
  EXPECT_TRUE(d.AtFrameBoundary());
}

TEST(FrameDecoderTest, MaxSizedPayloadIsAccepted) {
  std::string payload(kMaxPayloadBytes, 'm');
  FrameDecoder d;
  d.Feed(EncodeFrame(1, FrameType::kRequest, payload));
  auto f = d.Next();
  ASSERT_TRUE(f);
  EXPECT_FALSE(f->oversized);
  EXPECT_EQ(f->payload.size(), kMaxPayloadBytes);
}

}  // namespace
}  // namespace capsule::ttrpc
