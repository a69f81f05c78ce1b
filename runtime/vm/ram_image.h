// A clone's guest RAM, filled from a template's RAM image into a memfd.
// Only the image's allocated extents are copied (SEEK_DATA/SEEK_HOLE); its
// holes stay holes in the memfd, zero pages allocated on first touch.
//   CopyRamImage    the virtio-fs device set: shared memory of the clone's
//                   own, because its vhost-user back ends (virtiofsd,
//                   capsule-vsockd) map guest RAM themselves and must see the
//                   guest's writes (POOL-NOTES.md: CoW and vhost-user do not
//                   mix). A full copy per clone.
//   SealedRamImage  the dense device set: one copy per template, sealed
//                   against writes, growth, shrinking and further seals, that
//                   every clone's VMM maps private (copy-on-write). The
//                   kernel refuses any write to it (write(2), a shared
//                   writable mapping, a punched hole) whatever a VMM does;
//                   QEMU 7.2 opens a memory-backend-file read-write and has
//                   no rom=off (8.2), so a template file it could open would
//                   be one it could change. Unwritten pages are one copy in
//                   shared memory for all clones.
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
Result<RamCopy> SealedRamImage(const std::string& image_path, uint64_t size_bytes, std::string_view memfd_name);

// Turns every all-zero page of a RAM image into a hole, so clones copy
// less (about a fifth of a booted guest's touched RAM is zero pages).
// Returns the bytes punched. For a template whose VM has stopped.
Result<uint64_t> PunchZeroPages(const std::string& image_path);

}  // namespace capsule::vm
