// See ram_image.h. Each data extent of the image goes into the memfd with
// sendfile(2): the kernel copies page cache into new shmem pages directly,
// one copy and no page faults (measured here: 63-96 ms for 126 MiB, where
// pread() into a mapping of the memfd took 600-680 ms, most of it faults;
// copy_file_range refuses to cross filesystems on newer kernels).
#include "runtime/common/reasons.h"
#include "runtime/vm/ram_image.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace capsule::vm {
namespace {

// A page of the image that holds only zeroes is left a hole (PunchZeroPages).
constexpr size_t kPage = 4096;

Status SendExtent(int src, int dst, off_t from, off_t to, const std::string& what) {
  if (::lseek(dst, from, SEEK_SET) != from) return ErrnoStatus("seek the copy of " + what);
  off_t at = from;
  while (at < to) {
    ssize_t n = ::sendfile(dst, src, &at, static_cast<size_t>(to - at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(fmt::format("copy {} at {}", what, at));
    if (n == 0) return Status(Code::kDataLoss, fmt::format("{}: ends at {} inside a data extent", what, at));
  }
  return Status::Ok();
}

bool AllZero(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

Result<RamCopy> CopyImage(const std::string& image_path, uint64_t size_bytes, std::string_view memfd_name,
                          unsigned memfd_flags) {
  const std::string what = "RAM image " + image_path;
  UniqueFd src(::open(image_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!src) return ErrnoStatus("open " + what);
  struct stat st{};
  if (::fstat(src.get(), &st) != 0) return ErrnoStatus("stat " + what);
  if (!S_ISREG(st.st_mode)) return FailedPrecondition(what + " is not a regular file")
      .WithReason(reason::kWrongFileType);
  if (static_cast<uint64_t>(st.st_size) != size_bytes)
    return FailedPrecondition(fmt::format("{} holds {} bytes, the guest has {}", what, st.st_size, size_bytes));

  RamCopy out;
  out.memfd = UniqueFd(::memfd_create(std::string(memfd_name).c_str(), MFD_CLOEXEC | memfd_flags));
  if (!out.memfd) return ErrnoStatus("memfd_create for a copy of " + what);
  if (::ftruncate(out.memfd.get(), static_cast<off_t>(size_bytes)) != 0) return ErrnoStatus("size the copy of " + what);
  off_t pos = 0;
  const off_t end = static_cast<off_t>(size_bytes);
  while (pos < end) {
    off_t data = ::lseek(src.get(), pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // only a hole is left
    if (data < 0) return ErrnoStatus("seek data in " + what);
    off_t hole = ::lseek(src.get(), data, SEEK_HOLE);
    if (hole < 0) return ErrnoStatus("seek hole in " + what);
    RETURN_IF_ERROR(SendExtent(src.get(), out.memfd.get(), data, hole, what));
    out.copied += static_cast<uint64_t>(hole - data);
    pos = hole;
  }
  return out;
}

}  // namespace

Result<RamCopy> CopyRamImage(const std::string& image_path, uint64_t size_bytes, std::string_view memfd_name) {
  return CopyImage(image_path, size_bytes, memfd_name, 0);
}

Result<RamCopy> SealedRamImage(const std::string& image_path, uint64_t size_bytes, std::string_view memfd_name) {
  ASSIGN_OR_RETURN(RamCopy out, CopyImage(image_path, size_bytes, memfd_name, MFD_ALLOW_SEALING));
  constexpr int kSeals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (::fcntl(out.memfd.get(), F_ADD_SEALS, kSeals) != 0) return ErrnoStatus("seal the copy of RAM image " + image_path);
  // The memfd is the copy clones read from now; the file's page cache
  // would be a second one until reclaimed.
  UniqueFd src(::open(image_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (src) (void)::posix_fadvise(src.get(), 0, 0, POSIX_FADV_DONTNEED);
  return out;
}

Result<uint64_t> PunchZeroPages(const std::string& image_path) {
  const std::string what = "RAM image " + image_path;
  UniqueFd fd(::open(image_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return ErrnoStatus("open " + what);
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + what);
  if (!S_ISREG(st.st_mode) || st.st_size == 0) return FailedPrecondition(what + " is not a non-empty regular file");
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return ErrnoStatus("map " + what);
  const char* p = static_cast<const char*>(map);
  uint64_t punched = 0;
  Status st_out;
  off_t pos = 0;
  while (pos < static_cast<off_t>(size) && st_out.ok()) {
    off_t data = ::lseek(fd.get(), pos, SEEK_DATA);
    if (data < 0) break;  // ENXIO: the rest is a hole
    off_t hole = ::lseek(fd.get(), data, SEEK_HOLE);
    if (hole < 0) {
      st_out = ErrnoStatus("seek hole in " + what);
      break;
    }
    // Runs of zero pages become one hole each.
    off_t run = -1;
    for (off_t at = data; at <= hole; at += static_cast<off_t>(kPage)) {
      const bool zero = at < hole && AllZero(p + at, std::min<size_t>(kPage, static_cast<size_t>(hole - at)));
      if (zero && run < 0) run = at;
      if (!zero && run >= 0) {
        if (::fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, run, at - run) != 0) {
          st_out = ErrnoStatus("punch zero pages of " + what);
          break;
        }
        punched += static_cast<uint64_t>(at - run);
        run = -1;
      }
    }
    pos = hole;
  }
  ::munmap(map, size);
  if (!st_out.ok()) return st_out;
  return punched;
}

}  // namespace capsule::vm
