// End-to-end tests of capsule_ttrpc's server and client over real unix
// sockets (temp-dir paths and socketpairs). Misbehaving peers are written
// frame by frame with RawPeer.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <latch>
#include <set>
#include <thread>
#include <vector>

#include "containerd/task/v2/shim.pb.h"
#include "runtime/common/file_util.h"
#include "runtime/common/unix_stream.h"
#include "runtime/ttrpc/client.h"
#include "runtime/ttrpc/server.h"
#include "runtime/ttrpc/unix_socket.h"
#include "tests/runtime/ttrpc/test_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::ttrpc {
namespace {

using namespace std::chrono_literals;
using testing::MakeRequest;
using testing::RawPeer;
using testing::SocketPair;
namespace task = ::containerd::task::v2;

constexpr char kTask[] = "containerd.task.v2.Task";

// A gate a handler can block on until the test opens it.
class Gate {
 public:
  void Open() { promise_.set_value(); }
  void Wait() const { future_.wait(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
};

class TtrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("ttrpc-test");
    ASSERT_OK(dir);
    dir_.emplace(std::move(*dir));
    socket_ = dir_->Join("ttrpc.sock");
  }

  std::unique_ptr<Server> StartServer(ServerOptions opts = {}) {
    auto server = std::make_unique<Server>(std::move(opts));
    server->RegisterMethod<task::StateRequest, task::StateResponse>(
        kTask, "State", [](const CallContext&, const task::StateRequest& req) {
          task::StateResponse resp;
          resp.set_id(req.id());
          resp.set_bundle("/bundle/" + req.id());
          resp.set_pid(42);
          return Result<task::StateResponse>(resp);
        });
    server->Register(kTask, "Echo", [](const CallContext&, std::string_view p) {
      return Result<std::string>(std::string(p));
    });
    Status st = server->Listen(socket_, 0600);
    EXPECT_OK(st);
    return server;
  }

  ClientPtr Dial() {
    auto c = Client::Dial("unix://" + socket_, 5s);
    EXPECT_OK(c);
    return c.ok() ? std::move(*c) : nullptr;
  }

  // A client on a socketpair whose other end the test drives as the server.
  static std::pair<ClientPtr, RawPeer> ClientWithRawServer() {
    auto [ours, theirs] = SocketPair();
    auto client = Client::FromFd(std::move(ours));
    EXPECT_OK(client);
    return {client.ok() ? std::move(*client) : nullptr, RawPeer(std::move(theirs))};
  }

  // A hand-driven client on a socketpair the server serves.
  static RawPeer ServeRawPeer(Server& server) {
    auto [ours, theirs] = SocketPair();
    Status st = server.ServeConnection(std::move(theirs));
    EXPECT_OK(st);
    return RawPeer(std::move(ours));
  }

  // A State call that must succeed: proves a server/connection still works.
  void ExpectStateWorks(Client& client) {
    task::StateRequest req;
    req.set_id("c1");
    task::StateResponse resp;
    Status st = client.Call(kTask, "State", req, &resp);
    ASSERT_OK(st);
    EXPECT_EQ(resp.bundle(), "/bundle/c1");
  }

