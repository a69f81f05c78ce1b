// Rules follow the runtime-spec: errnoRet defaults to EPERM; rules whose
// action equals the default are dropped (libseccomp refuses them); when one
// argument index appears twice the conditions are separate rules (OR), else
// one rule with all conditions (AND).
#include "agent/engine/seccomp.h"

#include <fcntl.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/seccomp.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <set>

#include "runtime/common/unique_fd.h"

namespace capsule::engine {
namespace {

using CtxPtr = std::unique_ptr<void, void (*)(scmp_filter_ctx)>;

Status SeccompError(const std::string& what, int rc) { return ErrnoStatus(what, -rc); }

Result<uint32_t> ToAction(oci::SeccompAction a, std::optional<uint32_t> errno_ret, const std::string& field) {
  const uint32_t err = errno_ret.value_or(EPERM);
  switch (a) {
    case oci::SeccompAction::kKill: return SCMP_ACT_KILL;
    case oci::SeccompAction::kKillProcess: return SCMP_ACT_KILL_PROCESS;
    case oci::SeccompAction::kKillThread: return SCMP_ACT_KILL_THREAD;
    case oci::SeccompAction::kTrap: return SCMP_ACT_TRAP;
    case oci::SeccompAction::kErrno: return SCMP_ACT_ERRNO(err);
    case oci::SeccompAction::kTrace: return SCMP_ACT_TRACE(err);
    case oci::SeccompAction::kAllow: return SCMP_ACT_ALLOW;
    case oci::SeccompAction::kLog: return SCMP_ACT_LOG;
    case oci::SeccompAction::kNotify: break;
  }
  return Unimplemented(field + ": SCMP_ACT_NOTIFY needs a seccomp agent, which the guest does not run");
}

scmp_compare ToOp(oci::SeccompOp op) {
  switch (op) {
    case oci::SeccompOp::kNotEqual: return SCMP_CMP_NE;
    case oci::SeccompOp::kLessThan: return SCMP_CMP_LT;
    case oci::SeccompOp::kLessEqual: return SCMP_CMP_LE;
    case oci::SeccompOp::kEqualTo: return SCMP_CMP_EQ;
    case oci::SeccompOp::kGreaterEqual: return SCMP_CMP_GE;
    case oci::SeccompOp::kGreaterThan: return SCMP_CMP_GT;
    case oci::SeccompOp::kMaskedEqual: return SCMP_CMP_MASKED_EQ;
  }
  return SCMP_CMP_EQ;
}

Status AddArchitectures(scmp_filter_ctx ctx, const std::vector<std::string>& archs) {
  for (size_t i = 0; i < archs.size(); ++i) {
    const std::string field = "linux.seccomp.architectures[" + std::to_string(i) + "]";
    std::string name = archs[i];
    if (name.rfind("SCMP_ARCH_", 0) != 0) return InvalidArgument(field + ": unknown architecture \"" + name + "\"");
    name = name.substr(10);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    uint32_t token = seccomp_arch_resolve_name(name.c_str());
    if (token == 0) return InvalidArgument(field + ": unknown architecture \"" + archs[i] + "\"");
    int rc = seccomp_arch_add(ctx, token);
    if (rc != 0 && rc != -EEXIST) return SeccompError(field + ": add architecture " + archs[i], rc);
  }
  return Status::Ok();
}

Status AddRule(scmp_filter_ctx ctx, uint32_t action, int nr, const std::vector<scmp_arg_cmp>& cmps,
               const std::string& what) {
  int rc = seccomp_rule_add_array(ctx, action, nr, static_cast<unsigned int>(cmps.size()), cmps.data());
  if (rc != 0) return SeccompError(what + ": add rule", rc);
  return Status::Ok();
}

Status AddSyscall(scmp_filter_ctx ctx, const oci::SeccompSyscall& s, uint32_t default_action, size_t index) {
  const std::string field = "linux.seccomp.syscalls[" + std::to_string(index) + "]";
  ASSIGN_OR_RETURN(uint32_t action, ToAction(s.action, s.errno_ret, field + ".action"));
  if (action == default_action) return Status::Ok();
  std::vector<scmp_arg_cmp> cmps;
  std::set<uint32_t> indexes;
  bool repeated = false;
  for (const auto& a : s.args) {
    repeated = repeated || !indexes.insert(a.index).second;
    cmps.push_back(scmp_arg_cmp{a.index, ToOp(a.op), a.value, a.value_two});
  }
  for (size_t n = 0; n < s.names.size(); ++n) {
    const std::string name_field = field + ".names[" + std::to_string(n) + "]";
    int nr = seccomp_syscall_resolve_name(s.names[n].c_str());
    if (nr == __NR_SCMP_ERROR) return InvalidArgument(name_field + ": unknown syscall \"" + s.names[n] + "\"");
    if (!repeated) {
      RETURN_IF_ERROR(AddRule(ctx, action, nr, cmps, name_field));
      continue;
    }
    for (const auto& c : cmps) RETURN_IF_ERROR(AddRule(ctx, action, nr, {c}, name_field));
  }
  return Status::Ok();
}

Result<unsigned int> ParseFlags(const std::vector<std::string>& flags) {
  unsigned int out = 0;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (flags[i] == "SECCOMP_FILTER_FLAG_LOG") out |= SECCOMP_FILTER_FLAG_LOG;
    else if (flags[i] == "SECCOMP_FILTER_FLAG_SPEC_ALLOW") out |= SECCOMP_FILTER_FLAG_SPEC_ALLOW;
    else if (flags[i] == "SECCOMP_FILTER_FLAG_TSYNC") continue;  // the child is single-threaded
    else return InvalidArgument("linux.seccomp.flags[" + std::to_string(i) + "]: unsupported flag \"" + flags[i] + "\"");
  }
  return out;
}

Result<std::vector<sock_filter>> ExportBpf(scmp_filter_ctx ctx) {
  UniqueFd mem(::memfd_create("capsule-seccomp", MFD_CLOEXEC));
  if (!mem) return ErrnoStatus("memfd_create for seccomp export");
  int rc = seccomp_export_bpf(ctx, mem.get());
  if (rc != 0) return SeccompError("export seccomp filter", rc);
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return Internal("seccomp export produced " + std::to_string(size) + " bytes");
  std::vector<sock_filter> out(static_cast<size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), out.data(), static_cast<size_t>(size), 0) != size) return ErrnoStatus("read seccomp export");
  return out;
}

}  // namespace

