// ChannelStream against a fake server on a loopback socket, run by a
// thread: the handshake and its checks, masked client frames in each
// length form, the server's length forms, fragmented messages with a ping
// inside, oversized and malformed frames refused, the close handshake
// either way, EOF, port-forward headers; and ParseExecStatus. The fake
// server's framing is written out here, independent of the library's.
#include "tests/support/streaming/channel_stream.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <cstring>
#include <functional>
#include <future>
#include <thread>

#include "tests/support/streaming/exec_status.h"
#include "tests/support/streaming/websocket_handshake.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing::streaming {
namespace {

using std::chrono::milliseconds;
using namespace std::string_literals;

constexpr milliseconds kTimeout{10000};

// ---- The fake server's side of the wire ----

void WriteRaw(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      ADD_FAILURE() << "fake server: send failed: " << std::strerror(errno);
      return;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Exactly n bytes, or what came before EOF/timeout (a failure then).
std::string ReadExactly(int fd, size_t n) {
  std::string out;
  while (out.size() < n) {
    char buf[65536];
    const ssize_t got = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
    if (got <= 0) {
      ADD_FAILURE() << "fake server: wanted " << n << " bytes, got " << out.size();
      return out;
    }
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

std::string ReadRequest(int fd) {
  std::string req;
  while (req.find("\r\n\r\n") == std::string::npos) {
    char c;
    if (::recv(fd, &c, 1, 0) != 1) {
      ADD_FAILURE() << "fake server: request cut short: " << req;
      return req;
    }
    req.push_back(c);
  }
  return req;
}

// The value of header `name` (as spelled by the client), "" if absent.
std::string HeaderOf(const std::string& request, const std::string& name) {
  const size_t at = request.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  const size_t start = at + 4 + name.size();
  return request.substr(start, request.find("\r\n", start) - start);
}

// Reads the request and answers 101 with `accept` (default: the right one)
// and `protocol`; `extra` goes out in the same write.
void Handshake(int fd, const std::string& protocol = std::string(kV4ChannelProtocol), const std::string& accept = "",
               const std::string& extra = "") {
  const std::string req = ReadRequest(fd);
  const std::string key = HeaderOf(req, "Sec-WebSocket-Key");
  std::string resp = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n";
  resp += "Sec-WebSocket-Accept: " + (accept.empty() ? AcceptFor(key) : accept) + "\r\n";
  if (!protocol.empty()) resp += "Sec-WebSocket-Protocol: " + protocol + "\r\n";
  WriteRaw(fd, resp + "\r\n" + extra);
}

// A server frame: first byte `b0` (FIN, opcode), unmasked, with the
// shortest length form unless `form` (125, 126 or 127) forces one.
std::string ServerFrame(uint8_t b0, std::string_view payload, int form = 0) {
  std::string f(1, static_cast<char>(b0));
  const uint64_t n = payload.size();
  if (form == 0) form = n < 126 ? 125 : (n <= 0xFFFF ? 126 : 127);
  if (form == 125) {
    f.push_back(static_cast<char>(n));
  } else {
    f.push_back(static_cast<char>(form));
    for (int i = (form == 126 ? 1 : 7); i >= 0; --i) f.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  }
  f.append(payload);
  return f;
}

std::string Binary(uint8_t channel, std::string_view data) {
  return ServerFrame(0x82, std::string(1, static_cast<char>(channel)) + std::string(data));
}

struct ClientFrame {
  uint8_t b0 = 0;
  uint8_t len7 = 0;  // the 7-bit length field as sent (126/127: extended)
  bool masked = false;
  std::array<uint8_t, 4> mask{};
  std::string wire;     // the payload as sent
  std::string payload;  // unmasked
};

ClientFrame ReadClientFrame(int fd) {
  ClientFrame f;
  const std::string h = ReadExactly(fd, 2);
  if (h.size() != 2) return f;
  f.b0 = static_cast<uint8_t>(h[0]);
  f.masked = (static_cast<uint8_t>(h[1]) & 0x80) != 0;
  f.len7 = static_cast<uint8_t>(h[1]) & 0x7F;
  uint64_t n = f.len7;
  if (f.len7 == 126 || f.len7 == 127) {
    const std::string ext = ReadExactly(fd, f.len7 == 126 ? 2 : 8);
    n = 0;
    for (char c : ext) n = (n << 8) | static_cast<uint8_t>(c);
  }
  if (f.masked) {
    const std::string m = ReadExactly(fd, 4);
    for (size_t i = 0; i < 4 && i < m.size(); ++i) f.mask[i] = static_cast<uint8_t>(m[i]);
  }
  f.wire = ReadExactly(fd, static_cast<size_t>(n));
  f.payload = f.wire;
  for (size_t i = 0; i < f.payload.size(); ++i) f.payload[i] = static_cast<char>(f.payload[i] ^ f.mask[i % 4]);
  return f;
}

// Listens on 127.0.0.1 and runs `script` on the first connection in a
// thread; joined (and the connection closed) on destruction.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int)> script) {
    listen_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (::bind(listen_.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0 || ::listen(listen_.get(), 1) != 0 ||
        ::getsockname(listen_.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      ADD_FAILURE() << "fake server: listen: " << std::strerror(errno);
      return;
    }
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this, s = std::move(script)] {
      pollfd p{listen_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(kTimeout.count())) != 1) {
        ADD_FAILURE() << "fake server: no connection";
        return;
      }
      UniqueFd conn(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) return;
      timeval tv{static_cast<time_t>(kTimeout.count() / 1000), 0};
      ::setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      s(conn.get());
    });
  }
  ~FakeServer() { Join(); }
  // Waits for the script to finish: what it recorded is then safe to read.
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  std::string Url(const std::string& path = "/exec/tok123") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  UniqueFd listen_;
  uint16_t port_ = 0;
  std::thread thread_;
};

Result<ChannelStream> OpenTo(const FakeServer& server) {
  return ChannelStream::Open(server.Url(), kV4ChannelProtocol, kTimeout);
}

// ---- Handshake ----

TEST(WebSocketHandshakeTest, AcceptMatchesTheRfcExample) {
  // RFC 6455 section 1.3.
  EXPECT_EQ(AcceptFor("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64("fo"), "Zm8=");
}

TEST(WebSocketHandshakeTest, ParsesPlainHttpUrlsAndRefusesHttps) {
  auto u = ParseHttpUrl("http://127.0.0.1:35555/exec/AbC?x=1");
  ASSERT_OK(u);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 35555);
  EXPECT_EQ(u->authority, "127.0.0.1:35555");
  EXPECT_EQ(u->target, "/exec/AbC?x=1");
  auto v6 = ParseHttpUrl("http://[::1]:8080");
  ASSERT_OK(v6);
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8080);
  EXPECT_EQ(v6->target, "/");
  auto plain = ParseHttpUrl("http://localhost/a");
  ASSERT_OK(plain);
  EXPECT_EQ(plain->port, 80);

  auto tls = ParseHttpUrl("https://127.0.0.1:1/exec/x");
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.status().message().find("https is not supported"), std::string::npos) << tls.status().ToString();
  EXPECT_FALSE(ParseHttpUrl("http://127.0.0.1:99999/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://:80/").ok());
  EXPECT_FALSE(ParseHttpUrl("127.0.0.1:80/").ok());

