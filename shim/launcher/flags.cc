// Go-flag-compatible parsing of the shim's arguments. containerd builds the
// command line in runtime/v2/shim/util.go (Command) and binary.go (start,
// delete); Go's flag package accepts one or two dashes and `=value`.
#include "shim/launcher/flags.h"

#include <fmt/format.h>

#include <cctype>
#include <functional>
#include <string_view>

namespace capsule::shim::launcher {
namespace {

// From containerd identifiers/validate.go.
constexpr size_t kMaxIdentifierLength = 76;

enum class Kind { kBool, kString, kFd };

struct FlagSpec {
  std::string_view name;
  Kind kind;
  std::function<void(ShimFlags&, const std::string&, bool)> set;
};

Result<bool> ParseBool(const std::string& flag, const std::string& value) {
  // Go's strconv.ParseBool spellings.
  for (const char* t : {"1", "t", "T", "true", "TRUE", "True"})
    if (value == t) return true;
  for (const char* f : {"0", "f", "F", "false", "FALSE", "False"})
    if (value == f) return false;
  return InvalidArgument(fmt::format("invalid boolean value \"{}\" for -{}", value, flag));
}

Result<int> ParseFd(const std::string& flag, const std::string& value) {
  if (value.empty() || value.size() > 9) {
    return InvalidArgument(fmt::format("invalid value \"{}\" for -{}: want a descriptor number", value, flag));
  }
  int n = 0;
  for (char c : value) {
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return InvalidArgument(fmt::format("invalid value \"{}\" for -{}: want a descriptor number", value, flag));
    n = n * 10 + (c - '0');
  }
  return n;
}

const std::vector<FlagSpec>& Specs() {
  static const std::vector<FlagSpec> specs = {
      {"namespace", Kind::kString, [](ShimFlags& f, const std::string& v, bool) { f.namespace_ = v; }},
      {"id", Kind::kString, [](ShimFlags& f, const std::string& v, bool) { f.id = v; }},
      {"address", Kind::kString, [](ShimFlags& f, const std::string& v, bool) { f.address = v; }},
      {"publish-binary", Kind::kString, [](ShimFlags& f, const std::string& v, bool) { f.publish_binary = v; }},
      {"bundle", Kind::kString, [](ShimFlags& f, const std::string& v, bool) { f.bundle = v; }},
      {"config", Kind::kString, [](ShimFlags& f, const std::string& v, bool) { f.config_path = v; }},
      {"socket-fd", Kind::kFd, nullptr},
      {"debug", Kind::kBool, [](ShimFlags& f, const std::string&, bool b) { f.debug = b; }},
      {"v", Kind::kBool, [](ShimFlags& f, const std::string&, bool b) { f.version = b; }},
      {"version", Kind::kBool, [](ShimFlags& f, const std::string&, bool b) { f.version = b; }},
      {"h", Kind::kBool, [](ShimFlags& f, const std::string&, bool b) { f.help = b; }},
      {"help", Kind::kBool, [](ShimFlags& f, const std::string&, bool b) { f.help = b; }},
  };
  return specs;
}

const FlagSpec* FindSpec(std::string_view name) {
  for (const auto& s : Specs()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Status SetFlag(ShimFlags& flags, const FlagSpec& spec, const std::optional<std::string>& value) {
  const std::string name(spec.name);
  switch (spec.kind) {
    case Kind::kBool: {
      bool b = true;
      if (value) {
        ASSIGN_OR_RETURN(b, ParseBool(name, *value));
      }
      spec.set(flags, "", b);
      return Status::Ok();
    }
    case Kind::kFd: {
      ASSIGN_OR_RETURN(flags.socket_fd, ParseFd(name, *value));
      return Status::Ok();
    }
    case Kind::kString:
      spec.set(flags, *value, false);
      return Status::Ok();
  }
  return Internal("unknown flag kind");
}

Result<Action> ParseAction(const std::string& word) {
  if (word == "start") return Action::kStart;
  if (word == "delete") return Action::kDelete;
  return InvalidArgument(fmt::format("unknown action \"{}\" (want start or delete)", word));
}

}  // namespace

Result<ShimFlags> ParseFlags(const std::vector<std::string>& args) {
  ShimFlags flags;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') break;  // first positional ("-" too)
    if (arg == "--") {
      ++i;
      break;
    }
    std::string_view body(arg);
    body.remove_prefix(body.starts_with("--") ? 2 : 1);
    if (body.empty() || body[0] == '-' || body[0] == '=')
      return InvalidArgument(fmt::format("bad flag syntax: {}", arg));
    std::optional<std::string> value;
    if (size_t eq = body.find('='); eq != std::string_view::npos) {
      value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    const FlagSpec* spec = FindSpec(body);
    if (spec == nullptr)
      return InvalidArgument(fmt::format("flag provided but not defined: -{}", body));
    // Only a bool flag may stand alone; the others take the next argument.
    if (!value && spec->kind != Kind::kBool) {
      if (i + 1 >= args.size())
        return InvalidArgument(fmt::format("flag needs an argument: -{}", body));
      value = args[++i];
    }
    RETURN_IF_ERROR(SetFlag(flags, *spec, value));
  }
  if (i < args.size()) {
    ASSIGN_OR_RETURN(flags.action, ParseAction(args[i]));
    ++i;
  }
  if (i < args.size())
    return InvalidArgument(fmt::format("unexpected argument \"{}\" after the action", args[i]));
  return flags;
}

Status ValidateIdentifier(const std::string& what, const std::string& value) {
  if (value.empty()) return InvalidArgument(fmt::format("{} must not be empty", what));
  if (value.size() > kMaxIdentifierLength)
    return InvalidArgument(fmt::format("{} \"{}\" is longer than {} characters", what, value,
                                       kMaxIdentifierLength));
  bool prev_sep = true;  // a separator may not start the identifier
  for (char c : value) {
    const bool alnum = std::isalnum(static_cast<unsigned char>(c)) != 0;
    const bool sep = c == '.' || c == '_' || c == '-';
    if (!alnum && !sep)
      return InvalidArgument(fmt::format("{} \"{}\" has invalid character '{}'", what, value, c));
    if (sep && prev_sep)
      return InvalidArgument(fmt::format("{} \"{}\" must have alphanumerics between '.', '_', '-'", what, value));
    prev_sep = sep;
  }
  if (prev_sep) return InvalidArgument(fmt::format("{} \"{}\" must end with an alphanumeric", what, value));
  return Status::Ok();
}

Status ValidateFlags(const ShimFlags& flags) {
  RETURN_IF_ERROR(ValidateIdentifier("-namespace", flags.namespace_));
  RETURN_IF_ERROR(ValidateIdentifier("-id", flags.id));
  switch (flags.action) {
    case Action::kStart:
      if (flags.address.empty()) return InvalidArgument("start: -address (containerd's socket) is required");
      if (flags.socket_fd >= 0) return InvalidArgument("start: -socket-fd is for the daemon only");
      break;
    case Action::kDelete:
      break;
    case Action::kDaemon:
      // Only `start` runs the daemon; a person who forgot the action lands here.
      if (flags.socket_fd < 0)
        return InvalidArgument("no action given (want start or delete); the daemon mode needs -socket-fd");
      if (flags.socket_fd <= 2) return InvalidArgument("-socket-fd must not be stdin, stdout or stderr");
      break;
  }
  return Status::Ok();
}

std::vector<std::string> DaemonArgs(const ShimFlags& flags, const std::string& bundle,
                                    int socket_fd, const std::string& config_path) {
  std::vector<std::string> args = {"-namespace", flags.namespace_, "-id", flags.id,
                                   "-address", flags.address, "-bundle", bundle,
                                   "-socket-fd", std::to_string(socket_fd)};
  if (!flags.publish_binary.empty()) {
    args.insert(args.end(), {"-publish-binary", flags.publish_binary});
  }
  if (!config_path.empty()) args.insert(args.end(), {"-config", config_path});
  if (flags.debug) args.push_back("-debug");
  return args;
}

std::string Usage(const std::string& program) {
  return fmt::format(
      "Usage: {0} -namespace NS -address ADDR -publish-binary BIN -id ID [-debug] start\n"
      "       {0} -namespace NS -address ADDR -publish-binary BIN -id ID -bundle PATH delete\n"
      "       {0} -v | --version\n"
      "\n"
      "Capsule's containerd shim v2 (runtime io.containerd.capsule.v2): runs each pod\n"
      "in its own microVM. containerd runs it; it is not meant to be run by hand.\n"
      "\n"
      "Actions:\n"
      "  start    start (or reuse) the pod's shim daemon and print its ttrpc address\n"
      "  delete   clean up after a shim that is gone; print a DeleteResponse\n"
      "\n"
      "Flags (Go syntax: -flag value, -flag=value, --flag=value):\n"
      "  -namespace NS        containerd namespace that owns the shim\n"
      "  -id ID               task id\n"
      "  -address ADDR        containerd's gRPC socket\n"
      "  -publish-binary BIN  containerd binary (for publishing events)\n"
      "  -bundle PATH         bundle directory (default: working directory)\n"
      "  -debug               debug logging\n"
      "  -v, --version        print the version and exit\n"
      "  -h, --help           print this help and exit\n"
      "Stdin of start may carry a serialized google.protobuf.Any of\n"
      "runtimeoptions.v1.Options (containerd's ConfigPath runtime option).\n",
      program);
}

}  // namespace capsule::shim::launcher
