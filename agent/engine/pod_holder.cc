// See pod_holder.h.
#include "agent/engine/pod_holder.h"

#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

namespace capsule::engine {
namespace {

// The holder's root: an empty read-only tmpfs, mounted in its own mount
// namespace over a directory every guest has. /proc/1/root, seen from a
// container of a shareProcessNamespace pod, then shows nothing of the guest.
constexpr const char* kHolderRoot = "/dev";


Status Confine() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return ErrnoStatus("make the holder's mounts private");
  if (::mount("tmpfs", kHolderRoot, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555") != 0)
    return ErrnoStatus(std::string("mount an empty root on ") + kHolderRoot);
  if (::chroot(kHolderRoot) != 0) return ErrnoStatus("chroot");
  if (::chdir("/") != 0) return ErrnoStatus("chdir /");
  // Leaving uid 0 (without PR_SET_KEEPCAPS) clears every capability.
  if (::setgroups(0, nullptr) != 0) return ErrnoStatus("setgroups");
  if (::setresgid(kPodHolderUid, kPodHolderUid, kPodHolderUid) != 0) return ErrnoStatus("setresgid");
  if (::setresuid(kPodHolderUid, kPodHolderUid, kPodHolderUid) != 0) return ErrnoStatus("setresuid");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return ErrnoStatus("prctl(PR_SET_NO_NEW_PRIVS)");
  return Status::Ok();
}

}  // namespace

oci::Spec PodHolderSpec(const std::string& exe) {
  oci::Spec spec;
  spec.process.args = {exe, std::string(kPodHolderArg)};  // cwd stays "/"
  for (oci::NamespaceType t : {oci::NamespaceType::kPid, oci::NamespaceType::kIpc, oci::NamespaceType::kUts,
                               oci::NamespaceType::kMount})
    spec.linux.namespaces.push_back({t, ""});
  return spec;
}

int RunPodHolder() {
  (void)::prctl(PR_SET_NAME, "pause", 0, 0, 0);
  // Blocked, so PID 1 of a pid namespace receives them (an unhandled signal
  // to such a PID 1 is dropped) and takes them in order with sigwaitinfo.
  sigset_t wanted;
  sigemptyset(&wanted);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT}) sigaddset(&wanted, sig);
  ::sigprocmask(SIG_BLOCK, &wanted, nullptr);
  if (Status st = Confine(); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  if (::write(STDOUT_FILENO, kPodHolderReady.data(), kPodHolderReady.size()) !=
      static_cast<ssize_t>(kPodHolderReady.size()))
    return 1;
  // Nothing more is said: the agent's ends of these pipes stay unread.
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) ::close(fd);
  for (;;) {
    const int sig = ::sigwaitinfo(&wanted, nullptr);
    if (sig < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (sig != SIGCHLD) return 0;
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
}

Status SetHostnameIn(int uts, const std::string& hostname) {
  Status result;
  // setns of a uts namespace moves only the calling thread: this one, which
  // then ends.
  std::thread setter([&] {
    if (::setns(uts, CLONE_NEWUTS) != 0) {
      result = ErrnoStatus("setns into the pod's uts namespace");
    } else if (::sethostname(hostname.data(), hostname.size()) != 0) {
      result = ErrnoStatus("sethostname \"" + hostname + "\"");
    }
  });
  setter.join();
  return result;
}

}  // namespace capsule::engine
