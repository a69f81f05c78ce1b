// The two children of a launch. Both run a single-threaded copy of the
// agent: the intermediate is a fork() (glibc keeps malloc usable), the
// container process a clone of that single thread, so allocation is safe in
// both; neither touches the agent's loggers or locks. The container process
// shares the intermediate's copy (CLONE_VM) instead of making its own, which
// saves a copy of the page tables and a teardown: a create's "fork to pid"
// went from 25 to 20 ms under TCG (container_api_vm_bench, medians of 10).
// The two never run on that memory at once (glibc takes no malloc lock in a
// process it thinks is single-threaded): the container process first waits
// for the intermediate to be gone.
#include "agent/engine/process_launch.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/engine/sync_channel.h"
#include "agent/engine/terminal.h"
#include "runtime/common/elapsed.h"
#include "runtime/common/subprocess.h"

namespace capsule::engine {
namespace {

// Upper bound for the intermediate to exit after it reported (ms).
constexpr std::chrono::milliseconds kHelperExitTimeout{10000};

[[noreturn]] void Fail(int sync, const Status& st, int code = 1) {
  (void)SendSyncError(sync, st);
  ::_exit(code);
}

Status SetupContainerProcess(LaunchRequest& req, int sync, std::string* exe) {
  const ProcessPlan& p = *req.process;
  RETURN_IF_ERROR(WriteOomScoreAdj(p));
  if (::setsid() < 0) return ErrnoStatus("setsid");
  if (!p.terminal) RETURN_IF_ERROR(DupStdio(req.stdio.in.get(), req.stdio.out.get(), req.stdio.err.get()));
  if (req.rootfs) RETURN_IF_ERROR(SetupRootfs(*req.rootfs));
  if (req.tools_root) RETURN_IF_ERROR(EnterToolsRoot(*req.tools_root));
  if (p.terminal) {
    ASSIGN_OR_RETURN(UniqueFd master, SetupConsole(p.console_size));
    RETURN_IF_ERROR(SendSync(sync, SyncType::kConsole, 0, master.get()));
  }
  RETURN_IF_ERROR(ApplyRlimits(p));
  RETURN_IF_ERROR(ApplyCredentials(p));
  ASSIGN_OR_RETURN(*exe, ResolveExecutable(p));
  return Status::Ok();
}

bool Expect(int sync, SyncType type) {
  auto r = RecvSync(sync, std::nullopt);
  return r.ok() && r->message && r->message->type == type;
}

// The container process's own stack, mapped in the shared copy: only the
// pages it touches cost memory, and exec or exit drops it with the rest.
constexpr size_t kContainerStackBytes = size_t{8} << 20;
constexpr size_t kStackGuardBytes = 64 << 10;

struct ContainerStart {
  LaunchRequest* req;
  int sync;
  int intermediate_gone;  // read end: EOF once the intermediate has exited
  int intermediate_gone_w;
};

// kStart's value: whether the agent waits for the exec's outcome.
constexpr int32_t kStartAwaited = 1;

[[noreturn]] void RunContainerProcess(LaunchRequest& req, int sync) {
  ResetSignals();
  if (!Expect(sync, SyncType::kGo)) ::_exit(1);
  std::string exe;
  Status st = SetupContainerProcess(req, sync, &exe);
  if (!st.ok()) Fail(sync, st);
  if (!SendSync(sync, SyncType::kReady).ok()) ::_exit(1);
  auto go = RecvSync(sync, std::nullopt);
  if (!go.ok() || !go->message || go->message->type != SyncType::kStart) ::_exit(1);  // deleted before start
  const Status exec = ExecUserProcess(*req.process, exe);
  if (go->message->value == kStartAwaited) Fail(sync, exec, 127);
  // Released: nobody reads the sync socket any more. As runc's init does,
  // the process's own stderr (the container's log) says why it exits.
  const std::string line = "capsule: " + exec.message() + "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  ::_exit(127);
}

Status EnterContainer(LaunchRequest& req) {
  if (req.cgroup_procs && ::write(req.cgroup_procs.get(), "0", 1) != 1) return ErrnoStatus("join cgroup");
  RETURN_IF_ERROR(EnterNamespaces(req.namespaces));
  if (req.root_dir) {
    if (::fchdir(req.root_dir.get()) != 0 || ::chroot(".") != 0 || ::chdir("/") != 0)
      return ErrnoStatus("enter the container's root directory");
  }
  return Status::Ok();
}

[[noreturn]] void RunIntermediate(LaunchRequest& req, int sync) {
  std::vector<int> keep = {sync, req.stdio.in.get(), req.stdio.out.get(), req.stdio.err.get(),
                           req.cgroup_procs.get(), req.root_dir.get()};
  for (const auto& j : req.namespaces.joins) keep.push_back(j.fd.get());
  CloseAllExcept(keep);
  Status st = EnterContainer(req);
  if (!st.ok()) Fail(sync, st);
  // The kernel refuses to share memory across time namespaces; such a
  // container gets a fork-like clone (same stack, its own copy).
  if (req.namespaces.Has(oci::NamespaceType::kTime)) {
    long pid = ::syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, nullptr, nullptr, 0);
    if (pid == 0) RunContainerProcess(req, sync);
    if (pid < 0) Fail(sync, ErrnoStatus("clone container process"));
    (void)SendSync(sync, SyncType::kPid, static_cast<int32_t>(pid));
    ::_exit(0);
  }
  int gone[2];
  if (::pipe2(gone, O_CLOEXEC) != 0) Fail(sync, ErrnoStatus("pipe for the container process"));
  void* stack = ::mmap(nullptr, kContainerStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) Fail(sync, ErrnoStatus("map the container process's stack"));
  if (::mprotect(stack, kStackGuardBytes, PROT_NONE) != 0) Fail(sync, ErrnoStatus("guard the container process's stack"));
  ContainerStart start{&req, sync, gone[0], gone[1]};
  // Exit signal SIGCHLD, parent = the agent, memory = this process's.
  int pid = ::clone(
      [](void* arg) -> int {
        const ContainerStart s = *static_cast<ContainerStart*>(arg);
        // Nothing that allocates until the intermediate is gone. Its exit
        // releases the memory before its fds, so EOF here means it is done.
        ::close(s.intermediate_gone_w);
        char c;
        ssize_t n;
        do {
          n = ::read(s.intermediate_gone, &c, 1);
        } while (n > 0 || (n < 0 && errno == EINTR));
        ::close(s.intermediate_gone);
        RunContainerProcess(*s.req, s.sync);
      },
      static_cast<char*>(stack) + kContainerStackBytes, CLONE_VM | CLONE_PARENT | SIGCHLD, &start);
  if (pid < 0) Fail(sync, ErrnoStatus("clone container process"));
  (void)SendSync(sync, SyncType::kPid, static_cast<int32_t>(pid));
  ::_exit(0);
}

// After the pid is known: lets the child set up and collects its answer.
Status AwaitReady(int sync, const ProcessPtr& process, std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(SendSync(sync, SyncType::kGo));
  for (;;) {
    ASSIGN_OR_RETURN(Received r, RecvSync(sync, timeout));
    if (!r.message) return Internal("container process exited during setup");
    switch (r.message->type) {
      case SyncType::kConsole:
        if (!r.fd) return Internal("console message without a pty fd");
        process->io()->SetConsole(std::move(r.fd));
        break;
      case SyncType::kReady: return Status::Ok();
      case SyncType::kError: return SyncErrorStatus(*r.message);
      default: return Internal("unexpected sync message " + std::string(SyncTypeName(r.message->type)));
    }
  }
}

// Receives the container process's pid from the intermediate. Its exit is
// waited for here: letting the container's set-up overlap it was measured
// (pod_start_bench) to gain nothing on a one-vCPU guest, the teardown of
// the intermediate's copy of the agent only moved into the set-up's time.
Result<pid_t> AwaitPid(int sync, pid_t helper, ExitMonitor& monitor, std::chrono::milliseconds timeout) {
  auto r = RecvSync(sync, timeout);
  auto helper_status = monitor.TakeHelperStatus(helper, r.ok() ? kHelperExitTimeout : std::chrono::milliseconds(0));
  if (!r.ok()) {
    ::kill(helper, SIGKILL);
    return r.status();
  }
  if (r->message && r->message->type == SyncType::kError) return SyncErrorStatus(*r->message);
  if (!r->message || r->message->type != SyncType::kPid) {
    return Internal("launch child exited without reporting a pid (exit " +
                    std::to_string(helper_status ? ExitCode(*helper_status) : -1) + ")");
  }
  return static_cast<pid_t>(r->message->value);
}

}  // namespace

