// Guest-wide knobs the host turns when it claims a VM: the wall clock and the
// kernel's entropy pool; plus facts the agent reports (kernel release, time
// since boot).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent::system {

// Largest AddRandomness payload; the host sends a few hundred bytes.
inline constexpr size_t kMaxEntropyBytes = 64 * 1024;

// INVALID_ARGUMENT unless seconds >= 0 and 0 <= nanos < 1e9.
Status ValidateTime(int64_t seconds, int64_t nanos);
// clock_settime(CLOCK_REALTIME) after ValidateTime.
Status SetRealtimeClock(int64_t seconds, int64_t nanos);
// Mixes `data` into the pool and credits 8 bits per byte (RNDADDENTROPY on
// /dev/random: the host's bytes come from its own CSPRNG), then reseeds the
// CRNG from the pool (RNDRESEEDCRNG) so the next random bytes any process
// reads depend on them, not on the state the VM was booted (or saved) with.
Status AddEntropy(std::string_view data);
// uname(2) release, "6.1.0-57-amd64".
std::string KernelRelease();
// CLOCK_BOOTTIME in microseconds: time since the kernel started.
uint64_t BootTimeMicros();

}  // namespace capsule::agent::system
