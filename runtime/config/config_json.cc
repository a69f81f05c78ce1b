// ToJson: the effective configuration as JSON, made from the same YAML that
// ToYaml prints (one description of the fields, not two). Scalars keep
// their YAML meaning: true/false are booleans, integers are numbers.
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>

#include "runtime/config/config.h"

namespace capsule::config {
namespace {

nlohmann::json Scalar(const std::string& s, const std::string& tag) {
  if (tag == "!") return s;  // quoted in the YAML: a string
  if (s == "true") return true;
  if (s == "false") return false;
  if (!s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) != 0 || (s[0] == '-' && s.size() > 1))) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end != nullptr && *end == '\0') return v;
  }
  return s;
}

nlohmann::json Convert(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json j = nlohmann::json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = Convert(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& e : n) j.push_back(Convert(e));
      return j;
    }
    case YAML::NodeType::Scalar:
      return Scalar(n.Scalar(), n.Tag());
    default:
      return nullptr;
  }
}

}  // namespace

nlohmann::json ToJson(const Config& config) { return Convert(YAML::Load(ToYaml(config))); }

}  // namespace capsule::config