Status LaunchedProcess::Go(bool awaited) {
  if (!sync_) return FailedPrecondition("process already started");
  Status sent = SendSync(sync_.get(), SyncType::kStart, awaited ? kStartAwaited : 0);
  if (!sent.ok()) {
    sync_.reset();
    return FailedPrecondition("container process is gone: " + sent.message());
  }
  return Status::Ok();
}

Status LaunchedProcess::Release() {
  RETURN_IF_ERROR(Go(false));
  sync_.reset();
  return Status::Ok();
}

Status LaunchedProcess::Start(std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(Go(true));
  UniqueFd sync = std::move(sync_);
  ASSIGN_OR_RETURN(Received r, RecvSync(sync.get(), timeout));
  if (r.message && r.message->type == SyncType::kError) return SyncErrorStatus(*r.message);
  return Status::Ok();
}

Result<LaunchedProcess> Launch(LaunchRequest& req, ExitMonitor& monitor, const ProcessPtr& process) {
  ASSIGN_OR_RETURN(SyncPair pair, MakeSyncPair());
  const auto t0 = std::chrono::steady_clock::now();
  pid_t helper = ::fork();
  if (helper < 0) return ErrnoStatus("fork");
  if (helper == 0) {
    pair.parent.reset();
    RunIntermediate(req, pair.child.get());
  }
  pair.child.reset();
  req.stdio = ChildStdio{};  // only the process may hold its write ends
  ASSIGN_OR_RETURN(pid_t pid, AwaitPid(pair.parent.get(), helper, monitor, req.timeout));
  const auto t_pid = std::chrono::steady_clock::now();
  auto pidfd = OpenPidfd(pid);
  process->set_pid(pid, pidfd.ok() ? std::move(*pidfd) : UniqueFd());
  monitor.Register(pid, process);
  Status st = AwaitReady(pair.parent.get(), process, req.timeout);
  if (!st.ok()) {
    (void)process->Signal(SIGKILL);
    pair.parent.reset();
    (void)process->WaitUntil(std::chrono::steady_clock::now() + kHelperExitTimeout);
    return st;
  }
  return LaunchedProcess(std::move(pair.parent), MsBetween(t0, t_pid), MsSince(t_pid));
}

}  // namespace capsule::engine
