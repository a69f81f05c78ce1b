// containerd 1.6's CRI streaming server end to end on a Capsule pod (one
// VM boot): Exec, Attach and PortForward return URLs of the server that
// k8s.io/kubelet/pkg/cri/streaming runs inside containerd, and the test
// drives them over its websocket path with the v4 channel protocol
// (tests/support/streaming), as kubectl's websocket clients do. Exec
// without a tty (stdout and stderr apart, the exit code in the error
// channel's status), with stdin, with a tty resized before the command
// reads its size; Attach to a container's stdin/stdout/stderr without a
// tty and to its terminal with one; a PortForward URL (its data path is
// tests/e2e/port_forward*). The pod is removed and nothing is left.
#include <iostream>

#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/support/streaming/channel_stream.h"
#include "tests/support/streaming/exec_status.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using cri::StreamingOptions;
using streaming::ChannelOutput;
using streaming::ChannelStream;
using streaming::kErrorChannel;
using streaming::kStderrChannel;
using streaming::kStdinChannel;
using streaming::kStdoutChannel;
using streaming::kV4ChannelProtocol;
using streaming::ParseExecStatus;

// Each step of a session under TCG: an exec's process start in the guest,
// the output's way back, a container's start.
constexpr milliseconds kStreamTimeout{90000};

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class CriStreamingE2eTest : public CriE2eTest {
 protected:
  // A busybox container with stdin open (and a terminal when `tty`).
  Result<std::string> StartInteractive(const std::string& pod_id, const v1::PodSandboxConfig& pod,
                                       const std::string& name, const std::vector<std::string>& command, bool tty) {
    ContainerOptions c;
    c.name = name;
    c.image = kBusyboxImage;
    c.command = command;
    c.log_path = name + ".log";
    c.stdin = true;
    c.tty = tty;
    ASSIGN_OR_RETURN(std::string id, cri_->CreateContainer(pod_id, pod, c));
    RETURN_IF_ERROR(cri_->StartContainer(id));
    return id;
  }

  // Opens the websocket to a URL the CRI call returned.
  static Result<ChannelStream> OpenUrl(const Result<std::string>& url) {
    if (!url.ok()) return url.status();
    std::cout << "streaming URL: " << *url << "\n";
    return ChannelStream::Open(*url, kV4ChannelProtocol, kStreamTimeout);
  }

  void ExecWithoutTtyKeepsStdoutAndStderrApartAndReportsTheExitCode(const std::string& id) {
    SCOPED_TRACE("exec, no tty, exit 3");
    auto stream = OpenUrl(cri_->Exec(id, {"sh", "-c", "echo out; echo err >&2; exit 3"},
                                     StreamingOptions{.stdin = false, .stdout = true, .stderr = true, .tty = false}));
    ASSERT_OK(stream);
    auto out = stream->CollectUntilClose(kStreamTimeout);
    ASSERT_OK(out);
    EXPECT_EQ(out->Of(kStdoutChannel), "out\n");
    EXPECT_EQ(out->Of(kStderrChannel), "err\n");
    auto status = ParseExecStatus(out->Of(kErrorChannel));
    ASSERT_OK(status);
    EXPECT_FALSE(status->success) << status->message;
    EXPECT_EQ(status->exit_code, std::optional<int>(3)) << status->reason << ": " << status->message;
    EXPECT_EQ(status->reason, "NonZeroExitCode");
  }

  // v4 has no half-close of stdin: the command reads one line, not to EOF.
  void ExecReadsStdin(const std::string& id) {
    SCOPED_TRACE("exec, stdin, no tty");
    auto stream = OpenUrl(cri_->Exec(id, {"sh", "-c", "read x; echo got-$x"},
                                     StreamingOptions{.stdin = true, .stdout = true, .stderr = true, .tty = false}));
    ASSERT_OK(stream);
    Status sent = stream->Send(kStdinChannel, "hello\n");
    ASSERT_OK(sent);
    auto out = stream->CollectUntilClose(kStreamTimeout);
    ASSERT_OK(out);
    EXPECT_EQ(out->Of(kStdoutChannel), "got-hello\n");
    EXPECT_EQ(out->Of(kStderrChannel), "");
    auto status = ParseExecStatus(out->Of(kErrorChannel));
    ASSERT_OK(status);
    EXPECT_TRUE(status->success) << status->reason << ": " << status->message;
  }

  // The resize reaches the exec's terminal: the command waits (10 s at
  // most) for `stty size` to say 45 rows, 123 columns, prints it, then
  // reads a line typed only once the size was seen. Until the resize lands
  // the terminal has no size, and busybox's stty says so on the terminal
  // itself: that is kept out of the output.
  void ExecWithTtyIsResizedAndReadsStdin(const std::string& id) {
    SCOPED_TRACE("exec, tty, resize, stdin");
    auto stream = OpenUrl(
        cri_->Exec(id,
                   {"sh", "-c",
                    "i=0; while [ \"$(stty size 2>/dev/null)\" != \"45 123\" ] && [ $i -lt 100 ]; do sleep 0.1; "
                    "i=$((i+1)); done; "
                    "stty size; read x; echo got-$x"},
                   StreamingOptions{.stdin = true, .stdout = true, .stderr = false, .tty = true}));
    ASSERT_OK(stream);
    Status resized = stream->SendResize(123, 45);
    ASSERT_OK(resized);
    auto sized =
        stream->CollectUntil([](const ChannelOutput& o) { return Has(o.Of(kStdoutChannel), "\n"); }, kStreamTimeout);
    ASSERT_OK(sized);
    EXPECT_EQ(sized->Of(kStdoutChannel), "45 123\r\n") << "the terminal was not resized before the command gave up";
    Status sent = stream->Send(kStdinChannel, "tty-in\n");
    ASSERT_OK(sent);
    auto rest = stream->CollectUntilClose(kStreamTimeout);
    ASSERT_OK(rest);
    const std::string all = sized->Of(kStdoutChannel) + rest->Of(kStdoutChannel);
    std::cout << "tty exec output: " << ::testing::PrintToString(all) << "\n";
    EXPECT_TRUE(Has(all, "45 123")) << all;
    EXPECT_TRUE(Has(all, "got-tty-in\r\n")) << all;
    EXPECT_EQ(rest->Of(kStderrChannel), "") << "a terminal has one output stream";
    auto status = ParseExecStatus(rest->Of(kErrorChannel));
    ASSERT_OK(status);
    EXPECT_TRUE(status->success) << status->reason << ": " << status->message;
  }

  void AttachWithoutTty(const std::string& pod_id, const v1::PodSandboxConfig& pod) {
    SCOPED_TRACE("attach, no tty");
    auto id = StartInteractive(pod_id, pod, "lines",
                               {"sh", "-c", "while read l; do echo out-$l; echo err-$l >&2; done"}, /*tty=*/false);
    ASSERT_OK(id);
    auto stream =
        OpenUrl(cri_->Attach(*id, StreamingOptions{.stdin = true, .stdout = true, .stderr = true, .tty = false}));
    ASSERT_OK(stream);
    Status sent = stream->Send(kStdinChannel, "one\n");
    ASSERT_OK(sent);
    auto out = stream->CollectUntil(
        [](const ChannelOutput& o) {
          return Has(o.Of(kStdoutChannel), "out-one\n") && Has(o.Of(kStderrChannel), "err-one\n");
        },
        kStreamTimeout);
    ASSERT_OK(out);
    EXPECT_EQ(out->Of(kStdoutChannel), "out-one\n");
    EXPECT_EQ(out->Of(kStderrChannel), "err-one\n");
    EXPECT_FALSE(out->ended) << "the attach ended by itself";
    Status closed = stream->Close(kStreamTimeout);
    EXPECT_OK(closed);
    // Detaching leaves the container running.
    auto status = cri_->ContainerStatus(*id);
    ASSERT_OK(status);
    EXPECT_EQ(status->status().state(), v1::CONTAINER_RUNNING);
  }

  void AttachWithTty(const std::string& pod_id, const v1::PodSandboxConfig& pod) {
    SCOPED_TRACE("attach, tty");
    auto id = StartInteractive(pod_id, pod, "cat", {"cat"}, /*tty=*/true);
    ASSERT_OK(id);
    auto stream =
        OpenUrl(cri_->Attach(*id, StreamingOptions{.stdin = true, .stdout = true, .stderr = false, .tty = true}));
    ASSERT_OK(stream);
    Status sent = stream->Send(kStdinChannel, "ping\n");
    ASSERT_OK(sent);
    auto out =
        stream->CollectUntil([](const ChannelOutput& o) { return Has(o.Of(kStdoutChannel), "ping"); }, kStreamTimeout);
    ASSERT_OK(out);
    std::cout << "tty attach output: " << ::testing::PrintToString(out->Of(kStdoutChannel)) << "\n";
    EXPECT_TRUE(Has(out->Of(kStdoutChannel), "ping")) << out->Of(kStdoutChannel);
    EXPECT_EQ(out->Of(kStderrChannel), "");
    Status closed = stream->Close(kStreamTimeout);
    EXPECT_OK(closed);
  }
};

TEST_F(CriStreamingE2eTest, ExecAttachAndPortForwardThroughContainerdsStreamingServer) {
  const v1::PodSandboxConfig pod = Pod("capsule-streaming", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto idle = StartContainer(*pod_id, pod, "idle", {"sleep", "3600"});
  EXPECT_OK(idle);
  if (idle.ok()) {
    ExecWithoutTtyKeepsStdoutAndStderrApartAndReportsTheExitCode(*idle);
    ExecReadsStdin(*idle);
    ExecWithTtyIsResizedAndReadsStdin(*idle);
  }
  AttachWithoutTty(*pod_id, pod);
  AttachWithTty(*pod_id, pod);

  auto url = cri_->PortForward(*pod_id, {kHttpPort});
  ASSERT_OK(url);
  EXPECT_TRUE(url->starts_with("http://")) << *url;

  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

}  // namespace
}  // namespace capsule::testing