  auto opened = ChannelStream::Open("https://127.0.0.1:1/exec/x", kV4ChannelProtocol, kTimeout);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), Code::kInvalidArgument);
  EXPECT_NE(opened.status().message().find("https://127.0.0.1:1/exec/x"), std::string::npos);
}

TEST(ChannelStreamTest, HandshakeSendsTheUpgradeRequestAndKeepsBytesAfterTheHead) {
  std::string request;
  FakeServer server([&](int fd) {
    request = ReadRequest(fd);
    const std::string key = HeaderOf(request, "Sec-WebSocket-Key");
    WriteRaw(fd,
             "HTTP/1.1 101 Switching Protocols\r\nupgrade: WebSocket\r\nconnection: keep-alive, Upgrade\r\n"
             "sec-websocket-accept: " +
                 AcceptFor(key) + "\r\nsec-websocket-protocol: v4.channel.k8s.io\r\n\r\n" +
                 Binary(1, ""));  // remotecommand's first, empty, stdout message
    WriteRaw(fd, Binary(1, "first"));
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  auto m = stream->Read(kTimeout);
  ASSERT_OK(m);
  ASSERT_TRUE(m->has_value());
  EXPECT_EQ((*m)->channel, 1);
  EXPECT_EQ((*m)->payload, "");
  m = stream->Read(kTimeout);
  ASSERT_TRUE(m.ok() && m->has_value()) << m.status().ToString();
  EXPECT_EQ((*m)->payload, "first");

  server.Join();
  EXPECT_EQ(request.rfind("GET /exec/tok123 HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_EQ(HeaderOf(request, "Host"), server.Url("").substr(7));
  EXPECT_EQ(HeaderOf(request, "Upgrade"), "websocket");
  EXPECT_EQ(HeaderOf(request, "Connection"), "Upgrade");
  EXPECT_EQ(HeaderOf(request, "Sec-WebSocket-Version"), "13");
  EXPECT_EQ(HeaderOf(request, "Sec-WebSocket-Protocol"), "v4.channel.k8s.io");
  const std::string key = HeaderOf(request, "Sec-WebSocket-Key");
  EXPECT_EQ(key.size(), 24u) << key;  // 16 bytes in base64
  EXPECT_TRUE(key.ends_with("==")) << key;
}

TEST(ChannelStreamTest, AWrongAcceptIsRefused) {
  FakeServer server([](int fd) { Handshake(fd, std::string(kV4ChannelProtocol), AcceptFor("some other key")); });
  auto stream = OpenTo(server);
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.status().message().find("Sec-WebSocket-Accept"), std::string::npos) << stream.status().ToString();
  EXPECT_NE(stream.status().message().find(server.Url()), std::string::npos) << stream.status().ToString();
}

TEST(ChannelStreamTest, ARefusalNamesTheStatusLineAndBody) {
  FakeServer server([](int fd) {
    ReadRequest(fd);
    WriteRaw(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 19\r\n\r\n404 page not found\n");
  });
  auto stream = OpenTo(server);
  ASSERT_FALSE(stream.ok());
  const std::string& msg = stream.status().message();
  EXPECT_NE(msg.find("HTTP/1.1 404 Not Found"), std::string::npos) << msg;
  EXPECT_NE(msg.find("404 page not found"), std::string::npos) << msg;
  EXPECT_NE(msg.find(server.Url()), std::string::npos) << msg;
}

TEST(ChannelStreamTest, ASubprotocolTheServerDidNotPickIsRefused) {
  FakeServer none([](int fd) { Handshake(fd, ""); });
  auto a = OpenTo(none);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("picked no sub-protocol"), std::string::npos) << a.status().ToString();

  FakeServer other([](int fd) { Handshake(fd, "channel.k8s.io"); });
  auto b = OpenTo(other);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("channel.k8s.io"), std::string::npos) << b.status().ToString();
}

TEST(ChannelStreamTest, AMissingUpgradeHeaderIsRefused) {
  FakeServer server([](int fd) {
    const std::string key = HeaderOf(ReadRequest(fd), "Sec-WebSocket-Key");
    WriteRaw(fd, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + AcceptFor(key) +
                     "\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n");
  });
  auto stream = OpenTo(server);
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.status().message().find("Upgrade: websocket"), std::string::npos) << stream.status().ToString();
}

// ---- Client frames ----

TEST(ChannelStreamTest, ClientFramesAreMaskedInEachLengthForm) {
  const std::string mid(300, 'm');    // 16-bit length
  const std::string big(70000, 'b');  // 64-bit length
  std::vector<ClientFrame> frames;
  FakeServer server([&](int fd) {
    Handshake(fd);
    for (int i = 0; i < 4; ++i) frames.push_back(ReadClientFrame(fd));
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  ASSERT_OK(stream->Send(kStdinChannel, "hello\n"));
  ASSERT_OK(stream->Send(kStdinChannel, mid));
  ASSERT_OK(stream->Send(kStdinChannel, big));
  ASSERT_OK(stream->SendResize(123, 45));
  server.Join();
  ASSERT_EQ(frames.size(), 4u);
  const std::string want[] = {"\0hello\n"s, "\0"s + mid, "\0"s + big, "\x04{\"Width\":123,\"Height\":45}"s};
  const uint8_t want_len7[] = {7, 126, 127, 26};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(frames[i].b0, 0x82) << "FIN + binary";
    EXPECT_TRUE(frames[i].masked) << "client frames must be masked";
    EXPECT_EQ(frames[i].len7, want_len7[i]);
    EXPECT_EQ(frames[i].payload, want[i]);
    if (frames[i].mask != std::array<uint8_t, 4>{}) {
      EXPECT_NE(frames[i].wire, frames[i].payload) << "the payload went out unmasked";
    }
  }
  EXPECT_FALSE(frames[0].mask == frames[1].mask && frames[1].mask == frames[2].mask)
      << "the mask must be fresh per frame";
}

// ---- Server frames ----

TEST(ChannelStreamTest, ServerLengthFormsAreDecoded) {
  const std::string small(100, 's');
  const std::string mid(300, 'm');
  const std::string big(70000, 'b');
  FakeServer server([&](int fd) {
    Handshake(fd);
    WriteRaw(fd,
             ServerFrame(0x82, "\x01"s + small) + ServerFrame(0x82, "\x02"s + mid) + ServerFrame(0x82, "\x01"s + big));
    // A short payload in the 16-bit form is legal too.
    WriteRaw(fd, ServerFrame(0x82,
                             "\x03"
                             "abc",
                             126));
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  const std::pair<uint8_t, std::string> want[] = {{1, small}, {2, mid}, {1, big}, {3, "abc"}};
  for (const auto& [channel, payload] : want) {
    auto m = stream->Read(kTimeout);
    ASSERT_TRUE(m.ok() && m->has_value()) << m.status().ToString();
    EXPECT_EQ((*m)->channel, channel);
    EXPECT_EQ((*m)->payload, payload);
  }
}

TEST(ChannelStreamTest, AFragmentedMessageIsReassembledAndAPingInsideIsAnswered) {
  ClientFrame pong;
  FakeServer server([&](int fd) {
    Handshake(fd);
    WriteRaw(fd, ServerFrame(0x02,
                             "\x01"
                             "ab"));        // binary, no FIN
    WriteRaw(fd, ServerFrame(0x89, "p1"));  // ping between fragments
    WriteRaw(fd, ServerFrame(0x00, "cd"));  // continuation, no FIN
    WriteRaw(fd, ServerFrame(0x80, "ef"));  // continuation, FIN
    pong = ReadClientFrame(fd);
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  auto m = stream->Read(kTimeout);
  ASSERT_TRUE(m.ok() && m->has_value()) << m.status().ToString();
  EXPECT_EQ((*m)->channel, 1);
  EXPECT_EQ((*m)->payload, "abcdef");
  server.Join();
  EXPECT_EQ(pong.b0, 0x8A) << "FIN + pong";
  EXPECT_TRUE(pong.masked);
  EXPECT_EQ(pong.payload, "p1");
}

TEST(ChannelStreamTest, AContinuationOutsideAMessageIsAProtocolError) {
  ClientFrame close;
  FakeServer server([&](int fd) {
    Handshake(fd);
    WriteRaw(fd, ServerFrame(0x80, "\x01x"));
    close = ReadClientFrame(fd);
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  auto m = stream->Read(kTimeout);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("continuation"), std::string::npos) << m.status().ToString();
  EXPECT_TRUE(stream->ended());
  server.Join();
  EXPECT_EQ(close.b0, 0x88);
  EXPECT_EQ(close.payload, "\x03\xea"s) << "1002, protocol error";
}

TEST(ChannelStreamTest, AnOversizedLengthIsRefusedFromItsHeader) {
  ClientFrame close;
  FakeServer server([&](int fd) {
    Handshake(fd);
    // 64-bit length 2^40, and no payload at all: a client that waited for
    // it would time out instead of refusing.
    WriteRaw(fd, "\x82\x7f\x00\x00\x01\x00\x00\x00\x00\x00"s);
    close = ReadClientFrame(fd);
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  const auto start = std::chrono::steady_clock::now();
  auto m = stream->Read(kTimeout);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kResourceExhausted) << m.status().ToString();
  EXPECT_NE(m.status().message().find("1099511627776"), std::string::npos) << m.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, kTimeout / 2);
  server.Join();
  EXPECT_EQ(close.payload, "\x03\xf1"s) << "1009, message too big";
}

TEST(ChannelStreamTest, FragmentsAddingUpPastTheLimitAreRefused) {
  FakeServer server([](int fd) {
    Handshake(fd);
    WriteRaw(fd, ServerFrame(0x02,
                             "\x01"
                             "12345") +
                     ServerFrame(0x00, "67890") + ServerFrame(0x80, "abc"));
    ReadClientFrame(fd);
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  stream->set_max_message_bytes(12);
  auto m = stream->Read(kTimeout);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kResourceExhausted) << m.status().ToString();
}

TEST(ChannelStreamTest, MalformedServerFramesAreRefused) {
  const std::string bad[] = {
      "\x82\x7f\x80\x00\x00\x00\x00\x00\x00\x01"s,  // 64-bit length with its top bit set
      "\x82\x81\x01\x02\x03\x04\x00"s,              // a masked server frame
      "\xc2\x01\x01"s,                              // RSV1 without an extension
      "\x83\x01\x01"s,                              // reserved opcode 3
      "\x09\x01p"s,                                 // a fragmented ping
      ServerFrame(0x89, std::string(126, 'p')),     // a ping over 125 bytes
  };
  for (const std::string& frame : bad) {
    SCOPED_TRACE(::testing::PrintToString(frame.substr(0, 4)));
    FakeServer server([&](int fd) {
      Handshake(fd);
      WriteRaw(fd, frame);
      ReadClientFrame(fd);  // the client's close
    });
    auto stream = OpenTo(server);
    ASSERT_OK(stream);
    auto m = stream->Read(kTimeout);
    EXPECT_FALSE(m.ok());
    EXPECT_NE(m.status().code(), Code::kDeadlineExceeded) << m.status().ToString();
  }
}

TEST(ChannelStreamTest, AReadTimesOutAndKeepsWhatCameOfAFrame) {
  std::promise<void> go;
  FakeServer server([&](int fd) {
    Handshake(fd);
    const std::string frame = Binary(2, "split");
    WriteRaw(fd, frame.substr(0, 4));
    go.get_future().wait_for(kTimeout);
    WriteRaw(fd, frame.substr(4));
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  auto m = stream->Read(milliseconds(200));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kDeadlineExceeded) << m.status().ToString();
  go.set_value();
  m = stream->Read(kTimeout);
  ASSERT_TRUE(m.ok() && m->has_value()) << m.status().ToString();
  EXPECT_EQ((*m)->channel, 2);
  EXPECT_EQ((*m)->payload, "split");
}

// ---- Ending ----

TEST(ChannelStreamTest, TheServersCloseIsAnsweredAndEndsTheStream) {
  ClientFrame reply;
  FakeServer server([&](int fd) {
    Handshake(fd);
    WriteRaw(fd, Binary(1, "") + Binary(1, "out\n") + Binary(2, "err\n") + Binary(1, "more\n") +
                     Binary(3, R"({"metadata":{},"status":"Success"})"));
    WriteRaw(fd, ServerFrame(0x88,
                             "\x03\xe8"
                             "bye"s));
    reply = ReadClientFrame(fd);
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  auto out = stream->CollectUntilClose(kTimeout);
  ASSERT_OK(out);
  EXPECT_TRUE(out->ended);
  EXPECT_EQ(out->Of(kStdoutChannel), "out\nmore\n");
  EXPECT_EQ(out->Of(kStderrChannel), "err\n");
  EXPECT_EQ(out->Of(kStdinChannel), "");
  auto status = ParseExecStatus(out->Of(kErrorChannel));
  ASSERT_OK(status);
  EXPECT_TRUE(status->success);
  EXPECT_TRUE(stream->ended());
  EXPECT_EQ(stream->close_code(), std::optional<uint16_t>(1000));
  EXPECT_EQ(stream->close_reason(), "bye");
  server.Join();
  EXPECT_EQ(reply.b0, 0x88) << "FIN + close";
  EXPECT_TRUE(reply.masked);
  EXPECT_EQ(reply.payload, "\x03\xe8"s);

  Status late = stream->Send(kStdinChannel, "x");
  EXPECT_EQ(late.code(), Code::kFailedPrecondition) << late.ToString();
  auto again = stream->Read(kTimeout);
  ASSERT_OK(again);
  EXPECT_FALSE(again->has_value());
  EXPECT_OK(stream->Close(kTimeout));
}

TEST(ChannelStreamTest, EofWithoutACloseFrameEndsTheStream) {
  FakeServer server([](int fd) {
    Handshake(fd);
    WriteRaw(fd, Binary(1, "last"));
    ::shutdown(fd, SHUT_WR);
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  auto out = stream->CollectUntilClose(kTimeout);
  ASSERT_OK(out);
  EXPECT_TRUE(out->ended);
  EXPECT_EQ(out->Of(kStdoutChannel), "last");
  EXPECT_FALSE(stream->close_code().has_value());
}

TEST(ChannelStreamTest, EofInsideAFrameIsAnError) {
  FakeServer server([](int fd) {
    Handshake(fd);
    WriteRaw(fd, Binary(1, "truncated").substr(0, 5));
    ::shutdown(fd, SHUT_WR);
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  auto m = stream->Read(kTimeout);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("middle of a frame"), std::string::npos) << m.status().ToString();
}

TEST(ChannelStreamTest, CloseSendsOursAndWaitsForTheServers) {
  ClientFrame close;
  FakeServer server([&](int fd) {
    Handshake(fd);
    close = ReadClientFrame(fd);
    WriteRaw(fd, Binary(1, "in flight") + ServerFrame(0x88, "\x03\xe8"s));
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  Status closed = stream->Close(kTimeout);
  EXPECT_OK(closed);
  EXPECT_TRUE(stream->ended());
  EXPECT_EQ(stream->close_code(), std::optional<uint16_t>(1000));
  server.Join();
  EXPECT_EQ(close.b0, 0x88);
  EXPECT_TRUE(close.masked);
  EXPECT_EQ(close.payload, "\x03\xe8"s);
}

TEST(ChannelStreamTest, CollectUntilStopsWhenThePredicateHolds) {
  std::promise<void> done;
  FakeServer server([&](int fd) {
    Handshake(fd);
    WriteRaw(fd, Binary(1, "wait-") + Binary(2, "e") + Binary(1, "ing"));
    done.get_future().wait_for(kTimeout);
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  auto out = stream->CollectUntil([](const ChannelOutput& o) { return o.Of(kStdoutChannel) == "wait-ing"; }, kTimeout);
  ASSERT_OK(out);
  EXPECT_FALSE(out->ended);
  EXPECT_EQ(out->Of(kStderrChannel), "e");
  auto late = stream->CollectUntil([](const ChannelOutput&) { return false; }, milliseconds(100));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), Code::kDeadlineExceeded);
  done.set_value();
}

// ---- Port forward ----

TEST(ChannelStreamTest, PortForwardHeadersAreConsumedAndEarlyDataKept) {
  auto port = [](uint16_t p) { return std::string{static_cast<char>(p & 0xFF), static_cast<char>(p >> 8)}; };
  FakeServer server([&](int fd) {
    Handshake(fd);
    WriteRaw(fd, Binary(0, port(80)) + Binary(1, port(80)) + Binary(0, "early") + Binary(2, port(8080)) +
                     Binary(3, port(8080)) + Binary(2, "data"));
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  Status headers = stream->ReadPortForwardHeaders({80, 8080}, kTimeout);
  ASSERT_OK(headers);
  auto m = stream->Read(kTimeout);
  ASSERT_TRUE(m.ok() && m->has_value()) << m.status().ToString();
  EXPECT_EQ((*m)->channel, PortForwardDataChannel(0));
  EXPECT_EQ((*m)->payload, "early");
  m = stream->Read(kTimeout);
  ASSERT_TRUE(m.ok() && m->has_value()) << m.status().ToString();
  EXPECT_EQ((*m)->channel, PortForwardDataChannel(1));
  EXPECT_EQ((*m)->payload, "data");
}

TEST(ChannelStreamTest, APortHeaderNamingAnotherPortIsRefused) {
  FakeServer server([](int fd) {
    Handshake(fd);
    WriteRaw(fd, Binary(0, "\x51\x00"s));  // 81
  });
  auto stream = OpenTo(server);
  ASSERT_OK(stream);
  Status headers = stream->ReadPortForwardHeaders({80}, kTimeout);
  ASSERT_FALSE(headers.ok());
  EXPECT_NE(headers.message().find("port 81, not 80"), std::string::npos) << headers.ToString();
}

// ---- The exec status ----

TEST(ExecStatusTest, SuccessFailureWithAnExitCodeAndAnInternalError) {
  auto ok = ParseExecStatus(R"({"metadata":{},"status":"Success"})");
  ASSERT_OK(ok);
  EXPECT_TRUE(ok->success);
  EXPECT_EQ(ok->exit_code, std::optional<int>(0));

  // As the kubelet's remotecommand writes a non-zero exit.
  auto failed = ParseExecStatus(
      R"({"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: error executing command [sh -c exit 3], exit code 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}})");
  ASSERT_OK(failed);
  EXPECT_FALSE(failed->success);
  EXPECT_EQ(failed->exit_code, std::optional<int>(3));
  EXPECT_EQ(failed->reason, "NonZeroExitCode");

  auto internal = ParseExecStatus(
      R"({"metadata":{},"status":"Failure","message":"error executing command in container: no such file","reason":"InternalError","code":500})");
  ASSERT_OK(internal);
  EXPECT_FALSE(internal->success);
  EXPECT_FALSE(internal->exit_code.has_value());
  EXPECT_NE(internal->message.find("no such file"), std::string::npos);
}

TEST(ExecStatusTest, WhatIsNotAStatusIsRefused) {
  EXPECT_FALSE(ParseExecStatus("").ok());
  EXPECT_FALSE(ParseExecStatus("not json").ok());
  EXPECT_FALSE(ParseExecStatus("[1,2]").ok());
  EXPECT_FALSE(ParseExecStatus(R"({"status":"Pending"})").ok());
  auto bad_code =
      ParseExecStatus(R"({"status":"Failure","details":{"causes":[{"reason":"ExitCode","message":"three"}]}})");
  ASSERT_FALSE(bad_code.ok());
  EXPECT_NE(bad_code.status().message().find("three"), std::string::npos) << bad_code.status().ToString();
}

}  // namespace
}  // namespace capsule::testing::streaming
