// A minimal newc reader for tests: the writer's output parsed back field by
// field, so header mistakes show up as wrong values, not just as "differs".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace capsule::deploy::testing {

struct CpioEntry {
  std::string name;
  uint32_t ino, mode, uid, gid, nlink, mtime, rdev_major, rdev_minor;
  std::string data;
};

// Parses up to and including TRAILER!!! (not returned); throws nothing, an
// empty vector plus `error` on malformed input.
inline std::vector<CpioEntry> ReadCpio(std::string_view in, std::string* error) {
  std::vector<CpioEntry> out;
  size_t pos = 0;
  auto hex = [&](size_t field) {
    return static_cast<uint32_t>(std::stoul(std::string(in.substr(pos + 6 + field * 8, 8)), nullptr, 16));
  };
  auto align = [](size_t n) { return (n + 3) & ~size_t{3}; };
  while (pos + 110 <= in.size()) {
    if (in.substr(pos, 6) != "070701") {
      *error = "bad magic at " + std::to_string(pos);
      return {};
    }
    CpioEntry e{};
    e.ino = hex(0), e.mode = hex(1), e.uid = hex(2), e.gid = hex(3), e.nlink = hex(4), e.mtime = hex(5);
    uint32_t size = hex(6), namesize = hex(11);
    e.rdev_major = hex(9), e.rdev_minor = hex(10);
    e.name = std::string(in.substr(pos + 110, namesize - 1));
    pos = align(pos + 110 + namesize);
    e.data = std::string(in.substr(pos, size));
    pos = align(pos + size);
    if (e.name == "TRAILER!!!") {
      if (pos != in.size()) *error = "data after the trailer";
      return out;
    }
    out.push_back(std::move(e));
  }
  *error = "no trailer";
  return {};
}

}  // namespace capsule::deploy::testing
