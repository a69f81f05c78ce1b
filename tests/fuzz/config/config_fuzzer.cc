// libFuzzer target for the config loader: any bytes either load or give an
// error (never a crash or an escaped yaml-cpp exception), and a config that
// loads writes out as YAML that loads back to the same config.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  auto cfg = capsule::config::LoadString(yaml, "fuzz.yaml");
  if (!cfg.ok()) {
    if (cfg.status().message().find("fuzz.yaml") == std::string::npos) __builtin_trap();  // errors name the file
    return 0;
  }
  const std::string out = capsule::config::ToYaml(*cfg);
  auto again = capsule::config::LoadString(out, "fuzz2.yaml");
  if (!again.ok() || capsule::config::ToYaml(*again) != out) __builtin_trap();
  return 0;
}
