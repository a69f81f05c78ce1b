// capsule-test-logger: a containerd logging binary (binary:// stdio) for the
// I/O tests. Query arguments arrive as argv pairs: `out PREFIX` names the
// output files, `ready byte|close` chooses how it signals ready on fd 5.
// It records its argv, environment and stdio targets, then copies fd 3 to
// PREFIX.stdout and fd 4 to PREFIX.stderr until both reach EOF.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

extern char** environ;

namespace {

void WriteText(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) _exit(3);
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
}

std::string Link(int fd) {
  char buf[256] = "";
  std::string p = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "closed";
}

}  // namespace

int main(int argc, char** argv) {
  std::string prefix, ready = "close";
  std::string args;
  for (int i = 1; i < argc; ++i) {
    args += std::string(argv[i]) + "\n";
    if (i + 1 < argc && std::strcmp(argv[i], "out") == 0) prefix = argv[i + 1];
    if (i + 1 < argc && std::strcmp(argv[i], "ready") == 0) ready = argv[i + 1];
  }
  if (prefix.empty()) return 2;
  std::string env;
  for (char** e = environ; *e != nullptr; ++e) env += std::string(*e) + "\n";
  WriteText(prefix + ".args", args);
  WriteText(prefix + ".env", env);
  WriteText(prefix + ".stdio", Link(0) + "\n" + Link(1) + "\n" + Link(2) + "\n");
  if (ready == "byte") (void)!::write(5, "x", 1);
  ::close(5);
  if (ready == "then-exit") return 0;  // a logger that dies: writes get EPIPE

  int outs[2] = {::open((prefix + ".stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644),
                 ::open((prefix + ".stderr").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)};
  pollfd p[2] = {{3, POLLIN, 0}, {4, POLLIN, 0}};
  int open_streams = 2;
  char buf[65536];
  while (open_streams > 0) {
    if (::poll(p, 2, -1) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      ssize_t n = ::read(p[i].fd, buf, sizeof buf);
      if (n > 0) {
        (void)!::write(outs[i], buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        p[i].fd = -1;
        --open_streams;
      }
    }
  }
  ::close(outs[0]);
  ::close(outs[1]);
  WriteText(prefix + ".done", "done\n");
  return 0;
}
