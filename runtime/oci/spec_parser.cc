// config.json top level: root, mounts, hostname, annotations, hooks; process
// and linux sections are delegated to spec_parser_process.cc and
// spec_parser_linux.cc.
#include "runtime/oci/spec_parser.h"

#include "runtime/common/json_field.h"
#include "runtime/oci/parse_internal.h"

namespace capsule::oci {
namespace {

Status ParseRoot(const JsonField& f, Root* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(Required(f, "path", &out->path));
  if (out->path.empty()) return f["path"].Error("must not be empty");
  return Optional(f, "readonly", &out->readonly);
}

Status ParseMount(const JsonField& f, Mount* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(Required(f, "destination", &out->destination));
  if (out->destination.empty() || out->destination[0] != '/')
    return f["destination"].Error("must be an absolute path, got \"" + out->destination + "\"");
  RETURN_IF_ERROR(Optional(f, "type", &out->type));
  RETURN_IF_ERROR(Optional(f, "source", &out->source));
  return Optional(f, "options", &out->options);
}

Status ParseHook(const JsonField& f, Hook* out) {
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(Required(f, "path", &out->path));
  RETURN_IF_ERROR(Optional(f, "args", &out->args));
  RETURN_IF_ERROR(Optional(f, "env", &out->env));
  RETURN_IF_ERROR(Optional(f, "timeout", &out->timeout));
  if (out->timeout && *out->timeout <= 0) return f["timeout"].Error("must be greater than zero");
  return Status::Ok();
}

Status ParseHookList(const JsonField& f, std::vector<Hook>* out) {
  return f.ForEach([&](const JsonField& e) {
    Hook h;
    RETURN_IF_ERROR(ParseHook(e, &h));
    out->push_back(std::move(h));
    return Status::Ok();
  });
}

Status ParseHooks(const JsonField& f, Hooks* out) {
  if (f.null()) return Status::Ok();
  RETURN_IF_ERROR(f.ExpectObject());
  RETURN_IF_ERROR(ParseHookList(f["prestart"], &out->prestart));
  RETURN_IF_ERROR(ParseHookList(f["createRuntime"], &out->create_runtime));
  RETURN_IF_ERROR(ParseHookList(f["createContainer"], &out->create_container));
  RETURN_IF_ERROR(ParseHookList(f["startContainer"], &out->start_container));
  RETURN_IF_ERROR(ParseHookList(f["poststart"], &out->poststart));
  return ParseHookList(f["poststop"], &out->poststop);
}

Status ParseSpecObject(const JsonField& top, Spec* spec) {
  RETURN_IF_ERROR(top.ExpectObject());
  RETURN_IF_ERROR(Optional(top, "ociVersion", &spec->oci_version));
  if (top["root"].null()) return top["root"].Error("required");
  RETURN_IF_ERROR(ParseRoot(top["root"], &spec->root));
  if (top["process"].null()) return top["process"].Error("required");
  RETURN_IF_ERROR(internal::ParseProcess(top["process"], &spec->process));
  RETURN_IF_ERROR(Optional(top, "hostname", &spec->hostname));
  RETURN_IF_ERROR(Optional(top, "domainname", &spec->domainname));
  Status mounts = top["mounts"].ForEach([&](const JsonField& e) {
    Mount m;
    RETURN_IF_ERROR(ParseMount(e, &m));
    spec->mounts.push_back(std::move(m));
    return Status::Ok();
  });
  RETURN_IF_ERROR(mounts);
  RETURN_IF_ERROR(ParseHooks(top["hooks"], &spec->hooks));
  RETURN_IF_ERROR(Optional(top, "annotations", &spec->annotations));
  if (!top["linux"].null()) RETURN_IF_ERROR(internal::ParseLinux(top["linux"], &spec->linux));
  return Status::Ok();
}

}  // namespace

Result<Spec> ParseSpec(std::string_view json) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json, "OCI spec"));
  Spec spec;
  RETURN_IF_ERROR(ParseSpecObject(JsonField(&doc, ""), &spec));
  return spec;
}

Result<Process> ParseProcess(std::string_view json) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json, "OCI process"));
  Process p;
  RETURN_IF_ERROR(internal::ParseProcess(JsonField(&doc, ""), &p));
  return p;
}

Result<LinuxResources> ParseLinuxResources(std::string_view json) {
  ASSIGN_OR_RETURN(nlohmann::json doc, ParseJson(json, "OCI LinuxResources"));
  LinuxResources r;
  RETURN_IF_ERROR(internal::ParseResources(JsonField(&doc, ""), &r));
  return r;
}

const char* NamespaceTypeName(NamespaceType type) {
  switch (type) {
    case NamespaceType::kPid: return "pid";
    case NamespaceType::kNetwork: return "network";
    case NamespaceType::kMount: return "mount";
    case NamespaceType::kIpc: return "ipc";
    case NamespaceType::kUts: return "uts";
    case NamespaceType::kUser: return "user";
    case NamespaceType::kCgroup: return "cgroup";
    case NamespaceType::kTime: return "time";
  }
  return "?";
}

}  // namespace capsule::oci
