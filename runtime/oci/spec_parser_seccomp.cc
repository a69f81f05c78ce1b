// The "linux.seccomp" object: actions and comparison operators are checked
// here; syscall and architecture names are resolved (and checked) by the
// agent's seccomp compiler, which has libseccomp's tables.
#include <array>
#include <string_view>

#include "runtime/common/json_field.h"
#include "runtime/oci/parse_internal.h"

namespace capsule::oci::internal {
namespace {

struct ActionName {
  std::string_view name;
  SeccompAction action;
};

constexpr std::array<ActionName, 9> kActions = {{
    {"SCMP_ACT_KILL", SeccompAction::kKill},
    {"SCMP_ACT_KILL_PROCESS", SeccompAction::kKillProcess},
    {"SCMP_ACT_KILL_THREAD", SeccompAction::kKillThread},
    {"SCMP_ACT_TRAP", SeccompAction::kTrap},
    {"SCMP_ACT_ERRNO", SeccompAction::kErrno},
    {"SCMP_ACT_TRACE", SeccompAction::kTrace},
    {"SCMP_ACT_ALLOW", SeccompAction::kAllow},
    {"SCMP_ACT_LOG", SeccompAction::kLog},
    {"SCMP_ACT_NOTIFY", SeccompAction::kNotify},
}};

struct OpName {
  std::string_view name;
  SeccompOp op;
};

constexpr std::array<OpName, 7> kOps = {{
    {"SCMP_CMP_NE", SeccompOp::kNotEqual},
    {"SCMP_CMP_LT", SeccompOp::kLessThan},
    {"SCMP_CMP_LE", SeccompOp::kLessEqual},
    {"SCMP_CMP_EQ", SeccompOp::kEqualTo},
    {"SCMP_CMP_GE", SeccompOp::kGreaterEqual},
    {"SCMP_CMP_GT", SeccompOp::kGreaterThan},
    {"SCMP_CMP_MASKED_EQ", SeccompOp::kMaskedEqual},
}};

// Seccomp inspects six syscall arguments (linux/seccomp.h: seccomp_data.args).
constexpr uint32_t kSeccompMaxArgs = 6;

Status ReadAction(const JsonField& f, SeccompAction* out) {
  std::string name;
  RETURN_IF_ERROR(f.Read(&name));
  for (const auto& a : kActions) {
    if (a.name == name) {
      *out = a.action;
      return Status::Ok();
    }
  }
  return f.Error("unknown seccomp action \"" + name + "\"");
}

Status ParseArg(const JsonField& f, SeccompArg* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(Required(f, "index", &out->index));
  if (out->index >= kSeccompMaxArgs) return f["index"].Error("must be between 0 and 5");
  RETURN_IF_ERROR(Required(f, "value", &out->value));
  RETURN_IF_ERROR(Optional(f, "valueTwo", &out->value_two));
  std::string op;
  RETURN_IF_ERROR(Required(f, "op", &op));
  for (const auto& o : kOps) {
    if (o.name == op) {
      out->op = o.op;
      return Status::Ok();
    }
  }
  return f["op"].Error("unknown seccomp operator \"" + op + "\"");
}

Status ParseSyscall(const JsonField& f, SeccompSyscall* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(Required(f, "names", &out->names));
  if (out->names.empty()) return f["names"].Error("must not be empty");
  if (f["action"].null()) return f["action"].Error("required");
  RETURN_IF_ERROR(ReadAction(f["action"], &out->action));
  RETURN_IF_ERROR(Optional(f, "errnoRet", &out->errno_ret));
  return f["args"].ForEach([&](const JsonField& e) {
    SeccompArg a;
    RETURN_IF_ERROR(ParseArg(e, &a));
    out->args.push_back(a);
    return Status::Ok();
  });
}

}  // namespace

Status ParseSeccomp(const JsonField& f, Seccomp* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  if (f["defaultAction"].null()) return f["defaultAction"].Error("required");
  RETURN_IF_ERROR(ReadAction(f["defaultAction"], &out->default_action));
  RETURN_IF_ERROR(Optional(f, "defaultErrnoRet", &out->default_errno_ret));
  RETURN_IF_ERROR(Optional(f, "architectures", &out->architectures));
  RETURN_IF_ERROR(Optional(f, "flags", &out->flags));
  RETURN_IF_ERROR(Optional(f, "listenerPath", &out->listener_path));
  return f["syscalls"].ForEach([&](const JsonField& e) {
    SeccompSyscall s;
    RETURN_IF_ERROR(ParseSyscall(e, &s));
    out->syscalls.push_back(std::move(s));
    return Status::Ok();
  });
}

}  // namespace capsule::oci::internal