Result<SeccompProgram> CompileSeccomp(const oci::Seccomp& spec) {
  if (!spec.listener_path.empty())
    return Unimplemented("linux.seccomp.listenerPath: seccomp notify agents are not supported in the guest");
  ASSIGN_OR_RETURN(uint32_t default_action,
                   ToAction(spec.default_action, spec.default_errno_ret, "linux.seccomp.defaultAction"));
  CtxPtr ctx(seccomp_init(default_action), seccomp_release);
  if (!ctx) return Internal("seccomp_init failed");
  RETURN_IF_ERROR(AddArchitectures(ctx.get(), spec.architectures));
  for (size_t i = 0; i < spec.syscalls.size(); ++i)
    RETURN_IF_ERROR(AddSyscall(ctx.get(), spec.syscalls[i], default_action, i));
  SeccompProgram p;
  ASSIGN_OR_RETURN(p.flags, ParseFlags(spec.flags));
  ASSIGN_OR_RETURN(p.filter, ExportBpf(ctx.get()));
  return p;
}

Status LoadSeccomp(const SeccompProgram& program) {
  sock_fprog prog{};
  prog.len = static_cast<unsigned short>(program.filter.size());
  prog.filter = const_cast<sock_filter*>(program.filter.data());
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, program.flags, &prog) != 0)
    return ErrnoStatus("seccomp(SECCOMP_SET_MODE_FILTER)");
  return Status::Ok();
}

}  // namespace capsule::engine
