// Builds Capsule's containerd drop-in (see dropin.h): the main file's CRI
// tables copied as they are, then the `capsule` runtime's tables.
#include "runtime/install/dropin.h"

#include <fmt/format.h>

#include "runtime/install/toml_scan.h"

namespace capsule::install {
namespace {

bool IsHeader(const TomlItem& it) {
  return it.kind == TomlItem::Kind::kTable || it.kind == TomlItem::Kind::kArrayTable;
}

bool HasPrefix(const std::vector<std::string>& key, const std::vector<std::string>& prefix) {
  if (key.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (key[i] != prefix[i]) return false;
  }
  return true;
}

// The header's key as TOML: bare parts as they are, others quoted.
std::string HeaderKey(const std::vector<std::string>& key) {
  std::string out;
  for (const std::string& part : key) {
    bool bare = !part.empty();
    for (char c : part) {
      bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
      bare = bare && ok;
    }
    if (!out.empty()) out += '.';
    out += bare ? part : TomlQuote(part);
  }
  return out;
}

// The main file's CRI tables, verbatim, in file order.
Result<std::string> CopyCriTables(const DropinInput& in, const std::vector<std::string>& cri) {
  ASSIGN_OR_RETURN(auto items, ScanToml(in.main_text));
  std::vector<std::string> runtime = cri;
  runtime.insert(runtime.end(), {"containerd", "runtimes", std::string(kHandlerName)});
  std::string out;
  const std::vector<std::string>* table = nullptr;  // current table's key; null = top level
  bool copying = false;
  for (const TomlItem& it : items) {
    if (IsHeader(it)) {
      table = &it.key;
      copying = HasPrefix(it.key, cri);
      if (HasPrefix(it.key, runtime)) {
        return FailedPrecondition(fmt::format("line {}: [{}] already defines a {} runtime; remove it first",
                                              it.line, HeaderKey(it.key), kHandlerName));
      }
    } else if (it.kind == TomlItem::Kind::kKeyValue) {
      std::vector<std::string> full = table != nullptr ? *table : std::vector<std::string>{};
      full.insert(full.end(), it.key.begin(), it.key.end());
      // A key whose table is above the CRI plugin's but that reaches into it
      // (plugins."io.containerd.grpc.v1.cri".x = ..., or an inline table).
      bool above = table == nullptr || !HasPrefix(*table, cri);
      if (above && (HasPrefix(full, cri) || (full.size() < cri.size() && HasPrefix(cri, full)))) {
        return FailedPrecondition(
            fmt::format("line {}: CRI plugin settings as a dotted key or inline table ({} = ...) cannot be "
                        "carried into the drop-in; write them as [{}] tables",
                        it.line, HeaderKey(full), HeaderKey(cri)));
      }
    }
    if (copying) out.append(in.main_text.substr(it.begin, it.end - it.begin));
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

}  // namespace

std::string_view CriPluginKey(int version) { return version == 1 ? "cri" : "io.containerd.grpc.v1.cri"; }

Result<std::string> BuildDropin(const DropinInput& in) {
  std::vector<std::string> cri = {"plugins", std::string(CriPluginKey(in.version))};
  auto copied = CopyCriTables(in, cri);
  if (!copied.ok()) return std::move(copied).status().WithContext(in.main_path);
  std::string runtime = HeaderKey(cri) + ".containerd.runtimes." + std::string(kHandlerName);
  std::string out = fmt::format(
      "# Capsule's containerd runtime handler, imported by {main} (written by\n"
      "# capsule-runtime install; removed by capsule-runtime uninstall).\n"
      "#\n"
      "# containerd 1.6 replaces the main file's whole CRI plugin table with an\n"
      "# imported one, so the main file's CRI tables are copied here as they were\n"
      "# at install time. After editing them in {main}, run\n"
      "# `capsule-runtime install` again to refresh this copy.\n",
      fmt::arg("main", in.main_path));
  if (in.version == 2) out += "version = 2\n";
  if (!copied->empty()) out += "\n# --- copied from " + in.main_path + " ---\n" + *copied + "# --- end of copy ---\n";
  out += fmt::format(
      "\n[{runtime}]\n"
      "  runtime_type = {type}\n"
      "  [{runtime}.options]\n"
      "    ConfigPath = {config}\n",
      fmt::arg("runtime", runtime), fmt::arg("type", TomlQuote(kRuntimeType)),
      fmt::arg("config", TomlQuote(in.capsule_config_path)));
  return out;
}

}  // namespace capsule::install
