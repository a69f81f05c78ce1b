// The stdio I/O layer against real FIFOs, files and a real logging binary,
// with a fake process on the other side: every byte arrives, host ends are
// closed when the streams end, stdin EOF and CloseIO reach the process, and
// nothing (fd, thread, child) is left behind.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/unique_fd.h"
#include "shim/io/stdio_copier.h"
#include "shim/io/stdio_uri.h"
#include "tests/shim/fake_process_stdio.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::io {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kWait{10000};
// Only for asserting that something does NOT happen.
constexpr milliseconds kQuiet{200};

int FdCount() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

// A containerd-like FIFO reader: opened before the shim's end, reads to EOF
// on its own thread.
class FifoReader {
 public:
  explicit FifoReader(const std::string& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) {
    EXPECT_TRUE(fd_) << path;
  }
  void Start() {
    thread_ = std::thread([this] { eof_ = ReadToEof(); });
  }
  // Reads whatever is there now, without waiting for EOF.
  std::string ReadAvailable(size_t want) {
    std::string out;
    while (out.size() < want) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(kWait.count())) != 1) break;
      char buf[4096];
      ssize_t n = ::read(fd_.get(), buf, std::min(sizeof buf, want - out.size()));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // Joins the thread; true when EOF was seen in time.
  bool Join() {
    thread_.join();
    return eof_;
  }
  void Close() { fd_.reset(); }
  const std::string& data() const { return data_; }

 private:
  bool ReadToEof() {
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    char buf[65536];
    for (;;) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n > 0) {
        data_.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        return true;
      } else if (errno != EAGAIN && errno != EINTR) {
        return false;
      }
    }
  }
  UniqueFd fd_;
  std::thread thread_;
  std::string data_;
  bool eof_ = false;
};

class StdioCopierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fds_before_ = FdCount();
    auto dir = TempDir::Create("stdio");
    ASSERT_OK(dir);
    dir_ = std::make_unique<TempDir>(std::move(*dir));
    spec_.container_id = "c1";
    spec_.ns = "k8s.io";
  }
  void TearDown() override {
    dir_.reset();
    EXPECT_EQ(FdCount(), fds_before_) << "file descriptors leaked";
    EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1) << "a child process was left behind";
  }
  std::string Fifo(const std::string& name) {
    std::string p = dir_->Join(name);
    EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
    return p;
  }

  std::unique_ptr<TempDir> dir_;
  StdioSpec spec_;
  int fds_before_ = 0;
};

TEST_F(StdioCopierTest, FifoOutputsArriveCompleteThenEof) {
  spec_.stdout_path = Fifo("out");
  spec_.stderr_path = Fifo("err");
  FifoReader out(spec_.stdout_path), err(spec_.stderr_path);
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  out.Start();
  err.Start();
  // More than a pipe buffer, in odd chunk sizes, so writes must wait for the reader.
  const std::string big = RandomBytes(1 << 20, 1);
  for (size_t pos = 0; pos < big.size(); pos += 77777) proc->Emit(OutputStream::kStdout, big.substr(pos, 77777));
  proc->Emit(OutputStream::kStderr, "warning: something\n");
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
  EXPECT_TRUE((*copier)->WaitOutput(kWait).ok());
  ASSERT_TRUE(out.Join()) << "stdout FIFO never reached EOF: the shim kept it open";
  ASSERT_TRUE(err.Join());
  EXPECT_EQ(out.data().size(), big.size());
  EXPECT_TRUE(out.data() == big);
  EXPECT_EQ(err.data(), "warning: something\n");
  EXPECT_EQ(proc->close_count(), 1) << "no stdin: the process's stdin is closed at Start";
}

// The agent closed the process's stdin when it made it (stdin_closed): Start
// and containerd's CloseIO do not close it again.
TEST_F(StdioCopierTest, AStdinTheAgentClosedAtCreateIsNotClosedAgain) {
  spec_.stdout_path = Fifo("out");
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  EXPECT_FALSE((*copier)->ForwardsStdin());
  (*copier)->StdinClosedByAgent();
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  (*copier)->CloseStdin();
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
  ASSERT_TRUE((*copier)->WaitOutput(kWait).ok());
  EXPECT_EQ(proc->close_count(), 0);

  spec_.stdin_path = Fifo("in");
  auto with_stdin = StdioCopier::Open(spec_);
  ASSERT_OK(with_stdin);
  EXPECT_TRUE((*with_stdin)->ForwardsStdin());
}

