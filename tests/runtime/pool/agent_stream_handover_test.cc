// The pool's agent stream hand-over over a real unix socket (SCM_RIGHTS):
// the claimant process gets the very stream the pool held, once; another
// process, or a process that merely has the claimant's pid now, gets a
// refusal naming whose it is; an unknown VM, a malformed request and an
// expired or withdrawn stream get nothing; the socket goes with the
// server. The real claim path (capsule-poold, a VM's agent) is in
// tests/integration/pool/warm_pool_vm_test.cc.
#include "runtime/pool/agent_stream_handover.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/unix_stream.h"
#include "tests/support/status_matchers.h"

namespace capsule::pool {
namespace {

using std::chrono::milliseconds;

class AgentStreamHandoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tmp = TempDir::Create("capsule-handover");
    ASSERT_OK(tmp);
    tmp_.emplace(std::move(*tmp));
    path_ = AgentStreamSocketFor(tmp_->Join("pool.sock"));
    auto h = AgentStreamHandover::Start(path_);
    ASSERT_OK(h);
    handover_ = std::move(*h);
    auto me = IdentifyProcess(::getpid());
    ASSERT_OK(me);
    me_ = *me;
  }
  // A pipe: the read end is the "stream" offered, the write end proves
  // that what the claimant got is that very pipe.
  struct Pipe {
    UniqueFd read, write;
  };
  static Pipe MakePipe() {
    int p[2];
    EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
    return {UniqueFd(p[0]), UniqueFd(p[1])};
  }

  std::optional<TempDir> tmp_;
  std::string path_;
  std::unique_ptr<AgentStreamHandover> handover_;
  ProcessIdentity me_;
};

TEST_F(AgentStreamHandoverTest, TheClaimantTakesTheVeryStreamOnceAndTheSocketIsRootsAlone) {
  struct stat st{};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  Pipe p = MakePipe();
  ASSERT_TRUE(handover_->Offer("pool-a", me_, std::move(p.read), milliseconds(30000)));
  EXPECT_EQ(handover_->held(), 1u);
  auto taken = TakeAgentStream(path_, "pool-a", milliseconds(2000));
  ASSERT_OK(taken);
  EXPECT_EQ(handover_->held(), 0u);
  ASSERT_EQ(::write(p.write.get(), "x", 1), 1);
  char c = 0;
  EXPECT_EQ(::read(taken->get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
  EXPECT_NE(::fcntl(taken->get(), F_GETFD) & FD_CLOEXEC, 0) << "received CLOEXEC";

  auto again = TakeAgentStream(path_, "pool-a", milliseconds(2000));
  EXPECT_EQ(again.status().code(), Code::kNotFound) << again.status().ToString();
  EXPECT_NE(again.status().message().find("no agent stream held for pool-a"), std::string::npos)
      << again.status().message();
}

TEST_F(AgentStreamHandoverTest, AnotherProcessOrAReusedPidGetsARefusalAndTheClaimantStillGetsIt) {
  Pipe p = MakePipe();
  ASSERT_TRUE(handover_->Offer("pool-b", me_, std::move(p.read), milliseconds(30000)));
  // A child process asks for our stream: refused, naming whose it is.
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto r = TakeAgentStream(path_, "pool-b", milliseconds(2000));
    const std::string what = r.ok() ? "TAKEN" : r.status().ToString();
    (void)!::write(report[1], what.data(), what.size());
    ::_exit(0);
  }
  ::close(report[1]);
  std::string what(512, '\0');
  const ssize_t n = ::read(report[0], what.data(), what.size());
  ::close(report[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_GT(n, 0);
  what.resize(static_cast<size_t>(n));
  EXPECT_NE(what.find("NOT_FOUND"), std::string::npos) << what;
  EXPECT_NE(what.find("for the process that claimed it, pid " + std::to_string(::getpid())), std::string::npos)
      << what;
  EXPECT_EQ(handover_->held(), 1u) << "a refusal leaves the stream for its claimant";

  // Our pid, but a process that started at another time: not us.
  Pipe q = MakePipe();
  ProcessIdentity earlier = me_;
  earlier.start_time += 1;
  ASSERT_TRUE(handover_->Offer("pool-c", earlier, std::move(q.read), milliseconds(30000)));
  auto reused = TakeAgentStream(path_, "pool-c", milliseconds(2000));
  EXPECT_EQ(reused.status().code(), Code::kNotFound) << reused.status().ToString();

  EXPECT_OK(TakeAgentStream(path_, "pool-b", milliseconds(2000)));
}

TEST_F(AgentStreamHandoverTest, UnknownClaimantsMalformedRequestsAndExpiredOrWithdrawnStreamsGetNothing) {
  Pipe p = MakePipe();
  EXPECT_FALSE(handover_->Offer("pool-d", ProcessIdentity{}, std::move(p.read), milliseconds(30000)))
      << "nobody could prove being an unknown claimant";
  EXPECT_EQ(handover_->held(), 0u);

  for (const std::string& request : {std::string("GIVE pool-d\n"), std::string("TAKE \n"),
                                    std::string("TAKE ") + std::string(300, 'a') + "\n"}) {
    auto conn = ConnectUnix(path_);
    ASSERT_OK(conn);
    ASSERT_EQ(::send(conn->get(), request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    char buf[256] = {};
    const ssize_t n = ::recv(conn->get(), buf, sizeof buf - 1, 0);
    const std::string reply(buf, n > 0 ? static_cast<size_t>(n) : 0);
    EXPECT_TRUE(reply.empty() || reply.starts_with("NO ")) << request.substr(0, 20) << ": " << reply;
  }

  Pipe q = MakePipe();
  ASSERT_TRUE(handover_->Offer("pool-e", me_, std::move(q.read), milliseconds(50)));
  // The sweep runs at least once a second.
  for (int i = 0; i < 40 && handover_->held() > 0; ++i) std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(handover_->held(), 0u);
  EXPECT_EQ(TakeAgentStream(path_, "pool-e", milliseconds(2000)).status().code(), Code::kNotFound);
  pollfd writer{q.write.get(), POLLOUT, 0};
  ASSERT_EQ(::poll(&writer, 1, 0), 1);
  EXPECT_NE(writer.revents & POLLERR, 0) << "the expired stream was closed: its pipe has no reader left";

  Pipe w = MakePipe();
  ASSERT_TRUE(handover_->Offer("pool-f", me_, std::move(w.read), milliseconds(30000)));
  handover_->Withdraw("pool-f");
  EXPECT_EQ(TakeAgentStream(path_, "pool-f", milliseconds(2000)).status().code(), Code::kNotFound);

  handover_.reset();
  EXPECT_FALSE(PathExists(path_));
  EXPECT_EQ(TakeAgentStream(path_, "pool-f", milliseconds(500)).status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace capsule::pool
