// A clone's guest RAM: shared memory of its own (a memfd), filled from a
// template's RAM image. Shared, not a private copy-on-write mapping of the
// image, because the clone's vhost-user back ends (virtiofsd,
// capsule-vsockd) map guest RAM themselves and must see the guest's writes
// (POOL-NOTES.md: CoW and vhost-user do not mix). Only the image's
// allocated extents are copied (SEEK_DATA/SEEK_HOLE); its holes stay holes
// in the memfd, zero pages the guest allocates on first touch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"
#include "runtime/common/unique_fd.h"

namespace capsule::vm {

struct RamCopy {
  UniqueFd memfd;        // sized to the image, MFD_CLOEXEC
  uint64_t copied = 0;   // bytes of data copied (the rest are holes)
};

// Errors name the image. The image must be a regular file of exactly
// `size_bytes` (the guest's RAM size): anything else is not our template.
Result<RamCopy> CopyRamImage(const std::string& image_path, uint64_t size_bytes, std::string_view memfd_name);

// Turns every all-zero page of a RAM image into a hole, so clones copy
// less (about a fifth of a booted guest's touched RAM is zero pages).
// Returns the bytes punched. For a template whose VM has stopped.
Result<uint64_t> PunchZeroPages(const std::string& image_path);

}  // namespace capsule::vm