  std::optional<TempDir> dir_;
  std::string socket_;
};

TEST_F(TtrpcTest, TypedRoundTripOverUnixSocket) {
  auto server = StartServer();
  struct stat st;
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto client = Dial();
  ASSERT_TRUE(client);
  task::StateRequest req;
  req.set_id("ctr-1");
  task::StateResponse resp;
  ASSERT_OK(client->Call(kTask, "State", req, &resp));
  EXPECT_EQ(resp.id(), "ctr-1");
  EXPECT_EQ(resp.bundle(), "/bundle/ctr-1");
  EXPECT_EQ(resp.pid(), 42u);
  auto echo = client->CallRaw(kTask, "Echo", std::string("\0bytes\xff", 7), {});
  ASSERT_OK(echo);
  EXPECT_EQ(*echo, std::string("\0bytes\xff", 7));
}

// Work a handler leaves for after its reply runs once the client has the
// answer, in order, on the handler's thread; a handler called outside a
// server runs it at once.
TEST_F(TtrpcTest, WorkLeftForAfterTheReplyRunsOnceTheClientHasTheAnswer) {
  std::promise<void> answered;
  std::shared_future<void> answered_f = answered.get_future().share();
  std::promise<std::vector<std::string>> ran;
  auto server = StartServer();
  server->Register(kTask, "Later", [&](const CallContext& ctx, std::string_view) {
    auto order = std::make_shared<std::vector<std::string>>();
    ctx.AfterReply([order, answered_f] {
      // Had this run before the reply went out, the client would still be waiting.
      order->push_back(answered_f.wait_for(5s) == std::future_status::ready ? "after the answer" : "before it");
    });
    ctx.AfterReply([order, &ran] {
      order->push_back("second");
      ran.set_value(*order);
    });
    return Result<std::string>(std::string("now"));
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  auto r = client->CallRaw(kTask, "Later", "", {});
  ASSERT_OK(r);
  EXPECT_EQ(*r, "now");
  answered.set_value();
  auto f = ran.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), (std::vector<std::string>{"after the answer", "second"}));

  bool at_once = false;
  CallContext direct;
  direct.AfterReply([&] { at_once = true; });
  EXPECT_TRUE(at_once);
}

TEST_F(TtrpcTest, HundredConcurrentCallsCompleteWhileOneHandlerBlocks) {
  Gate gate;
  std::latch entered(1);
  auto server = StartServer();
  server->Register(kTask, "Wait", [&](const CallContext&, std::string_view) {
    entered.count_down();
    gate.Wait();
    return Result<std::string>(std::string("exited"));
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  auto blocked = std::async(std::launch::async, [&c = client] { return c->CallRaw(kTask, "Wait", "", {}); });
  entered.wait();

  std::vector<std::future<Result<std::string>>> calls;
  for (int i = 0; i < 99; ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] {
      return client->CallRaw(kTask, "Echo", "call-" + std::to_string(i), {});
    }));
  }
  for (int i = 0; i < 99; ++i) {
    Result<std::string> r = calls[i].get();
    ASSERT_OK(r);
    EXPECT_EQ(*r, "call-" + std::to_string(i));
  }
  // All 99 answered while Wait still blocks: responses left out of order.
  EXPECT_EQ(blocked.wait_for(0s), std::future_status::timeout);
  gate.Open();
  Result<std::string> w = blocked.get();
  ASSERT_OK(w);
  EXPECT_EQ(*w, "exited");
}

TEST_F(TtrpcTest, OversizedRequestFrameGetsResourceExhaustedAndConnectionStaysUsable) {
  auto server = StartServer();
  RawPeer peer = ServeRawPeer(*server);
  const uint32_t big = kMaxPayloadBytes + 1;
  char hdr[kFrameHeaderSize];
  EncodeFrameHeader({big, 1, 1, 0}, hdr);
  ASSERT_TRUE(peer.WriteBytes(std::string_view(hdr, sizeof hdr)));
  ASSERT_TRUE(peer.WriteBytes(std::string(big, 'x')));
  uint32_t id = 0;
  auto resp = peer.ReadResponse(&id);
  ASSERT_TRUE(resp);
  EXPECT_EQ(id, 1u);
  EXPECT_EQ(resp->status().code(), 8);
  EXPECT_NE(resp->status().message().find("exceed"), std::string::npos);

  ASSERT_TRUE(peer.WriteRequest(3, MakeRequest(kTask, "Echo", "still here")));
  resp = peer.ReadResponse(&id);
  ASSERT_TRUE(resp);
  EXPECT_EQ(id, 3u);
  EXPECT_EQ(resp->status().code(), 0);
  EXPECT_EQ(resp->payload(), "still here");
}

