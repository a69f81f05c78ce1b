// SHA-256 as lower-case hex: install manifests, OCI digests, cache keys and
// short stable names. Its own library (capsule_sha256), so the guest's
// static binaries that link capsule_common do not carry libcrypto.
#pragma once

#include <string>
#include <string_view>

namespace capsule {

std::string Sha256Hex(std::string_view data);

}  // namespace capsule
