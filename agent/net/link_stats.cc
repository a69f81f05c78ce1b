// One small file per counter (statistics/rx_bytes, ...), as the kernel's
// net-sysfs exposes them.
#include "agent/net/link_stats.h"

#include <dirent.h>

#include <algorithm>
#include <charconv>

#include "runtime/common/file_util.h"

namespace capsule::agent::net {
namespace {

// A counter that cannot be read (an interface vanishing meanwhile) reads 0.
uint64_t Counter(const std::string& dir, const char* name) {
  auto text = ReadFile(dir + "/statistics/" + name);
  if (!text.ok()) return 0;
  uint64_t v = 0;
  std::from_chars(text->data(), text->data() + text->size(), v);
  return v;
}

}  // namespace

Result<std::vector<InterfaceStats>> ReadInterfaceStats(const std::string& sys_class_net) {
  DIR* d = ::opendir(sys_class_net.c_str());
  if (d == nullptr) return ErrnoStatus("open " + sys_class_net);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != ".." && name != "lo") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::vector<InterfaceStats> out;
  for (const auto& name : names) {
    const std::string dir = sys_class_net + "/" + name;
    InterfaceStats s;
    s.name = name;
    s.rx_bytes = Counter(dir, "rx_bytes");
    s.rx_packets = Counter(dir, "rx_packets");
    s.rx_errors = Counter(dir, "rx_errors");
    s.rx_dropped = Counter(dir, "rx_dropped");
    s.tx_bytes = Counter(dir, "tx_bytes");
    s.tx_packets = Counter(dir, "tx_packets");
    s.tx_errors = Counter(dir, "tx_errors");
    s.tx_dropped = Counter(dir, "tx_dropped");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace capsule::agent::net
