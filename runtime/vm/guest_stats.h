// What a running guest says about itself, for the metrics endpoint: its
// memory and load, read from the guest's /proc through the agent on a
// connection of our own (the VM's owner keeps its own; nothing is taken
// over, no lock is taken). The guest is untrusted: what it answers is
// bounded and parsed strictly, and a VM that does not answer in time is an
// error for that VM alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::vm {

struct GuestStats {
  uint64_t mem_total_bytes = 0;
  uint64_t mem_available_bytes = 0;
  double load1 = 0;
};

Result<GuestStats> ReadGuestStats(const std::string& state_dir, std::chrono::milliseconds timeout);

// The parsers, for tests and fuzzing: /proc/meminfo's MemTotal and
// MemAvailable (kB), /proc/loadavg's first field.
Status ParseMeminfo(std::string_view text, GuestStats& out);
Status ParseLoadavg(std::string_view text, GuestStats& out);

}  // namespace capsule::vm
