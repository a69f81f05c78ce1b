// Parsing containerd's stdio URIs (the subset of RFC 3986 that Go's
// url.Parse gives meaning to here: scheme, authority, path, query).
#include "shim/io/stdio_uri.h"

#include <cctype>

#include <fmt/format.h>

namespace capsule::shim::io {
namespace {

struct Uri {
  std::string scheme;  // lower-cased; "" for a plain path
  std::string path;    // decoded
  std::string query;   // raw
};

bool IsSchemeChar(char c, bool first) {
  if (std::isalpha(static_cast<unsigned char>(c))) return true;
  return !first && (std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.');
}

Result<Uri> ParseUri(const std::string& field, const std::string& s) {
  Uri u;
  size_t colon = s.find(':');
  bool has_scheme = colon != std::string::npos && colon > 0;
  for (size_t i = 0; has_scheme && i < colon; ++i) has_scheme = IsSchemeChar(s[i], i == 0);
  if (!has_scheme) {
    u.path = s;  // a plain path: a FIFO
    return u;
  }
  for (size_t i = 0; i < colon; ++i) u.scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i])));
  std::string rest = s.substr(colon + 1);
  if (size_t hash = rest.find('#'); hash != std::string::npos) rest.resize(hash);
  if (size_t q = rest.find('?'); q != std::string::npos) {
    u.query = rest.substr(q + 1);
    rest.resize(q);
  }
  if (rest.starts_with("//")) {
    // The authority (host) means nothing for file:// or binary://.
    size_t slash = rest.find('/', 2);
    rest = slash == std::string::npos ? "" : rest.substr(slash);
  }
  auto path = PercentDecode(rest, false);
  if (!path.ok()) return std::move(path).status().WithContext(fmt::format("{} \"{}\"", field, s));
  u.path = std::move(*path);
  return u;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<std::string> PercentDecode(const std::string& in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size()) return InvalidArgument(fmt::format("truncated escape at offset {}", i));
      int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgument(fmt::format("bad escape \"{}\" at offset {}", in.substr(i, 3), i));
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (plus_is_space && in[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

Result<std::vector<std::string>> QueryArgs(const std::string& query) {
  std::vector<std::pair<std::string, std::string>> seen;
  size_t pos = 0;
  while (pos <= query.size() && !query.empty()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string part = query.substr(pos, amp - pos);
    pos = amp + 1;
    if (part.empty()) continue;
    size_t eq = part.find('=');
    ASSIGN_OR_RETURN(std::string key, PercentDecode(part.substr(0, eq), true));
    std::string value;
    if (eq != std::string::npos) {
      ASSIGN_OR_RETURN(value, PercentDecode(part.substr(eq + 1), true));
    }
    bool dup = false;
    for (const auto& [k, v] : seen) dup = dup || k == key;
    if (!dup) seen.emplace_back(std::move(key), std::move(value));
  }
  std::vector<std::string> args;
  for (auto& [k, v] : seen) {
    args.push_back(std::move(k));
    args.push_back(std::move(v));
  }
  return args;
}

Result<StdioTarget> ResolveStdio(const StdioSpec& spec) {
  StdioTarget t;
  if (spec.stdin_path.empty() && spec.stdout_path.empty() && spec.stderr_path.empty()) return t;
  if (!spec.stdin_path.empty() && spec.stdin_path[0] != '/')
    return InvalidArgument(fmt::format("stdin \"{}\": want an absolute FIFO path", spec.stdin_path));
  t.stdin_fifo = spec.stdin_path;
  ASSIGN_OR_RETURN(Uri out, ParseUri("stdout", spec.stdout_path));
  if (out.scheme.empty() || out.scheme == "fifo") {
    t.kind = StdioKind::kFifo;
    t.stdout_path = out.path;
    t.stderr_path = spec.terminal ? "" : spec.stderr_path;
    for (const std::string* p : {&t.stdout_path, &t.stderr_path}) {
      if (!p->empty() && (*p)[0] != '/')
        return InvalidArgument(fmt::format("stdio FIFO \"{}\": want an absolute path", *p));
    }
  } else if ((out.scheme == "file" || out.scheme == "binary") && (out.path.empty() || out.path[0] != '/')) {
    return InvalidArgument(fmt::format("stdout \"{}\": want an absolute path", spec.stdout_path));
  } else if (out.scheme == "file") {
    t.kind = StdioKind::kFile;
    t.stdout_path = out.path;
    t.stderr_path = spec.terminal ? "" : out.path;
  } else if (out.scheme == "binary") {
    t.kind = StdioKind::kBinary;
    t.binary = out.path;
    auto args = QueryArgs(out.query);
    if (!args.ok()) return std::move(args).status().WithContext("stdout \"" + spec.stdout_path + "\" query");
    t.binary_args = std::move(*args);
  } else {
    return InvalidArgument(fmt::format("stdout \"{}\": unknown stdio scheme \"{}\" (want a FIFO path, file:// or binary://)",
                                       spec.stdout_path, out.scheme));
  }
  return t;
}

}  // namespace capsule::shim::io
