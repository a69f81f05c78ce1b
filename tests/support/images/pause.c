/* pause: the pod sandbox's placeholder process for Capsule's local test
 * pause image. It holds the pod's namespaces open, reaps any child that is
 * reparented to it (it is PID 1 of the sandbox's PID namespace), and exits 0
 * on SIGINT or SIGTERM. Built with `gcc -static`, so the image needs no libc. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAUSE_VERSION "capsule-pause 1.0"

static void NoopHandler(int sig) { (void)sig; }

static void ReapAll(void) {
  for (;;) {
    pid_t pid = waitpid(-1, NULL, WNOHANG);
    if (pid > 0) continue;
    if (pid < 0 && errno == EINTR) continue;
    return; /* 0: children still running; -1/ECHILD: none left */
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    puts(PAUSE_VERSION);
    return 0;
  }
  /* Blocked signals stay pending even for a PID 1 without handlers (the
   * kernel would drop unblocked SIG_DFL ones), so sigwaitinfo sees them. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
    perror("pause: sigprocmask");
    return 1;
  }
  /* Handlers never run (sigwaitinfo dequeues first), but installing them
   * after blocking shows readiness in /proc/<pid>/status SigCgt, which tests
   * wait for: while in sigwaitinfo the kernel clears SigBlk. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = NoopHandler;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) {
    static const int kSignals[3] = {SIGINT, SIGTERM, SIGCHLD};
    if (sigaction(kSignals[i], &sa, NULL) != 0) {
      perror("pause: sigaction");
      return 1;
    }
  }
  for (;;) {
    siginfo_t info;
    int sig = sigwaitinfo(&set, &info);
    if (sig < 0) {
      if (errno == EINTR) continue;
      perror("pause: sigwaitinfo");
      return 1;
    }
    if (sig == SIGCHLD) {
      ReapAll();
      continue;
    }
    fprintf(stderr, "pause: shutting down, got signal %d\n", sig);
    return 0;
  }
}
