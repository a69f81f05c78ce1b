// Parsers for cgroup v2 interface files (cgroup-v2.rst formats): flat keyed
// ("key value" lines), nested keyed ("8:0 rbytes=1 wbytes=2"), and single
// values ("max" -> UINT64_MAX). Pure functions, unit-tested.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/engine/cgroup_manager.h"

namespace capsule::engine {

// "usage_usec 10\nuser_usec 4\n" -> {{"usage_usec",10},{"user_usec",4}}.
// Lines that do not parse are skipped.
std::vector<std::pair<std::string, uint64_t>> ParseFlatKeyed(std::string_view text);
uint64_t FlatValue(const std::vector<std::pair<std::string, uint64_t>>& kv, std::string_view key);

// "123\n" -> 123; "max\n" -> UINT64_MAX; nullopt otherwise.
std::optional<uint64_t> ParseSingleValue(std::string_view text);

// io.stat lines -> entries (unknown keys such as dbytes ignored).
std::vector<CgroupMetrics::IoEntry> ParseIoStat(std::string_view text);

// cgroup.events "frozen"/"populated" value, nullopt when absent.
std::optional<uint64_t> EventValue(std::string_view events_text, std::string_view key);

// OCI cpu.shares (2..262144) -> cgroup v2 cpu.weight (1..10000).
uint64_t SharesToWeight(uint64_t shares);
// OCI blkio weight (10..1000) -> io.weight (1..10000).
uint64_t BlkioWeightToIoWeight(uint64_t weight);
// "max" for negative values, the number otherwise.
std::string LimitString(int64_t value);

}  // namespace capsule::engine
