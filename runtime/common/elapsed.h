// Milliseconds between two steady-clock points, for the timing lines the
// runtime logs (one definition instead of a lambda in every caller).
#pragma once

#include <chrono>

namespace capsule {

inline double MsBetween(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

inline double MsSince(std::chrono::steady_clock::time_point from) {
  return MsBetween(from, std::chrono::steady_clock::now());
}

}  // namespace capsule
