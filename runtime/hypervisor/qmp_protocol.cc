// QMP framing and message classification. Input comes from a process we do
// not trust to be well-formed (it may be dying, or not QEMU at all), so
// every field is type-checked and nlohmann_json runs without exceptions.
#include "runtime/hypervisor/qmp_protocol.h"

#include <fmt/format.h>

namespace capsule::hypervisor {
namespace {

using nlohmann::json;

const json* Member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

int IntOr(const json* j, int fallback) {
  if (j == nullptr || !j->is_number_integer()) return fallback;
  return static_cast<int>(j->get<int64_t>());
}

int64_t Int64Or(const json* j, int64_t fallback) {
  if (j == nullptr || !j->is_number_integer()) return fallback;
  return j->get<int64_t>();
}

Result<QmpMessage> ParseGreeting(const json& qmp) {
  if (!qmp.is_object()) return InvalidArgument("QMP: greeting 'QMP' is not an object");
  QmpGreeting g;
  if (const json* version = Member(qmp, "version")) {
    const json* qemu = Member(*version, "qemu");
    if (qemu != nullptr) {
      g.major = IntOr(Member(*qemu, "major"), 0);
      g.minor = IntOr(Member(*qemu, "minor"), 0);
      g.micro = IntOr(Member(*qemu, "micro"), 0);
    }
    const json* package = Member(*version, "package");
    if (package != nullptr && package->is_string()) g.package = package->get<std::string>();
  }
  if (const json* caps = Member(qmp, "capabilities")) {
    if (!caps->is_array()) return InvalidArgument("QMP: greeting capabilities is not an array");
    for (const json& c : *caps) {
      if (c.is_string()) g.capabilities.push_back(c.get<std::string>());
    }
  }
  return QmpMessage(std::move(g));
}

Result<std::optional<uint64_t>> ParseId(const json& msg) {
  const json* id = Member(msg, "id");
  if (id == nullptr) return std::optional<uint64_t>();
  // We only ever send unsigned integer ids; anything else is not ours.
  if (!id->is_number_unsigned()) return InvalidArgument("QMP: reply id is not an unsigned integer");
  return std::optional<uint64_t>(id->get<uint64_t>());
}

Result<QmpMessage> ParseReply(const json& msg) {
  QmpReply r;
  ASSIGN_OR_RETURN(r.id, ParseId(msg));
  if (const json* ret = Member(msg, "return")) {
    r.value = *ret;
    return QmpMessage(std::move(r));
  }
  const json* err = Member(msg, "error");
  if (!err->is_object()) return InvalidArgument("QMP: 'error' is not an object");
  r.ok = false;
  const json* cls = Member(*err, "class");
  const json* desc = Member(*err, "desc");
  r.error_class = (cls != nullptr && cls->is_string()) ? cls->get<std::string>() : "GenericError";
  r.error_desc = (desc != nullptr && desc->is_string()) ? desc->get<std::string>() : "(no description)";
  return QmpMessage(std::move(r));
}

Result<QmpMessage> ParseEvent(const json& msg) {
  const json* name = Member(msg, "event");
  if (!name->is_string()) return InvalidArgument("QMP: event name is not a string");
  QmpEvent e;
  e.name = name->get<std::string>();
  const json* data = Member(msg, "data");
  e.data = (data != nullptr && data->is_object()) ? *data : json::object();
  if (const json* ts = Member(msg, "timestamp")) {
    e.seconds = Int64Or(Member(*ts, "seconds"), 0);
    e.microseconds = Int64Or(Member(*ts, "microseconds"), 0);
  }
  return QmpMessage(std::move(e));
}

}  // namespace

std::string QmpGreeting::VersionString() const { return fmt::format("{}.{}.{}", major, minor, micro); }

Status QmpLineReader::Feed(std::string_view bytes) {
  // Compact before growing so a long-lived connection does not keep every
  // byte it ever read.
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
  if (buf_.size() - pos_ > kMaxQmpMessageBytes && buf_.find('\n', pos_) == std::string::npos)
    return ResourceExhausted(fmt::format("QMP: message larger than {} bytes without a line end", kMaxQmpMessageBytes));
  return Status::Ok();
}

std::optional<std::string> QmpLineReader::Next() {
  size_t nl = buf_.find('\n', pos_ + scanned_);
  if (nl == std::string::npos) {
    scanned_ = buf_.size() - pos_;
    return std::nullopt;
  }
  size_t end = nl;
  if (end > pos_ && buf_[end - 1] == '\r') --end;
  std::string line = buf_.substr(pos_, end - pos_);
  pos_ = nl + 1;
  scanned_ = 0;
  return line;
}

Result<QmpMessage> ParseQmpMessage(std::string_view line) {
  json msg = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded()) return InvalidArgument(fmt::format("QMP: not JSON: '{}'", line.substr(0, 120)));
  if (!msg.is_object()) return InvalidArgument("QMP: message is not a JSON object");
  if (const json* qmp = Member(msg, "QMP")) return ParseGreeting(*qmp);
  if (Member(msg, "event") != nullptr) return ParseEvent(msg);
  if (Member(msg, "return") != nullptr || Member(msg, "error") != nullptr) return ParseReply(msg);
  return InvalidArgument(fmt::format("QMP: object is neither greeting, reply nor event: {}", JsonForLog(msg, 120)));
}

std::string EncodeQmpCommand(std::string_view command, const json& arguments, uint64_t id) {
  json msg = {{"execute", std::string(command)}, {"id", id}};
  if (!arguments.is_null() && !(arguments.is_object() && arguments.empty())) msg["arguments"] = arguments;
  return msg.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

Status QmpErrorStatus(std::string_view command, const QmpReply& reply) {
  Code code = Code::kUnknown;
  const std::string& cls = reply.error_class;
  if (cls == "GenericError" || cls == "DeviceNotActive") code = Code::kFailedPrecondition;
  else if (cls == "CommandNotFound") code = Code::kUnimplemented;
  else if (cls == "DeviceNotFound") code = Code::kNotFound;
  else if (cls == "KVMMissingCap") code = Code::kUnavailable;
  return Status(code, fmt::format("QMP {}: {}: {}", command, cls, reply.error_desc));
}

std::string JsonForLog(const json& j, size_t max_chars) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > max_chars) {
    s.resize(max_chars);
    s += "...";
  }
  return s;
}

}  // namespace capsule::hypervisor
