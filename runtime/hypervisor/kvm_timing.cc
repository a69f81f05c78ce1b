// The KVM timing guest. Guest memory holds, at 0x1000 (real mode, CS base 0):
//   66 B9 imm32   mov ecx, iterations
//   66 49         dec ecx            <- loop
//   75 FC         jnz loop
//   F4            hlt
// The child process reports one fixed-size record over a pipe; between fork
// and _exit it makes only system calls.
#include "runtime/hypervisor/kvm_timing.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/kvm.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "runtime/common/unique_fd.h"

namespace capsule::hypervisor {
namespace {

constexpr uint64_t kGuestMemBytes = 0x10000;  // 64 KiB, one slot at GPA 0
constexpr uint64_t kCodeAddr = 0x1000;
// Real mode on Intel without unrestricted guest needs a TSS for vm86; QEMU
// puts it just below the BIOS, as does every KVM user.
constexpr unsigned long kTssAddr = 0xfffbd000;

enum Step : int {
  kOk = 0, kOpen, kCreateVm, kMmapMem, kSetMem, kCreateVcpu, kMmapSize, kMmapRun,
  kGetSregs, kSetSregs, kSetRegs, kRun, kBadExit,
};

const char* StepName(int step) {
  switch (step) {
    case kOpen: return "open";
    case kCreateVm: return "KVM_CREATE_VM";
    case kMmapMem: return "mmap guest memory";
    case kSetMem: return "KVM_SET_USER_MEMORY_REGION";
    case kCreateVcpu: return "KVM_CREATE_VCPU";
    case kMmapSize: return "KVM_GET_VCPU_MMAP_SIZE";
    case kMmapRun: return "mmap kvm_run";
    case kGetSregs: return "KVM_GET_SREGS";
    case kSetSregs: return "KVM_SET_SREGS";
    case kSetRegs: return "KVM_SET_REGS";
    case kRun: return "KVM_RUN";
    default: return "unexpected exit";
  }
}

struct Report {
  int step = kOk;
  int err = 0;          // errno, or the KVM exit reason for kBadExit
  uint64_t elapsed_ns = 0;
};

uint64_t NowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Report Fail(int step) { return Report{step, errno, 0}; }

Report RunGuest(const char* dev, uint32_t iterations) {
  int kvm = ::open(dev, O_RDWR | O_CLOEXEC);
  if (kvm < 0) return Fail(kOpen);
  int vm = ::ioctl(kvm, KVM_CREATE_VM, 0);
  if (vm < 0) return Fail(kCreateVm);
  (void)::ioctl(vm, KVM_SET_TSS_ADDR, kTssAddr);  // not needed (and refused) on AMD
  void* mem = ::mmap(nullptr, kGuestMemBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return Fail(kMmapMem);
  unsigned char code[] = {0x66, 0xB9, 0, 0, 0, 0, 0x66, 0x49, 0x75, 0xFC, 0xF4};
  std::memcpy(code + 2, &iterations, sizeof iterations);
  std::memcpy(static_cast<char*>(mem) + kCodeAddr, code, sizeof code);
  kvm_userspace_memory_region region{};
  region.slot = 0;
  region.guest_phys_addr = 0;
  region.memory_size = kGuestMemBytes;
  region.userspace_addr = reinterpret_cast<uint64_t>(mem);
  if (::ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0) return Fail(kSetMem);
  int vcpu = ::ioctl(vm, KVM_CREATE_VCPU, 0);
  if (vcpu < 0) return Fail(kCreateVcpu);
  int run_size = ::ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
  if (run_size <= 0) return Fail(kMmapSize);
  void* run_map = ::mmap(nullptr, static_cast<size_t>(run_size), PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
  if (run_map == MAP_FAILED) return Fail(kMmapRun);
  auto* run = static_cast<kvm_run*>(run_map);
  kvm_sregs sregs{};
  if (::ioctl(vcpu, KVM_GET_SREGS, &sregs) < 0) return Fail(kGetSregs);
  sregs.cs.base = 0;
  sregs.cs.selector = 0;
  if (::ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0) return Fail(kSetSregs);
  kvm_regs regs{};
  regs.rip = kCodeAddr;
  regs.rflags = 0x2;  // bit 1 is reserved and must be set
  if (::ioctl(vcpu, KVM_SET_REGS, &regs) < 0) return Fail(kSetRegs);
  uint64_t start = NowNs();
  for (;;) {
    if (::ioctl(vcpu, KVM_RUN, 0) < 0) {
      if (errno == EINTR) continue;
      return Fail(kRun);
    }
    if (run->exit_reason == KVM_EXIT_HLT) break;
    if (run->exit_reason == KVM_EXIT_INTR) continue;
    return Report{kBadExit, static_cast<int>(run->exit_reason), 0};
  }
  return Report{kOk, 0, NowNs() - start};
}

}  // namespace

KvmTiming TimeKvmGuest(const std::string& dev_kvm, uint32_t iterations, std::chrono::milliseconds deadline) {
  KvmTiming t;
  t.iterations = iterations;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    t.error = fmt::format("pipe2: {}", std::strerror(errno));
    return t;
  }
  UniqueFd rd(p[0]), wr(p[1]);
  pid_t pid = ::fork();
  if (pid < 0) {
    t.error = fmt::format("fork: {}", std::strerror(errno));
    return t;
  }
  if (pid == 0) {
    Report r = RunGuest(dev_kvm.c_str(), iterations);
    (void)!::write(wr.get(), &r, sizeof r);
    ::_exit(0);
  }
  wr.reset();
  Report r{};
  pollfd pfd{rd.get(), POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, static_cast<int>(deadline.count()));
  } while (ready < 0 && errno == EINTR);
  bool got = ready > 0 && ::read(rd.get(), &r, sizeof r) == static_cast<ssize_t>(sizeof r);
  if (!got) ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (!got) {
    t.error = ready == 0 ? fmt::format("test guest did not halt within {} ms", deadline.count())
                         : "test process died without reporting";
  } else if (r.step == kBadExit) {
    t.error = fmt::format("test guest stopped with KVM exit reason {} instead of HLT", r.err);
  } else if (r.step != kOk) {
    t.error = fmt::format("{} {}: {}", StepName(r.step), dev_kvm, std::strerror(r.err));
  } else {
    t.ran = true;
    t.elapsed_ns = r.elapsed_ns;
  }
  return t;
}

}  // namespace capsule::hypervisor
