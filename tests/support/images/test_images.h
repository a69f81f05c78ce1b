// The local OCI test images that tests/support/images builds at build time,
// and where their tarballs lie ($CAPSULE_BUILD_DIR is set for every test).
#pragma once

#include <cstdlib>
#include <string>

namespace capsule::testing {

inline constexpr const char* kBusyboxImage = "capsule.test/busybox:latest";
inline constexpr const char* kPauseImage = "capsule.test/pause:latest";
// busybox plus the host's iptables (nft by default, iptables-legacy too) and
// its xtables extensions: for privileged network containers.
inline constexpr const char* kNetadminImage = "capsule.test/netadmin:latest";

// "<build>/tests/support/images/<name>.oci.tar", name = "busybox" | "pause" | "netadmin".
inline std::string TestImageTar(const std::string& name) {
  const char* build = std::getenv("CAPSULE_BUILD_DIR");
  return std::string(build != nullptr ? build : ".") + "/tests/support/images/" + name + ".oci.tar";
}

}  // namespace capsule::testing