TEST_F(TtrpcTest, OversizedRequestAndResponseThroughClient) {
  auto server = StartServer();
  server->Register(kTask, "Huge", [](const CallContext&, std::string_view) {
    return Result<std::string>(std::string(kMaxPayloadBytes + 100, 'h'));
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  // Too big to send: refused locally, nothing hits the wire.
  auto r = client->CallRaw(kTask, "Echo", std::string(kMaxPayloadBytes, 'a'), {});
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  // Too big to answer: the server sends status 8 instead.
  r = client->CallRaw(kTask, "Huge", "", {});
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  // Largest request that fits still goes through.
  auto ok = client->CallRaw(kTask, "Echo", std::string(kMaxPayloadBytes - 64, 'b'), {});
  ASSERT_OK(ok);
  EXPECT_EQ(ok->size(), kMaxPayloadBytes - 64);
  ExpectStateWorks(*client);
}

// Each garbage input closes its connection only; the server keeps serving.
TEST_F(TtrpcTest, GarbageAndTruncatedFramesCloseOnlyThatConnection) {
  auto server = StartServer();
  auto healthy = Dial();
  ASSERT_TRUE(healthy);

  struct Case {
    const char* name;
    std::function<bool(RawPeer&)> send;
  };
  std::vector<Case> cases = {
      {"bad type", [](RawPeer& p) { return p.WriteFrame(1, 9, MakeRequest(kTask, "Echo").SerializeAsString()); }},
      {"response type", [](RawPeer& p) { return p.WriteFrame(1, 2, ""); }},
      {"unparsable request", [](RawPeer& p) { return p.WriteFrame(1, 1, std::string("\x0a\xff\xff\xff\x0f", 5)); }},
      {"truncated header", [](RawPeer& p) {
         return p.WriteBytes(std::string("\x00\x00\x00", 3)) && ::shutdown(p.fd(), SHUT_WR) == 0;
       }},
      {"truncated payload", [](RawPeer& p) {
         std::string f = EncodeFrame(1, FrameType::kRequest, MakeRequest(kTask, "Echo", "0123456789").SerializeAsString());
         return p.WriteBytes(f.substr(0, f.size() - 4)) && ::shutdown(p.fd(), SHUT_WR) == 0;
       }},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto fd = ConnectUnix(socket_, {.listen_wait = 5s});
    ASSERT_OK(fd);
    RawPeer peer(std::move(*fd));
    ASSERT_TRUE(c.send(peer));
    EXPECT_TRUE(peer.ReadsEof());
    ExpectStateWorks(*healthy);
    auto fresh = Dial();
    ASSERT_TRUE(fresh);
    ExpectStateWorks(*fresh);
  }
}

TEST_F(TtrpcTest, GoodCallsBeforeGarbageOnSameConnectionAreAnswered) {
  auto server = StartServer();
  RawPeer peer = ServeRawPeer(*server);
  ASSERT_TRUE(peer.WriteRequest(1, MakeRequest(kTask, "Echo", "first")));
  auto resp = peer.ReadResponse();
  ASSERT_TRUE(resp);
  EXPECT_EQ(resp->payload(), "first");
  ASSERT_TRUE(peer.WriteFrame(3, 77, "junk"));
  EXPECT_TRUE(peer.ReadsEof());
}

TEST_F(TtrpcTest, HalfClosedPeerStillGetsResponsesToCallsItSent) {
  Gate gate;
  auto server = StartServer();
  server->Register(kTask, "Gated", [&](const CallContext&, std::string_view p) {
    gate.Wait();
    return Result<std::string>(std::string(p));
  });
  RawPeer peer = ServeRawPeer(*server);
  for (uint32_t id : {1u, 3u, 5u}) {
    ASSERT_TRUE(peer.WriteRequest(id, MakeRequest(kTask, "Gated", "r" + std::to_string(id))));
  }
  ASSERT_EQ(::shutdown(peer.fd(), SHUT_WR), 0);
  gate.Open();
  std::set<std::string> got;
  for (int i = 0; i < 3; ++i) {
    auto r = peer.ReadResponse();
    ASSERT_TRUE(r) << "response " << i;
    EXPECT_EQ(r->status().code(), 0);
    got.insert(r->payload());
  }
  EXPECT_EQ(got, (std::set<std::string>{"r1", "r3", "r5"}));
  EXPECT_TRUE(peer.ReadsEof());
}

TEST_F(TtrpcTest, NonBlockingFdsAreServedAndUsed) {
  auto server = StartServer();
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_OK(server->ServeConnection(UniqueFd(sv[1])));
  auto client = Client::FromFd(UniqueFd(sv[0]));
  ASSERT_OK(client);
  ExpectStateWorks(**client);
}

TEST_F(TtrpcTest, StreamIdRulesAnswerInvalidArgumentAndKeepConnection) {
  auto server = StartServer();
  RawPeer peer = ServeRawPeer(*server);
  uint32_t id = 0;
  ASSERT_TRUE(peer.WriteRequest(2, MakeRequest(kTask, "Echo", "even")));
  auto r = peer.ReadResponse(&id);
  ASSERT_TRUE(r);
  EXPECT_EQ(id, 2u);
  EXPECT_EQ(r->status().code(), 3);
  ASSERT_TRUE(peer.WriteRequest(5, MakeRequest(kTask, "Echo", "five")));
  r = peer.ReadResponse(&id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->payload(), "five");
  ASSERT_TRUE(peer.WriteRequest(3, MakeRequest(kTask, "Echo", "back")));
  r = peer.ReadResponse(&id);
  ASSERT_TRUE(r);
  EXPECT_EQ(id, 3u);
  EXPECT_EQ(r->status().code(), 3);
  ASSERT_TRUE(peer.WriteRequest(7, MakeRequest(kTask, "Echo", "seven")));
  r = peer.ReadResponse(&id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->payload(), "seven");
}

TEST_F(TtrpcTest, OkResponseAlwaysCarriesStatusField) {
  // Go's ttrpc client rejects a Response without status, even for OK.
  auto server = StartServer();
  RawPeer peer = ServeRawPeer(*server);
  ASSERT_TRUE(peer.WriteRequest(1, MakeRequest(kTask, "Echo", "x")));
  auto f = peer.ReadFrame();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->header.type, 2);
  EXPECT_EQ(f->header.flags, 0);
  ::ttrpc::Response r;
  ASSERT_TRUE(r.ParseFromString(f->payload));
  EXPECT_TRUE(r.has_status());
  // Field 1 (status), wire type 2, length 0 comes first.
  EXPECT_EQ(f->payload.substr(0, 2), std::string("\x0a\x00", 2));
}

TEST_F(TtrpcTest, UnknownServiceAndMethodAreUnimplemented) {
  auto server = StartServer();
  auto client = Dial();
  ASSERT_TRUE(client);
  auto r = client->CallRaw("no.such.Service", "State", "", {});
  EXPECT_EQ(r.status().code(), Code::kUnimplemented);
  EXPECT_NE(r.status().message().find("no.such.Service"), std::string::npos);
  r = client->CallRaw(kTask, "NoSuchMethod", "", {});
  EXPECT_EQ(r.status().code(), Code::kUnimplemented);
  EXPECT_NE(r.status().message().find("NoSuchMethod"), std::string::npos);
  ExpectStateWorks(*client);
}

TEST_F(TtrpcTest, RegisteringWhileServingTakesEffect) {
  auto server = StartServer();
  auto client = Dial();
  ASSERT_TRUE(client);
  EXPECT_EQ(client->CallRaw(kTask, "Late", "", {}).status().code(), Code::kUnimplemented);
  server->Register(kTask, "Late", [](const CallContext&, std::string_view) {
    return Result<std::string>(std::string("v1"));
  });
  EXPECT_EQ(*client->CallRaw(kTask, "Late", "", {}), "v1");
  server->Register(kTask, "Late", [](const CallContext&, std::string_view) {
    return Result<std::string>(std::string("v2"));
  });
  EXPECT_EQ(*client->CallRaw(kTask, "Late", "", {}), "v2");
}

TEST_F(TtrpcTest, StatusCodesMapOneToOne) {
  auto server = StartServer();
  server->Register(kTask, "Fail", [](const CallContext&, std::string_view p) {
    return Result<std::string>(Status(static_cast<Code>(std::stoi(std::string(p))), "because " + std::string(p)));
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  for (int code = 1; code <= 16; ++code) {
    auto r = client->CallRaw(kTask, "Fail", std::to_string(code), {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(static_cast<int>(r.status().code()), code);
    EXPECT_EQ(r.status().message(), "because " + std::to_string(code));
  }
}

TEST_F(TtrpcTest, TypedHandlerRejectsUnparsablePayloadAndThrowingHandlerIsInternal) {
  auto server = StartServer();
  server->Register(kTask, "Throw", [](const CallContext&, std::string_view) -> Result<std::string> {
    throw std::runtime_error("boom");
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  auto r = client->CallRaw(kTask, "State", std::string("\xff\xff\xff", 3), {});
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("State"), std::string::npos);
  r = client->CallRaw(kTask, "Throw", "", {});
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_NE(r.status().message().find("boom"), std::string::npos);
  ExpectStateWorks(*client);
}

TEST_F(TtrpcTest, ClientTimeoutIsDeadlineExceededAndLateResponseIsDiscarded) {
  Gate gate;
  std::latch entered(1);
  std::promise<CallContext> seen;
  auto server = StartServer();
  server->Register(kTask, "Slow", [&](const CallContext& ctx, std::string_view) {
    seen.set_value(ctx);
    entered.count_down();
    gate.Wait();
    return Result<std::string>(std::string("late"));
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  CallOptions opts;
  opts.timeout = 100ms;
  auto start = std::chrono::steady_clock::now();
  auto r = client->CallRaw(kTask, "Slow", "", opts);
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  entered.wait();
  CallContext ctx = seen.get_future().get();
  ASSERT_TRUE(ctx.deadline.has_value());  // timeout_nano reached the server
  gate.Open();
  // The late response arrives before this call's and must not be taken for it.
  auto echo = client->CallRaw(kTask, "Echo", "fresh", {});
  ASSERT_OK(echo);
  EXPECT_EQ(*echo, "fresh");
  ExpectStateWorks(*client);
}

TEST_F(TtrpcTest, ExpiredTimeoutNanoIsAnsweredWithoutRunningHandler) {
  std::atomic<int> runs{0};
  auto server = StartServer();
  server->Register(kTask, "Count", [&](const CallContext&, std::string_view) {
    ++runs;
    return Result<std::string>(std::string());
  });
  RawPeer peer = ServeRawPeer(*server);
  auto req = MakeRequest(kTask, "Count");
  req.set_timeout_nano(-1);
  ASSERT_TRUE(peer.WriteRequest(1, req));
  auto resp = peer.ReadResponse();
  ASSERT_TRUE(resp);
  EXPECT_EQ(resp->status().code(), 4);
  EXPECT_EQ(runs.load(), 0);
}

TEST_F(TtrpcTest, MetadataArrivesInOrderWithRepeatedKeys) {
  std::promise<CallContext> seen;
  auto server = StartServer();
  server->Register(kTask, "Meta", [&](const CallContext& ctx, std::string_view) {
    seen.set_value(ctx);
    return Result<std::string>(std::string());
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  CallOptions opts;
  opts.metadata = {{"containerd-namespace-ttrpc", "k8s.io"}, {"trace", "a"}, {"trace", "b"}};
  ASSERT_OK(client->CallRaw(kTask, "Meta", "", opts));
  CallContext ctx = seen.get_future().get();
  EXPECT_EQ(ctx.service, kTask);
  EXPECT_EQ(ctx.method, "Meta");
  EXPECT_EQ(ctx.metadata, opts.metadata);
  EXPECT_EQ(ctx.Get("containerd-namespace-ttrpc"), "k8s.io");
  EXPECT_EQ(ctx.Get("trace"), "a");
  EXPECT_FALSE(ctx.Get("missing").has_value());
  EXPECT_FALSE(ctx.deadline.has_value());
}

TEST_F(TtrpcTest, PeerUidCheckRejectsAndAccepts) {
  std::atomic<int> checked_uid{-1};
  ServerOptions opts;
  opts.authorize_uid = [&](uid_t uid) {
    checked_uid = static_cast<int>(uid);
    return false;
  };
  {
    auto server = StartServer(opts);
    auto client = Dial();  // the kernel completes connect(); the server then drops it
    ASSERT_TRUE(client);
    auto r = client->CallRaw(kTask, "Echo", "x", {});
    EXPECT_EQ(r.status().code(), Code::kUnavailable);
    EXPECT_EQ(checked_uid.load(), static_cast<int>(::getuid()));
    auto [ours, theirs] = SocketPair();
    Status st = server->ServeConnection(std::move(theirs));
    EXPECT_EQ(st.code(), Code::kPermissionDenied);
    EXPECT_NE(st.message().find(std::to_string(::getuid())), std::string::npos);
  }
  opts.authorize_uid = [](uid_t uid) { return uid == ::getuid(); };
  auto server = StartServer(opts);
  auto client = Dial();
  ASSERT_TRUE(client);
  ExpectStateWorks(*client);
}

TEST_F(TtrpcTest, InflightCapAnswersResourceExhaustedWithoutStallingTheConnection) {
  ServerOptions opts;
  opts.max_inflight_per_connection = 2;
  Gate gate;
  std::latch entered(2);
  auto server = StartServer(opts);
  server->Register(kTask, "Wait", [&](const CallContext&, std::string_view) {
    entered.count_down();
    gate.Wait();
    return Result<std::string>(std::string("done"));
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  auto a = std::async(std::launch::async, [&c = client] { return c->CallRaw(kTask, "Wait", "", {}); });
  auto b = std::async(std::launch::async, [&c = client] { return c->CallRaw(kTask, "Wait", "", {}); });
  entered.wait();
  auto r = client->CallRaw(kTask, "Echo", "x", {});
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  gate.Open();
  EXPECT_OK(a.get());
  EXPECT_OK(b.get());
  ExpectStateWorks(*client);
}

TEST_F(TtrpcTest, ACallSentRightAfterAnAnswerFindsItsSlotFree) {
  // With a cap of one, a client that calls strictly one after another must
  // never be refused: the slot is free once the answer is on its way.
  ServerOptions opts;
  opts.max_inflight_per_connection = 1;
  auto server = StartServer(opts);
  auto client = Dial();
  ASSERT_TRUE(client);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    auto r = client->CallRaw(kTask, "Echo", "x", {});
    if (!r.ok()) ++refused;
  }
  EXPECT_EQ(refused, 0);
}

TEST_F(TtrpcTest, ShutdownWhileHandlerBlocksWaitsForItAndLeaksNothing) {
  const int fds_before = testing::OpenFds();
  const int threads_before = testing::Threads();
  Gate gate;
  std::latch entered(1);
  std::atomic<bool> handler_done{false};
  auto server = StartServer();
  server->Register(kTask, "Wait", [&](const CallContext&, std::string_view) {
    entered.count_down();
    gate.Wait();
    handler_done = true;
    return Result<std::string>(std::string());
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  ExpectStateWorks(*client);
  auto pending = std::async(std::launch::async, [&c = client] { return c->CallRaw(kTask, "Wait", "", {}); });
  entered.wait();

  std::atomic<bool> handler_done_at_return{false};
  auto shutdown = std::async(std::launch::async, [&] {
    server->Shutdown();
    handler_done_at_return = handler_done.load();
  });
  // Shutdown closes the connection first: the pending call fails...
  EXPECT_EQ(pending.get().status().code(), Code::kUnavailable);
  // ...but Shutdown itself waits for the handler.
  EXPECT_EQ(shutdown.wait_for(0s), std::future_status::timeout);
  gate.Open();
  shutdown.get();
  EXPECT_TRUE(handler_done_at_return);
  EXPECT_FALSE(PathExists(socket_));
  EXPECT_FALSE(Client::Dial(socket_, 0ms).ok());

  client.reset();
  server.reset();
  EXPECT_EQ(testing::OpenFds(), fds_before);
  EXPECT_EQ(testing::Threads(), threads_before);
}

TEST_F(TtrpcTest, ConnectionLossFailsPendingCallsWithUnavailable) {
  auto [client, server_end] = ClientWithRawServer();
  std::vector<std::future<Result<std::string>>> calls;
  for (int i = 0; i < 3; ++i) {
    calls.push_back(std::async(std::launch::async, [&c = client] { return c->CallRaw("s", "m", "", {}); }));
  }
  // Wait until all three requests are on the wire; check the ids on the way.
  std::vector<uint32_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto f = server_end.ReadFrame();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->header.type, 1);
    ids.push_back(f->header.stream_id);
  }
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 3, 5}));
  { RawPeer gone = std::move(server_end); }
  for (auto& c : calls) EXPECT_EQ(c.get().status().code(), Code::kUnavailable);
  EXPECT_EQ(client->CallRaw("s", "m", "", {}).status().code(), Code::kUnavailable);
}

TEST_F(TtrpcTest, ClientCloseFailsPendingCalls) {
  Gate gate;
  std::latch entered(1);
  auto server = StartServer();
  server->Register(kTask, "Wait", [&](const CallContext&, std::string_view) {
    entered.count_down();
    gate.Wait();
    return Result<std::string>(std::string());
  });
  auto client = Dial();
  ASSERT_TRUE(client);
  auto pending = std::async(std::launch::async, [&c = client] { return c->CallRaw(kTask, "Wait", "", {}); });
  entered.wait();
  client->Close();
  EXPECT_EQ(pending.get().status().code(), Code::kUnavailable);
  EXPECT_EQ(client->CallRaw(kTask, "Echo", "", {}).status().code(), Code::kUnavailable);
  gate.Open();
}

TEST_F(TtrpcTest, ServerResponseForUnknownStreamIsIgnoredByClient) {
  auto [client, server_end] = ClientWithRawServer();
  auto call = std::async(std::launch::async, [&c = client] { return c->CallRaw("s", "m", "", {}); });
  auto req = server_end.ReadFrame();
  ASSERT_TRUE(req);
  ::ttrpc::Response stray;
  stray.set_payload("stray");
  ::ttrpc::Response real;
  real.mutable_status();
  real.set_payload("real");
  ASSERT_TRUE(server_end.WriteBytes(EncodeFrame(99, FrameType::kResponse, stray.SerializeAsString())));
  ASSERT_TRUE(server_end.WriteBytes(EncodeFrame(req->header.stream_id, FrameType::kResponse, real.SerializeAsString())));
  auto r = call.get();
  ASSERT_OK(r);
  EXPECT_EQ(*r, "real");
}

TEST_F(TtrpcTest, ErrorMessageThatIsNotUtf8KeepsItsCode) {
  // Go peers put arbitrary bytes (e.g. a file name) in status messages; the
  // code must survive even though proto3 `string` would demand UTF-8.
  auto [client, server_end] = ClientWithRawServer();
  auto call = std::async(std::launch::async, [&c = client] { return c->CallRaw("s", "m", "", {}); });
  auto req = server_end.ReadFrame();
  ASSERT_TRUE(req);
  ::ttrpc::Response resp;
  resp.mutable_status()->set_code(5);
  resp.mutable_status()->set_message("open /run/\xff\xfe: no such file");
  ASSERT_TRUE(server_end.WriteBytes(
      EncodeFrame(req->header.stream_id, FrameType::kResponse, resp.SerializeAsString())));
  auto r = call.get();
  EXPECT_EQ(r.status().code(), Code::kNotFound) << r.status().ToString();
  EXPECT_EQ(r.status().message(), "open /run/\xff\xfe: no such file");
}

TEST_F(TtrpcTest, RequestWithNonUtf8MetadataIsServed) {
  std::promise<CallContext> seen;
  auto server = StartServer();
  server->Register(kTask, "Meta", [&](const CallContext& ctx, std::string_view) {
    seen.set_value(ctx);
    return Result<std::string>(std::string());
  });
  RawPeer peer = ServeRawPeer(*server);
  auto req = MakeRequest(kTask, "Meta");
  auto* kv = req.add_metadata();
  kv->set_key("k");
  kv->set_value("\xc3\x28");  // invalid UTF-8, as a Go client may send
  ASSERT_TRUE(peer.WriteRequest(1, req));
  auto resp = peer.ReadResponse();
  ASSERT_TRUE(resp);
  EXPECT_EQ(resp->status().code(), 0);
  EXPECT_EQ(seen.get_future().get().Get("k"), "\xc3\x28");
}

TEST_F(TtrpcTest, ListenRefusesExistingPathAndOverlongPath) {
  ASSERT_OK(WriteFile(socket_, "x"));
  Server server;
  Status st = server.Listen(socket_, 0600);
  EXPECT_EQ(st.code(), Code::kAlreadyExists);
  EXPECT_NE(st.message().find(socket_), std::string::npos);
  EXPECT_TRUE(PathExists(socket_));  // not ours: left alone
  st = server.Listen(dir_->Join(std::string(120, 'l')), 0600);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
}

TEST_F(TtrpcTest, ListenFdServesAnInheritedSocket) {
  auto fd = ListenUnix(socket_, 0600);
  ASSERT_OK(fd);
  Server server;
  server.Register(kTask, "Echo", [](const CallContext&, std::string_view p) {
    return Result<std::string>(std::string(p));
  });
  ASSERT_OK(server.ListenFd(std::move(*fd)));
  auto client = Dial();
  ASSERT_TRUE(client);
  auto r = client->CallRaw(kTask, "Echo", "inherited", {});
  ASSERT_OK(r);
  EXPECT_EQ(*r, "inherited");
  server.Shutdown();
  // Shutdown removes only socket files it created with Listen().
  EXPECT_TRUE(PathExists(socket_));
  auto [a, b] = SocketPair();
  EXPECT_EQ(server.ListenFd(std::move(a)).code(), Code::kInvalidArgument);
}

TEST_F(TtrpcTest, DialFailsClearlyWithoutServer) {
  auto c = Client::Dial(socket_, 0ms);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(socket_), std::string::npos);
  c = Client::Dial(socket_, 30ms);
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_NE(c.status().message().find("(for 30 ms)"), std::string::npos) << c.status().message();
}

TEST_F(TtrpcTest, ManyConnectionsComeAndGoWithoutLeaks) {
  const int fds_before = testing::OpenFds();
  const int threads_before = testing::Threads();
  std::vector<ClientPtr> open;
  {
    auto server = StartServer();
    for (int i = 0; i < 20; ++i) {
      auto client = Dial();
      ASSERT_TRUE(client);
      ExpectStateWorks(*client);
    }
    for (int i = 0; i < 5; ++i) open.push_back(Dial());
    for (auto& c : open) ExpectStateWorks(*c);
  }  // server destroyed with 5 connections still open from the client side
  for (auto& c : open) EXPECT_EQ(c->CallRaw(kTask, "Echo", "", {}).status().code(), Code::kUnavailable);
  open.clear();
  EXPECT_EQ(testing::OpenFds(), fds_before);
  EXPECT_EQ(testing::Threads(), threads_before);
  EXPECT_FALSE(PathExists(socket_));
}

}  // namespace
}  // namespace capsule::ttrpc
