// See command.h. Output is drained with poll(2) on both pipes (a thread of
// its own for a streaming command) so a chatty child never blocks on a full
// pipe.
#include "tests/support/command.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

extern char** environ;

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;

Result<std::pair<UniqueFd, UniqueFd>> Pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe2");
  return std::make_pair(UniqueFd(p[0]), UniqueFd(p[1]));
}

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Appends what is readable on fd; false at EOF or error.
bool Drain(int fd, std::string* into) {
  char buf[8192];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) return false;
  into->append(buf, static_cast<size_t>(n));
  return true;
}

std::string Quote(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

std::vector<std::string> EnvironmentWith(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced = replaced || k == key;
    if (!replaced) env.push_back(std::move(entry));
  }
  for (const auto& [k, v] : overrides) env.push_back(k + "=" + v);
  return env;
}

Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout,
                                 std::optional<std::vector<std::string>> env) {
  ASSIGN_OR_RETURN(auto out, Pipe());
  ASSIGN_OR_RETURN(auto err, Pipe());
  SpawnOptions o;
  o.argv = argv;
  o.env = std::move(env);
  o.stdout_fd = out.second.get();
  o.stderr_fd = err.second.get();
  o.die_with_parent = true;
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  out.second.reset();
  err.second.reset();
  CommandResult r;
  const auto deadline = Clock::now() + timeout;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    pollfd fds[2] = {{out_open ? out.first.get() : -1, POLLIN, 0},
                     {err_open ? err.first.get() : -1, POLLIN, 0}};
    int n = ::poll(fds, 2, MillisLeft(deadline));
    if (n < 0 && errno != EINTR) return ErrnoStatus("poll output of " + argv[0]);
    if (n == 0) {
      return DeadlineExceeded(Quote(argv) + " still running after " +
                              std::to_string(timeout.count()) + " ms; output: " + r.out + r.err);
    }
    if (fds[0].revents != 0) out_open = Drain(out.first.get(), &r.out);
    if (fds[1].revents != 0) err_open = Drain(err.first.get(), &r.err);
  }
  ASSIGN_OR_RETURN(int status, child.Wait(std::chrono::milliseconds(MillisLeft(deadline) + 1000)));
  r.exit_code = ExitCode(status);
  return r;
}

Result<StreamingCommand> StreamingCommand::Start(const std::vector<std::string>& argv,
                                                 std::optional<std::vector<std::string>> env) {
  ASSIGN_OR_RETURN(auto out, Pipe());
  SpawnOptions o;
  o.argv = argv;
  o.env = std::move(env);
  o.stdout_fd = out.second.get();
  o.stderr_fd = out.second.get();
  o.die_with_parent = true;
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  return StreamingCommand(std::move(child), std::move(out.first));
}

StreamingCommand::StreamingCommand(ChildProcess child, UniqueFd out)
    : child_(std::move(child)), output_(std::make_shared<Output>()) {
  auto stop = Pipe();
  if (!stop.ok()) std::abort();  // out of fds in a test process: nothing sensible left to do
  stop_read_ = std::move(stop->first);
  stop_ = std::move(stop->second);
  // The stop pipe's ends are ours, so a byte written after the reader ended
  // (at end of file) never meets a closed pipe (SIGPIPE).
  reader_ = std::thread([out = std::move(out), stop = stop_read_.get(), o = output_]() {
    auto take = [&] {
      std::string chunk;
      const bool open = Drain(out.get(), &chunk);
      std::lock_guard lock(o->mu);
      o->text += chunk;
      o->cv.notify_all();
      return open;
    };
    for (;;) {
      pollfd p[2] = {{out.get(), POLLIN, 0}, {stop, POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (p[1].revents != 0) {
        // Told to stop: keep what is there now, without waiting on a pipe
        // a grandchild might still hold open.
        pollfd now{out.get(), POLLIN, 0};
        while (::poll(&now, 1, 0) > 0 && take()) {
        }
        break;
      }
      if (p[0].revents != 0 && !take()) break;
    }
    std::lock_guard lock(o->mu);
    o->closed = true;
    o->cv.notify_all();
  });
}

StreamingCommand::~StreamingCommand() { StopReading(); }

void StreamingCommand::StopReading() {
  if (!reader_.joinable()) return;
  (void)!::write(stop_.get(), "x", 1);
  reader_.join();
  stop_.reset();
  stop_read_.reset();
}

std::string StreamingCommand::output() const {
  std::lock_guard lock(output_->mu);
  return output_->text;
}

Result<std::string> StreamingCommand::WaitForOutput(const std::string& needle,
                                                    std::chrono::milliseconds timeout) {
  std::unique_lock lock(output_->mu);
  output_->cv.wait_for(lock, timeout, [&] {
    return output_->text.find(needle) != std::string::npos || output_->closed;
  });
  if (output_->text.find(needle) != std::string::npos) return output_->text;
  if (output_->closed)
    return Unavailable("command exited before printing \"" + needle + "\"; output: " + output_->text);
  return DeadlineExceeded("no \"" + needle + "\" in output after " + std::to_string(timeout.count()) +
                          " ms; output so far: " + output_->text);
}

Result<int> StreamingCommand::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!child_.TryReap()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return DeadlineExceeded("command still running after " + std::to_string(timeout.count()) + " ms; output: " +
                              output());
    ::usleep(20 * 1000);
  }
  return child_.Wait(std::chrono::milliseconds(0));
}

void StreamingCommand::Stop(std::chrono::milliseconds grace) {
  if (child_.pid() > 0 && !child_.reaped()) child_.Terminate(grace);
  StopReading();
}

}  // namespace capsule::testing
