// Interop with the real containerd 1.6: our C++ ttrpc client publishes a
// /tasks/exit envelope through containerd's ttrpc Events service, the way a
// shim does, and `ctr events` must show it. This proves framing, the
// Request/Response envelopes and the event protos match upstream.
#include <gtest/gtest.h>
#include <google/protobuf/any.pb.h>
#include <google/protobuf/empty.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include <atomic>
#include <iostream>
#include <chrono>
#include <thread>
#include <vector>

#include "containerd/events/task.pb.h"
#include "containerd/services/events/ttrpc/v1/events.pb.h"
#include "runtime/ttrpc/client.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/status_matchers.h"

namespace capsule {
namespace {

using namespace std::chrono_literals;
using testing::ContainerdHarness;
namespace ev = ::containerd::services::events::ttrpc::v1;

constexpr char kEvents[] = "containerd.services.events.ttrpc.v1.Events";
constexpr char kNamespaceKey[] = "containerd-namespace-ttrpc";
constexpr char kNamespace[] = "capsule-ttrpc-test";

ev::ForwardRequest TaskExitEnvelope(const std::string& container_id, bool with_timestamp) {
  ::containerd::events::TaskExit exit;
  exit.set_container_id(container_id);
  exit.set_id(container_id);
  exit.set_pid(4242);
  exit.set_exit_status(137);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(now);
  exit.mutable_exited_at()->set_seconds(secs.count());
  exit.mutable_exited_at()->set_nanos(static_cast<int32_t>((now - secs).count() % 1000000000));

  ev::ForwardRequest req;
  ev::Envelope* env = req.mutable_envelope();
  if (with_timestamp) *env->mutable_timestamp() = exit.exited_at();
  env->set_namespace_(kNamespace);
  env->set_topic("/tasks/exit");
  // containerd's typeurl registry knows the bare name, not type.googleapis.com/...
  env->mutable_event()->set_type_url("containerd.events.TaskExit");
  env->mutable_event()->set_value(exit.SerializeAsString());
  return req;
}

ttrpc::CallOptions NamespaceOptions() {
  ttrpc::CallOptions o;
  o.metadata = {{kNamespaceKey, kNamespace}};
  o.timeout = 10s;
  return o;
}

class EventsInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto h = ContainerdHarness::Start();
    ASSERT_OK(h);
    harness_ = std::move(*h);
    auto c = ttrpc::Client::Dial("unix://" + harness_->ttrpc_address(), 5s);
    ASSERT_OK(c);
    client_ = std::move(*c);
  }
  void TearDown() override {
    if (HasFailure() && harness_) {
      std::cerr << "containerd log:\n" << harness_->LogTail() << "\n";
    }
    client_.reset();
    harness_.reset();
  }

  std::unique_ptr<ContainerdHarness> harness_;
  ttrpc::ClientPtr client_;
};

TEST_F(EventsInteropTest, ForwardedTaskExitReachesCtrEvents) {
  // Subscribed before we publish (the harness proves the subscription live).
  auto events = harness_->SubscribeEvents();
  ASSERT_OK(events);

  google::protobuf::Empty empty;
  Status st = client_->Call(kEvents, "Forward", TaskExitEnvelope("capsule-ttrpc-c1", true), &empty,
                            NamespaceOptions());
  ASSERT_OK(st);

  auto seen = events->WaitForOutput("capsule-ttrpc-c1", 20s);
  ASSERT_OK(seen);
  // The line is "<time> <namespace> <topic> <event as JSON>": containerd
  // decoded our Any by its type_url, so the TaskExit fields are there.
  std::string line = seen->substr(seen->find("/tasks/exit") == std::string::npos
                                      ? 0
                                      : seen->rfind('\n', seen->find("/tasks/exit")) + 1);
  std::cout << "ctr events printed: " << line;
  EXPECT_NE(line.find(kNamespace), std::string::npos) << line;
  EXPECT_NE(line.find("/tasks/exit"), std::string::npos) << line;
  EXPECT_NE(line.find("\"container_id\":\"capsule-ttrpc-c1\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"exit_status\":137"), std::string::npos) << line;
  events->Stop();
}

TEST_F(EventsInteropTest, UnknownMethodAndServiceAreUnimplemented) {
  google::protobuf::Empty empty;
  Status st = client_->Call(kEvents, "NoSuchMethod", empty, &empty, NamespaceOptions());
  EXPECT_EQ(st.code(), Code::kUnimplemented) << st.ToString();
  EXPECT_NE(st.message().find("NoSuchMethod"), std::string::npos) << st.ToString();
  st = client_->Call("containerd.no.such.Service", "Forward", empty, &empty, NamespaceOptions());
  EXPECT_EQ(st.code(), Code::kUnimplemented) << st.ToString();
  // The connection is still good after the errors.
  st = client_->Call(kEvents, "Forward", TaskExitEnvelope("after-errors", true), &empty,
                     NamespaceOptions());
  EXPECT_OK(st);
}

TEST_F(EventsInteropTest, ContainerdErrorCodesComeBackUnchanged) {
  // containerd validates the envelope and answers errdefs' InvalidArgument
  // (gRPC code 3) when the timestamp is missing.
  google::protobuf::Empty empty;
  Status st = client_->Call(kEvents, "Forward", TaskExitEnvelope("no-timestamp", false), &empty,
                            NamespaceOptions());
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("timestamp"), std::string::npos) << st.ToString();
}

TEST_F(EventsInteropTest, ManyConcurrentForwardsOnOneConnection) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 32; ++i) {
    threads.emplace_back([&, i] {
      google::protobuf::Empty empty;
      if (client_->Call(kEvents, "Forward", TaskExitEnvelope("c" + std::to_string(i), true),
                        &empty, NamespaceOptions())
              .ok()) {
        ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 32);
}

TEST_F(EventsInteropTest, ContainerdGoingAwayFailsCallsWithUnavailable) {
  // Stop() returns once the daemon has exited, so its end of our
  // connection is closed; the call must fail fast instead of hanging.
  ASSERT_OK(harness_->Stop());
  google::protobuf::Empty empty;
  Status st = client_->Call(kEvents, "Forward", TaskExitEnvelope("gone", true), &empty,
                            NamespaceOptions());
  EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
}

}  // namespace
}  // namespace capsule
