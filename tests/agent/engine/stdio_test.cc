// ProcessIo over real pipes, the sync channel's fd passing, and the OOM
// watcher on a plain file (inotify reports IN_MODIFY for any write).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "agent/engine/oom_watcher.h"
#include "agent/engine/stdio.h"
#include "agent/engine/sync_channel.h"
#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine {
namespace {

using namespace std::chrono_literals;

TEST(ProcessIoTest, OutputThenEofAfterLastWriterCloses) {
  ChildStdio child;
  auto io = ProcessIo::CreatePipes(&child);
  ASSERT_OK(io);
  int extra_writer = ::dup(child.out.get());  // like a background process holding stdout
  ASSERT_EQ(::write(child.out.get(), "abc", 3), 3);
  child.out.reset();
  auto r = (*io)->Read(Stream::kStdout, 2);
  ASSERT_OK(r);
  EXPECT_EQ(r->data, "ab");
  EXPECT_FALSE(r->eof);
  r = (*io)->Read(Stream::kStdout, 100);
  EXPECT_EQ(r->data, "c");
  ASSERT_EQ(::write(extra_writer, "d", 1), 1);
  ::close(extra_writer);
  r = (*io)->Read(Stream::kStdout, 100);
  EXPECT_EQ(r->data, "d");
  r = (*io)->Read(Stream::kStdout, 100);
  EXPECT_TRUE(r->eof);
  EXPECT_TRUE(r->data.empty());
  EXPECT_FALSE((*io)->drained());  // stderr still open
  child.err.reset();
  EXPECT_TRUE((*io)->Read(Stream::kStderr, 10)->eof);
  EXPECT_TRUE((*io)->drained());
}

TEST(ProcessIoTest, StdinWriteAndClose) {
  ChildStdio child;
  auto io = ProcessIo::CreatePipes(&child);
  ASSERT_OK(io);
  auto n = (*io)->Write("hello");
  ASSERT_OK(n);
  EXPECT_EQ(*n, 5u);
  ASSERT_TRUE((*io)->CloseStdin().ok());
  char buf[16];
  EXPECT_EQ(::read(child.in.get(), buf, sizeof buf), 5);
  EXPECT_EQ(::read(child.in.get(), buf, sizeof buf), 0);  // eof for the process
  EXPECT_FALSE((*io)->Write("x").ok());
}

TEST(ProcessIoTest, WriteToGoneReaderFailsWithoutSigpipe) {
  ChildStdio child;
  auto io = ProcessIo::CreatePipes(&child);
  ASSERT_OK(io);
  child.in.reset();
  auto n = (*io)->Write("x");  // SIGPIPE's default action would kill the test
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("Broken pipe"), std::string::npos);
}

TEST(ProcessIoTest, ShutdownWakesBlockedReader) {
  ChildStdio child;
  auto io = ProcessIo::CreatePipes(&child);
  ASSERT_OK(io);
  std::thread reader([&] {
    auto r = (*io)->Read(Stream::kStdout, 10);
    EXPECT_OK(r);
    EXPECT_TRUE(r->eof);
  });
  (*io)->Shutdown();
  reader.join();
  (*io)->Release();
  EXPECT_TRUE((*io)->Read(Stream::kStderr, 1)->eof);
}

TEST(SyncChannelTest, MessagesErrorsAndFds) {
  auto pair = MakeSyncPair();
  ASSERT_OK(pair);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ASSERT_OK(SendSync(pair->child.get(), SyncType::kConsole, 7, p[1]));
  ::close(p[1]);
  auto r = RecvSync(pair->parent.get(), 1000ms);
  ASSERT_OK(r);
  ASSERT_TRUE(r->message.has_value());
  EXPECT_EQ(r->message->type, SyncType::kConsole);
  EXPECT_EQ(r->message->value, 7);
  ASSERT_TRUE(r->fd.valid());
  ASSERT_EQ(::write(r->fd.get(), "z", 1), 1);
  char c;
  ASSERT_EQ(::read(p[0], &c, 1), 1);
  ::close(p[0]);

  ASSERT_OK(SendSyncError(pair->child.get(), NotFound("mount proc on /proc: gone")));
  r = RecvSync(pair->parent.get(), 1000ms);
  ASSERT_OK(r);
  Status st = SyncErrorStatus(*r->message);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_EQ(st.message(), "mount proc on /proc: gone");

  EXPECT_EQ(RecvSync(pair->parent.get(), 10ms).status().code(), Code::kDeadlineExceeded);
  pair->child.reset();
  r = RecvSync(pair->parent.get(), 1000ms);
  ASSERT_OK(r);
  EXPECT_FALSE(r->message.has_value());  // end of stream
}

TEST(OomWatcherTest, QueuesContainerWhenOomKillGrows) {
  auto dir = TempDir::Create("oomw");
  ASSERT_OK(dir);
  const std::string events = dir->Join("memory.events");
  ASSERT_OK(WriteFile(events, "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"));
  auto w = OomWatcher::Create();
  ASSERT_OK(w);
  ASSERT_TRUE((*w)->Watch("c1", events).ok());
  // A change that is not an OOM kill queues nothing.
  ASSERT_OK(WriteFile(events, "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n"));
  EXPECT_FALSE((*w)->Next(100ms).has_value());
  ASSERT_OK(WriteFile(events, "low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n"));
  auto id = (*w)->Next(5000ms);
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(*id, "c1");
  (*w)->Unwatch("c1");
  EXPECT_FALSE((*w)->Watch("c2", dir->Join("missing")).ok());
}

}  // namespace
}  // namespace capsule::engine
