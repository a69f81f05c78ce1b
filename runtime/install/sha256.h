// SHA-256 as lower-case hex, for the install manifest and OCI digests.
#pragma once

#include <string>
#include <string_view>

namespace capsule::install {

std::string Sha256Hex(std::string_view data);

}  // namespace capsule::install
