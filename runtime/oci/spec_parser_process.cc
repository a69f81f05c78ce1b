// The "process" object: args, env, cwd, user, capabilities, rlimits,
// terminal, oom score. Also parsed standalone for exec.
#include "runtime/common/json_field.h"
#include "runtime/oci/parse_internal.h"
#include "runtime/oci/spec_parser.h"

namespace capsule::oci::internal {
namespace {

Status ParseUser(const JsonField& f, User* out) {
  if (f.null()) return Status::Ok();
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(Optional(f, "uid", &out->uid));
  RETURN_IF_ERROR(Optional(f, "gid", &out->gid));
  RETURN_IF_ERROR(Optional(f, "umask", &out->umask));
  if (out->umask && *out->umask > 0777) return f["umask"].Error("must be at most 0777 (511)");
  return Optional(f, "additionalGids", &out->additional_gids);
}

Status ParseCapSet(const JsonField& f, std::vector<int>* out) {
  return f.ForEach([&](const JsonField& e) {
    std::string name;
    RETURN_IF_ERROR(e.Read(&name));
    int cap = CapabilityFromName(name);
    if (cap < 0) return e.Error("unknown capability \"" + name + "\"");
    out->push_back(cap);
    return Status::Ok();
  });
}

Status ParseCapabilities(const JsonField& f, std::optional<Capabilities>* out) {
  if (f.null()) return Status::Ok();
  RETURN_IF_ERROR(f.ExpectObject());
  Capabilities c;
  RETURN_IF_ERROR(ParseCapSet(f["bounding"], &c.bounding));
  RETURN_IF_ERROR(ParseCapSet(f["effective"], &c.effective));
  RETURN_IF_ERROR(ParseCapSet(f["inheritable"], &c.inheritable));
  RETURN_IF_ERROR(ParseCapSet(f["permitted"], &c.permitted));
  RETURN_IF_ERROR(ParseCapSet(f["ambient"], &c.ambient));
  *out = std::move(c);
  return Status::Ok();
}

Status ParseRlimits(const JsonField& f, std::vector<Rlimit>* out) {
  return f.ForEach([&](const JsonField& e) {
    RETURN_IF_ERROR(e.ExpectObject());
    Rlimit r;
    RETURN_IF_ERROR(Required(e, "type", &r.type));
    r.resource = RlimitFromName(r.type);
    if (r.resource < 0) return e["type"].Error("unknown rlimit \"" + r.type + "\"");
    RETURN_IF_ERROR(Required(e, "hard", &r.hard));
    RETURN_IF_ERROR(Required(e, "soft", &r.soft));
    if (r.soft > r.hard) return e["soft"].Error("must not exceed hard");
    for (const auto& prev : *out) {
      if (prev.resource == r.resource) return e["type"].Error("duplicate rlimit \"" + r.type + "\"");
    }
    out->push_back(std::move(r));
    return Status::Ok();
  });
}

Status ParseConsoleSize(const JsonField& f, std::optional<ConsoleSize>* out) {
  if (f.null()) return Status::Ok();
  RETURN_IF_ERROR(f.ExpectObject());
  ConsoleSize c;
  RETURN_IF_ERROR(Required(f, "height", &c.height));
  RETURN_IF_ERROR(Required(f, "width", &c.width));
  if (c.height > 0xffff || c.width > 0xffff) return f.Error("height and width must be at most 65535");
  *out = c;
  return Status::Ok();
}

}  // namespace

Status ParseProcess(const JsonField& f, Process* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(Required(f, "args", &out->args));
  if (out->args.empty()) return f["args"].Error("must not be empty");
  if (out->args[0].empty()) return f["args"].Error("args[0] must not be empty");
  RETURN_IF_ERROR(Optional(f, "env", &out->env));
  RETURN_IF_ERROR(Required(f, "cwd", &out->cwd));
  if (out->cwd.empty() || out->cwd[0] != '/')
    return f["cwd"].Error("must be an absolute path, got \"" + out->cwd + "\"");
  RETURN_IF_ERROR(Optional(f, "terminal", &out->terminal));
  RETURN_IF_ERROR(ParseConsoleSize(f["consoleSize"], &out->console_size));
  RETURN_IF_ERROR(ParseUser(f["user"], &out->user));
  RETURN_IF_ERROR(ParseCapabilities(f["capabilities"], &out->capabilities));
  RETURN_IF_ERROR(ParseRlimits(f["rlimits"], &out->rlimits));
  RETURN_IF_ERROR(Optional(f, "noNewPrivileges", &out->no_new_privileges));
  RETURN_IF_ERROR(Optional(f, "oomScoreAdj", &out->oom_score_adj));
  if (out->oom_score_adj && (*out->oom_score_adj < -1000 || *out->oom_score_adj > 1000))
    return f["oomScoreAdj"].Error("must be between -1000 and 1000");
  RETURN_IF_ERROR(Optional(f, "apparmorProfile", &out->apparmor_profile));
  return Optional(f, "selinuxLabel", &out->selinux_label);
}

}  // namespace capsule::oci::internal
