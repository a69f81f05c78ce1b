// cgroup v2 file formats and OCI -> v2 unit conversions.
#include "agent/engine/cgroup_stats.h"

#include <charconv>
#include <limits>

namespace capsule::engine {
namespace {

std::optional<uint64_t> ParseU64(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Splits `text` into lines without the trailing newline.
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty()) out.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace

uint64_t CgroupMetrics::Memory::Stat(const std::string& key) const { return FlatValue(stat, key); }

std::vector<std::pair<std::string, uint64_t>> ParseFlatKeyed(std::string_view text) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (std::string_view line : Lines(text)) {
    size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    auto v = ParseU64(line.substr(sp + 1));
    if (!v) continue;
    out.emplace_back(std::string(line.substr(0, sp)), *v);
  }
  return out;
}

uint64_t FlatValue(const std::vector<std::pair<std::string, uint64_t>>& kv, std::string_view key) {
  for (const auto& [k, v] : kv) {
    if (k == key) return v;
  }
  return 0;
}

std::optional<uint64_t> ParseSingleValue(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text == "max") return std::numeric_limits<uint64_t>::max();
  return ParseU64(text);
}

std::vector<CgroupMetrics::IoEntry> ParseIoStat(std::string_view text) {
  std::vector<CgroupMetrics::IoEntry> out;
  for (std::string_view line : Lines(text)) {
    size_t sp = line.find(' ');
    std::string_view dev = line.substr(0, sp);
    size_t colon = dev.find(':');
    if (colon == std::string_view::npos) continue;
    auto major = ParseU64(dev.substr(0, colon));
    auto minor = ParseU64(dev.substr(colon + 1));
    if (!major || !minor) continue;
    CgroupMetrics::IoEntry e{.major = *major, .minor = *minor};
    std::string_view rest = sp == std::string_view::npos ? "" : line.substr(sp + 1);
    while (!rest.empty()) {
      size_t next = rest.find(' ');
      std::string_view kv = rest.substr(0, next);
      size_t eq = kv.find('=');
      auto v = eq == std::string_view::npos ? std::nullopt : ParseU64(kv.substr(eq + 1));
      if (v) {
        std::string_view k = kv.substr(0, eq);
        if (k == "rbytes") e.rbytes = *v;
        else if (k == "wbytes") e.wbytes = *v;
        else if (k == "rios") e.rios = *v;
        else if (k == "wios") e.wios = *v;
      }
      if (next == std::string_view::npos) break;
      rest.remove_prefix(next + 1);
    }
    out.push_back(e);
  }
  return out;
}

std::optional<uint64_t> EventValue(std::string_view events_text, std::string_view key) {
  for (const auto& [k, v] : ParseFlatKeyed(events_text)) {
    if (k == key) return v;
  }
  return std::nullopt;
}

uint64_t SharesToWeight(uint64_t shares) {
  // Linear map of [2, 262144] onto [1, 10000], as runc/crun convert.
  if (shares < 2) shares = 2;
  if (shares > 262144) shares = 262144;
  return 1 + ((shares - 2) * 9999) / 262142;
}

uint64_t BlkioWeightToIoWeight(uint64_t weight) {
  // Linear map of [10, 1000] onto [1, 10000].
  if (weight < 10) weight = 10;
  if (weight > 1000) weight = 1000;
  return 1 + ((weight - 10) * 9999) / 990;
}

std::string LimitString(int64_t value) { return value < 0 ? "max" : std::to_string(value); }

}  // namespace capsule::engine