TEST_F(StdioCopierTest, OpensWithoutReaderAndSurvivesTheReaderLeaving) {
  spec_.stdout_path = Fifo("out");
  // No reader yet (containerd not attached): Open neither blocks nor fails.
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  proc->Emit(OutputStream::kStdout, "before-reader;");
  FifoReader first(spec_.stdout_path);
  EXPECT_EQ(first.ReadAvailable(14), "before-reader;");
  first.Close();  // containerd restarts
  // No EPIPE: the shim holds a read end, so bytes wait for the next reader.
  proc->Emit(OutputStream::kStdout, "while-away;");
  FifoReader second(spec_.stdout_path);
  second.Start();
  proc->Emit(OutputStream::kStdout, "after");
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
  ASSERT_TRUE((*copier)->WaitOutput(kWait).ok());
  ASSERT_TRUE(second.Join());
  EXPECT_EQ(second.data(), "while-away;after");
}

TEST_F(StdioCopierTest, WaitOutputWaitsForEveryStream) {
  spec_.stdout_path = Fifo("out");
  spec_.stderr_path = Fifo("err");
  FifoReader out(spec_.stdout_path), err(spec_.stderr_path);
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  EXPECT_EQ((*copier)->WaitOutput(kQuiet).code(), Code::kFailedPrecondition);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  EXPECT_EQ((*copier)->Start(proc).code(), Code::kFailedPrecondition);
  proc->End(OutputStream::kStdout);
  EXPECT_EQ((*copier)->WaitOutput(kQuiet).code(), Code::kDeadlineExceeded);
  proc->End(OutputStream::kStderr);
  EXPECT_TRUE((*copier)->WaitOutput(kWait).ok());
}

