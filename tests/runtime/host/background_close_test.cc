// CloseInBackground: the fd is closed on the worker, every queued fd is
// closed by the time FlushBackgroundCloses returns, and order is kept.
#include "runtime/host/background_close.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

namespace capsule {
namespace {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe MakePipe() {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

TEST(BackgroundCloseTest, QueuedFdsAreClosedOnceFlushed) {
  std::vector<Pipe> pipes;
  for (int i = 0; i < 8; ++i) pipes.push_back(MakePipe());
  for (Pipe& p : pipes) CloseInBackground(std::move(p.write));
  for (Pipe& p : pipes) EXPECT_FALSE(p.write.valid());
  FlushBackgroundCloses();
  // A pipe whose only write end is closed reads end-of-file at once.
  for (Pipe& p : pipes) {
    char c;
    EXPECT_EQ(::read(p.read.get(), &c, 1), 0);
  }
}

TEST(BackgroundCloseTest, AnInvalidFdIsIgnoredAndFlushingNothingReturns) {
  CloseInBackground(UniqueFd());
  FlushBackgroundCloses();
  FlushBackgroundCloses();
}

}  // namespace
}  // namespace capsule
