#include "agent/modules/module_aliases.h"

#include <fnmatch.h>

#include <algorithm>
#include <sstream>

#include "agent/modules/module_index.h"

namespace capsule::agent::modules {
namespace {

std::vector<std::string> Words(std::string_view line) {
  std::istringstream in{std::string(line)};
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(std::move(w));
  return out;
}

}  // namespace

ModuleAliases ModuleAliases::Parse(std::string_view modules_alias) {
  ModuleAliases a;
  for (const std::string& line : ModuleFileLines(modules_alias)) {
    std::vector<std::string> w = Words(line);
    if (w.size() == 3 && w[0] == "alias") a.aliases_.emplace_back(std::move(w[1]), NormalizeModuleName(w[2]));
  }
  return a;
}

std::vector<std::string> ModuleAliases::Resolve(std::string_view request) const {
  const std::string req(request);
  std::vector<std::string> out;
  for (const auto& [pattern, module] : aliases_) {
    if (::fnmatch(pattern.c_str(), req.c_str(), 0) == 0 && std::find(out.begin(), out.end(), module) == out.end())
      out.push_back(module);
  }
  return out;
}

std::map<std::string, std::vector<std::string>> ParseSoftdepPre(std::string_view modules_softdep) {
  std::map<std::string, std::vector<std::string>> out;
  for (const std::string& line : ModuleFileLines(modules_softdep)) {
    std::vector<std::string> w = Words(line);
    if (w.size() < 3 || w[0] != "softdep") continue;
    bool pre = false;
    auto& list = out[NormalizeModuleName(w[1])];
    for (size_t i = 2; i < w.size(); ++i) {
      if (w[i] == "pre:") {
        pre = true;
      } else if (w[i] == "post:") {
        pre = false;
      } else if (pre) {
        list.push_back(w[i]);
      }
    }
  }
  return out;
}

}  // namespace capsule::agent::modules