TEST_F(StdioCopierTest, StdinIsForwardedAndItsEofClosesTheProcessStdin) {
  spec_.stdin_path = Fifo("in");
  auto copier = StdioCopier::Open(spec_);  // no writer yet: must not block
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  // "No writer yet" is not EOF.
  EXPECT_FALSE(proc->WaitStdinClosed(kQuiet));
  {
    UniqueFd w(::open(spec_.stdin_path.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(w);
    ASSERT_EQ(::write(w.get(), "hello ", 6), 6);
    EXPECT_TRUE(proc->WaitStdin("hello ", kWait));
    ASSERT_EQ(::write(w.get(), "world", 5), 5);
  }  // the last writer closes: EOF
  EXPECT_TRUE(proc->WaitStdinClosed(kWait));
  EXPECT_EQ(proc->stdin_data(), "hello world");
  (*copier)->CloseStdin();  // containerd's CloseIO afterwards: still once
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
  ASSERT_TRUE((*copier)->WaitOutput(kWait).ok());
  EXPECT_EQ(proc->close_count(), 1);
}

TEST_F(StdioCopierTest, CloseIoForwardsPendingInputThenClosesStdin) {
  spec_.stdin_path = Fifo("in");
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  UniqueFd w(::open(spec_.stdin_path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(w);
  ASSERT_EQ(::write(w.get(), "pending", 7), 7);
  (*copier)->CloseStdin();  // before Start: applies at Start
  ASSERT_TRUE((*copier)->Start(proc).ok());
  // The writer is still open, yet CloseIO ends stdin after forwarding the data.
  EXPECT_TRUE(proc->WaitStdinClosed(kWait));
  EXPECT_EQ(proc->stdin_data(), "pending");
  EXPECT_EQ(proc->close_count(), 1);
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
}

TEST_F(StdioCopierTest, FileSchemeAppendsBothStreamsToOneFile) {
  const std::string log = dir_->Join("logs/sub/c1.log");
  ASSERT_OK(MkdirAll(dir_->Join("logs/sub")));
  ASSERT_OK(WriteFile(log, "old line\n"));
  spec_.stdout_path = "file://" + log;
  spec_.stderr_path = "file://" + log;
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  EXPECT_EQ((*copier)->target().kind, StdioKind::kFile);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  proc->Emit(OutputStream::kStdout, "out line\n");
  proc->Emit(OutputStream::kStderr, "err line\n");
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
  ASSERT_TRUE((*copier)->WaitOutput(kWait).ok());
  auto text = ReadFile(log);
  ASSERT_OK(text);
  EXPECT_EQ(text->rfind("old line\n", 0), 0u) << "appended, not truncated";
  EXPECT_NE(text->find("out line\n"), std::string::npos);
  EXPECT_NE(text->find("err line\n"), std::string::npos);
  EXPECT_EQ(text->size(), 27u);
}

TEST_F(StdioCopierTest, FileSchemeCreatesMissingDirectories) {
  const std::string log = dir_->Join("new/dir/c1.log");
  spec_.stdout_path = "file://" + log;
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  EXPECT_TRUE(PathExists(log));
}

TEST_F(StdioCopierTest, BinaryLoggerGetsStreamsOnFds3And4WithContainersEnv) {
  const std::string prefix = dir_->Join("logger");
  spec_.stdout_path = "binary://" CAPSULE_TEST_LOGGER "?out=" + prefix + "&ready=byte&flag&sp=a+b%21";
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  const std::string big = RandomBytes(300000, 2);
  proc->Emit(OutputStream::kStdout, big);
  proc->Emit(OutputStream::kStderr, "to stderr");
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
  ASSERT_TRUE((*copier)->WaitOutput(kWait).ok());
  copier->reset();  // waits for the logger to exit on EOF
  EXPECT_EQ(*ReadFile(prefix + ".done"), "done\n");
  EXPECT_TRUE(*ReadFile(prefix + ".stdout") == big);
  EXPECT_EQ(*ReadFile(prefix + ".stderr"), "to stderr");
  // containerd's NewBinaryCmd: key, first value ("" for a bare key), decoded.
  EXPECT_EQ(*ReadFile(prefix + ".args"), "out\n" + prefix + "\nready\nbyte\nflag\n\nsp\na b!\n");
  EXPECT_EQ(*ReadFile(prefix + ".env"), "CONTAINER_ID=c1\nCONTAINER_NAMESPACE=k8s.io\n");
  EXPECT_EQ(*ReadFile(prefix + ".stdio"), "/dev/null\n/dev/null\n/dev/null\n");
}

TEST_F(StdioCopierTest, BinaryLoggerInTerminalModeGetsEofOnStderr) {
  const std::string prefix = dir_->Join("logger");
  spec_.stdout_path = "binary://" CAPSULE_TEST_LOGGER "?out=" + prefix;  // ready by closing fd 5
  spec_.terminal = true;
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  proc->Emit(OutputStream::kStdout, "tty output\r\n");
  proc->End(OutputStream::kStdout);
  ASSERT_TRUE((*copier)->WaitOutput(kWait).ok());
  copier->reset();
  EXPECT_EQ(*ReadFile(prefix + ".stdout"), "tty output\r\n");
  EXPECT_EQ(*ReadFile(prefix + ".stderr"), "");
  EXPECT_EQ(proc->reads(OutputStream::kStderr), 0) << "a terminal has one output stream";
}

TEST_F(StdioCopierTest, DeadLoggerMeansDiscardedOutputNotADeadShim) {
  const std::string prefix = dir_->Join("logger");
  spec_.stdout_path = "binary://" CAPSULE_TEST_LOGGER "?out=" + prefix + "&ready=then-exit";
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  // More than the pipe holds: writes hit EPIPE (SIGPIPE is not ignored in
  // this test process, so a raised one would kill it).
  proc->Emit(OutputStream::kStdout, RandomBytes(1 << 20, 4));
  proc->Emit(OutputStream::kStderr, RandomBytes(1 << 20, 5));
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
  EXPECT_TRUE((*copier)->WaitOutput(kWait).ok()) << "the process's output is still drained";
}

TEST_F(StdioCopierTest, MissingLoggingBinaryFailsOpenNamingIt) {
  spec_.stdout_path = "binary:///nonexistent/logger?x=1";
  auto copier = StdioCopier::Open(spec_);
  ASSERT_FALSE(copier.ok());
  EXPECT_NE(copier.status().message().find("/nonexistent/logger"), std::string::npos);
}

TEST_F(StdioCopierTest, TerminalReadsOnlyStdout) {
  spec_.stdout_path = Fifo("out");
  spec_.terminal = true;
  FifoReader out(spec_.stdout_path);
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  out.Start();
  proc->Emit(OutputStream::kStdout, "$ ");
  proc->End(OutputStream::kStdout);
  ASSERT_TRUE((*copier)->WaitOutput(kWait).ok());
  ASSERT_TRUE(out.Join());
  EXPECT_EQ(out.data(), "$ ");
  EXPECT_EQ(proc->reads(OutputStream::kStderr), 0);
}

TEST_F(StdioCopierTest, BrokenProcessStreamEndsAndClosesTheFifo) {
  spec_.stdout_path = Fifo("out");
  spec_.stderr_path = Fifo("err");
  FifoReader out(spec_.stdout_path), err(spec_.stderr_path);
  auto copier = StdioCopier::Open(spec_);
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  out.Start();
  err.Start();
  proc->Emit(OutputStream::kStdout, "partial");
  proc->Fail(OutputStream::kStdout);
  proc->Fail(OutputStream::kStderr);
  ASSERT_TRUE((*copier)->WaitOutput(kWait).ok());
  EXPECT_TRUE(out.Join());
  EXPECT_TRUE(err.Join());
}

TEST_F(StdioCopierTest, DestructionCancelsAWriteBlockedOnAFullFifo) {
  spec_.stdout_path = Fifo("out");
  auto copier = StdioCopier::Open(spec_);  // nobody will ever read
  ASSERT_OK(copier);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  proc->Emit(OutputStream::kStdout, RandomBytes(1 << 20, 3));  // far beyond the pipe buffer
  proc->End(OutputStream::kStdout);
  proc->End(OutputStream::kStderr);
  EXPECT_EQ((*copier)->WaitOutput(kQuiet).code(), Code::kDeadlineExceeded);
  const auto t0 = std::chrono::steady_clock::now();
  copier->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, kCopierStopTimeout) << "joined, not timed out";
}

TEST_F(StdioCopierTest, OpenErrorsNameThePath) {
  spec_.stdout_path = dir_->Join("no-such-fifo");
  auto copier = StdioCopier::Open(spec_);
  ASSERT_FALSE(copier.ok());
  EXPECT_EQ(copier.status().code(), Code::kNotFound);
  EXPECT_NE(copier.status().message().find("no-such-fifo"), std::string::npos);
  spec_.stdout_path = "";
  spec_.stdin_path = dir_->Join("no-such-stdin");
  copier = StdioCopier::Open(spec_);
  ASSERT_FALSE(copier.ok());
  EXPECT_NE(copier.status().message().find("no-such-stdin"), std::string::npos);
}

TEST_F(StdioCopierTest, NullStdioRunsNoThreadsAndIsDoneAtOnce) {
  auto copier = StdioCopier::Open(spec_);  // the pod sandbox: all ""
  ASSERT_OK(copier);
  EXPECT_EQ((*copier)->target().kind, StdioKind::kNull);
  auto proc = std::make_shared<FakeProcessStdio>();
  ASSERT_TRUE((*copier)->Start(proc).ok());
  EXPECT_TRUE((*copier)->WaitOutput(kWait).ok());
  EXPECT_EQ(proc->reads(OutputStream::kStdout), 0);
}

TEST(StdioUriTest, ResolvesContainerdForms) {
  StdioSpec s;
  s.stdin_path = "/run/containerd/fifo/1/c-stdin";
  s.stdout_path = "/run/containerd/fifo/1/c-stdout";
  s.stderr_path = "/run/containerd/fifo/1/c-stderr";
  auto t = ResolveStdio(s);
  ASSERT_OK(t);
  EXPECT_EQ(t->kind, StdioKind::kFifo);
  EXPECT_EQ(t->stdin_fifo, s.stdin_path);
  EXPECT_EQ(t->stderr_path, s.stderr_path);
  s.terminal = true;
  EXPECT_EQ(ResolveStdio(s)->stderr_path, "");

  s = {};
  s.stdout_path = "file:///var/log/pods/x%20y.log";
  t = ResolveStdio(s);
  ASSERT_OK(t);
  EXPECT_EQ(t->kind, StdioKind::kFile);
  EXPECT_EQ(t->stdout_path, "/var/log/pods/x y.log");
  EXPECT_EQ(t->stderr_path, t->stdout_path);

  s.stdout_path = "binary://host/usr/bin/logger?a=1&b&a=2&c=x+y%2Fz";
  t = ResolveStdio(s);
  ASSERT_OK(t);
  EXPECT_EQ(t->kind, StdioKind::kBinary);
  EXPECT_EQ(t->binary, "/usr/bin/logger");
  EXPECT_EQ(t->binary_args, (std::vector<std::string>{"a", "1", "b", "", "c", "x y/z"}));
}

TEST(StdioUriTest, RejectsBadInputNamingIt) {
  StdioSpec s;
  s.stdout_path = "tcp://1.2.3.4:5";
  auto t = ResolveStdio(s);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("unknown stdio scheme \"tcp\""), std::string::npos);
  s.stdout_path = "relative/fifo";
  EXPECT_NE(ResolveStdio(s).status().message().find("relative/fifo"), std::string::npos);
  s.stdout_path = "file:///bad%zzescape";
  EXPECT_NE(ResolveStdio(s).status().message().find("bad escape"), std::string::npos);
  s.stdout_path = "/ok";
  s.stdin_path = "stdin-not-absolute";
  EXPECT_NE(ResolveStdio(s).status().message().find("stdin"), std::string::npos);
  EXPECT_FALSE(PercentDecode("%4", false).ok());
}

}  // namespace
}  // namespace capsule::shim::io
