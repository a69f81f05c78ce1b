// Milliseconds between two steady-clock points, for the timing lines the
// runtime logs (one definition instead of a lambda in every caller), and
// the same as whole microseconds for the timing fields the agent answers.
#pragma once

#include <chrono>
#include <cstdint>

namespace capsule {

inline double MsBetween(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

inline double MsSince(std::chrono::steady_clock::time_point from) {
  return MsBetween(from, std::chrono::steady_clock::now());
}

// Milliseconds as a uint32 microseconds field, clamped (0 to 71 minutes),
// and such a field back as milliseconds.
inline uint32_t MicrosField(double ms) {
  const double us = ms * 1000;
  if (!(us > 0)) return 0;
  return us >= 4294967295.0 ? UINT32_MAX : static_cast<uint32_t>(us);
}
inline double MsOfMicrosField(uint32_t us) { return us / 1000.0; }

}  // namespace capsule
