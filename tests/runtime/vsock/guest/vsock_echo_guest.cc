// vsock_echo_guest: a tiny guest program for the vsock end-to-end test, run
// by a busybox init in a test initrd (static, no libraries needed):
//  - echoes every connection to AF_VSOCK port 1024 (one thread each), so
//    the host's hybrid CONNECT, data both ways and shutdown are exercised
//    against Linux's real virtio-vsock driver;
//  - connects once to the host (CID 2) port 5000 and sends a greeting,
//    exercising guest-initiated connections to "<uds>_5000".
#include <linux/vm_sockets.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr unsigned kEchoPort = 1024;
constexpr unsigned kHostPort = 5000;

void Echo(int fd) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(fd, buf + off, static_cast<size_t>(n - off));
      if (w <= 0) {
        ::close(fd);
        return;
      }
      off += w;
    }
  }
  ::close(fd);
}

void Greet() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    int fd = ::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_vm addr{};
    addr.svm_family = AF_VSOCK;
    addr.svm_cid = VMADDR_CID_HOST;
    addr.svm_port = kHostPort;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      std::string hello = "hello from the guest\n";
      (void)!::write(fd, hello.data(), hello.size());
      ::shutdown(fd, SHUT_WR);
      char c;
      while (::read(fd, &c, 1) > 0) {
      }
      ::close(fd);
      std::printf("vsock-echo: greeted host port %u\n", kHostPort);
      return;
    }
    std::printf("vsock-echo: connect to host port %u: %s\n", kHostPort, std::strerror(errno));
    ::close(fd);
    ::sleep(1);  // guest side of a test fixture: the host listener may come later
  }
}

}  // namespace

int main() {
  int lfd = ::socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) {
    std::perror("vsock-echo: socket(AF_VSOCK)");
    return 1;
  }
  sockaddr_vm addr{};
  addr.svm_family = AF_VSOCK;
  addr.svm_cid = VMADDR_CID_ANY;
  addr.svm_port = kEchoPort;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(lfd, 64) != 0) {
    std::perror("vsock-echo: bind/listen");
    return 1;
  }
  std::printf("vsock-echo: listening on port %u\n", kEchoPort);
  std::fflush(stdout);
  std::thread(Greet).detach();
  for (;;) {
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::thread(Echo, fd).detach();
  }
}
