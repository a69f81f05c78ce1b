// Storage drivers -> mount(2) calls. A bind mount takes its flags only on a
// second, remounting call (the kernel ignores them on MS_BIND), and the
// propagation type is always its own call, so one storage may be up to three
// mount(2)s; any failure unmounts what the first one did.
#include "agent/storage/storage.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

#include "agent/storage/block_device.h"
#include "agent/storage/guest_path.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/unique_fd.h"

namespace capsule::agent::storage {
namespace {

const log::Logger kLog("storage");

constexpr size_t kVirtioFsTagMax = 36;  // VIRTIO_FS tag field size, from linux/virtio_fs.h
constexpr size_t kBlockSerialMax = 20;  // VIRTIO_BLK_ID_BYTES, from linux/virtio_blk.h

// Flags a bind remount may change; the rest belong to the first mount.
constexpr unsigned long kBindRemountFlags =
    MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME;

Status CheckFstype(const StorageSpec& s, std::string_view field, std::initializer_list<std::string_view> allowed) {
  if (s.fstype.empty()) return Status::Ok();
  for (auto a : allowed) {
    if (s.fstype == a) return Status::Ok();
  }
  return InvalidArgument(fmt::format("{}.fstype '{}' does not fit driver {}", field, s.fstype, s.driver));
}

Status ValidateSource(const StorageSpec& s, std::string_view field) {
  std::string source_field = fmt::format("{}.source", field);
  if (s.driver == kDriverVirtioFs) {
    if (s.source.empty() || s.source.size() > kVirtioFsTagMax) {
      return InvalidArgument(fmt::format("{} must be a virtio-fs tag of 1..{} bytes", source_field, kVirtioFsTagMax));
    }
    return CheckFstype(s, field, {"virtiofs"});
  }
  if (s.driver == kDriverTmpfs) return CheckFstype(s, field, {"tmpfs"});
  if (s.driver == kDriverBind) {
    RETURN_IF_ERROR(CheckAbsolutePath(source_field, s.source));
    return CheckFstype(s, field, {"bind", "none"});
  }
  if (s.driver == kDriverBlock) {
    bool ok = !s.source.empty() && s.source.size() <= kBlockSerialMax;
    for (char c : s.source) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
    if (!ok)
      return InvalidArgument(fmt::format("{} must be a disk serial of 1..{} chars of [A-Za-z0-9_.-]", source_field,
                                         kBlockSerialMax));
    if (s.fstype != "erofs") return InvalidArgument(fmt::format("{}.fstype must be erofs for driver blk", field));
    return Status::Ok();
  }
  return InvalidArgument(fmt::format("{}.driver '{}' is not supported (virtiofs, tmpfs, bind, blk)", field, s.driver));
}

Status CreateMountPoint(const StorageSpec& s) {
  bool file_target = false;
  if (s.driver == kDriverBind) {
    struct stat st{};
    if (::stat(s.source.c_str(), &st) != 0) return ErrnoStatus("stat bind source " + s.source);
    file_target = !S_ISDIR(st.st_mode);
  }
  if (!file_target) return MkdirAll(s.mount_point);
  std::string parent = s.mount_point.substr(0, s.mount_point.rfind('/'));
  if (!parent.empty()) RETURN_IF_ERROR(MkdirAll(parent));
  UniqueFd fd(::open(s.mount_point.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return ErrnoStatus("create mount point " + s.mount_point);
  return Status::Ok();
}

// The first mount(2): the filesystem itself, or the bind.
Status MountFilesystem(const StorageSpec& s, const MountOptions& o) {
  std::string source = s.source;
  const char* type = nullptr;
  unsigned long flags = o.flags;
  if (s.driver == kDriverVirtioFs) {
    type = "virtiofs";
  } else if (s.driver == kDriverTmpfs) {
    type = "tmpfs";
    if (source.empty()) source = "tmpfs";
  } else if (s.driver == kDriverBlock) {
    ASSIGN_OR_RETURN(source, BlockDeviceBySerial(s.source, kBlockDeviceWait));
    type = "erofs";  // read-only by nature: never mounted writable
    flags |= MS_RDONLY;
  } else {
    flags = MS_BIND | (o.flags & MS_REC);
  }
  const char* data = o.data.empty() ? nullptr : o.data.c_str();
  if (::mount(source.c_str(), s.mount_point.c_str(), type, flags, data) != 0) {
    return ErrnoStatus(fmt::format("mount {} {} on {} (options '{}')", s.driver, source, s.mount_point, o.data));
  }
  return Status::Ok();
}

Status ApplyAfterMount(const StorageSpec& s, const MountOptions& o) {
  unsigned long remount = o.flags & kBindRemountFlags;
  if (s.driver == kDriverBind && remount != 0 &&
      ::mount(nullptr, s.mount_point.c_str(), nullptr, MS_REMOUNT | MS_BIND | remount, nullptr) != 0) {
    return ErrnoStatus("remount bind " + s.mount_point + " with its flags");
  }
  if (o.propagation != 0 && ::mount(nullptr, s.mount_point.c_str(), nullptr, o.propagation, nullptr) != 0) {
    return ErrnoStatus("set propagation of " + s.mount_point);
  }
  return Status::Ok();
}

}  // namespace

Status ValidateStorage(const StorageSpec& spec, std::string_view field) {
  RETURN_IF_ERROR(ValidateSource(spec, field));
  RETURN_IF_ERROR(CheckAbsolutePath(fmt::format("{}.mount_point", field), spec.mount_point));
  if (spec.mount_point == "/") return InvalidArgument(fmt::format("{}.mount_point must not be /", field));
  RETURN_IF_ERROR_CTX(ParseMountOptions(spec.options).status(), fmt::format("{}.options", field));
  return Status::Ok();
}

Result<MountedStorage> MountedStorage::Mount(const StorageSpec& spec) {
  RETURN_IF_ERROR(ValidateStorage(spec));
  ASSIGN_OR_RETURN(MountOptions options, ParseMountOptions(spec.options));
  RETURN_IF_ERROR(CreateMountPoint(spec));
  RETURN_IF_ERROR(MountFilesystem(spec, options));
  MountedStorage mounted(spec.mount_point);
  RETURN_IF_ERROR(ApplyAfterMount(spec, options));  // `mounted` unmounts on failure
  kLog.Info("mounted {} {} on {}", spec.driver, spec.source.empty() ? "-" : spec.source, spec.mount_point);
  return mounted;
}

MountedStorage::MountedStorage(MountedStorage&& other) noexcept
    : mount_point_(std::move(other.mount_point_)), mounted_(std::exchange(other.mounted_, false)) {}

MountedStorage& MountedStorage::operator=(MountedStorage&& other) noexcept {
  if (this != &other) {
    (void)Unmount();
    mount_point_ = std::move(other.mount_point_);
    mounted_ = std::exchange(other.mounted_, false);
  }
  return *this;
}

MountedStorage::~MountedStorage() {
  Status st = Unmount();
  if (!st.ok()) kLog.Error("{}", st.message());
}

Status MountedStorage::Unmount() {
  if (!mounted_) return Status::Ok();
  if (::umount2(mount_point_.c_str(), UMOUNT_NOFOLLOW) != 0) {
    if (errno != EBUSY) return ErrnoStatus("unmount " + mount_point_);
    kLog.Warn("{} is busy, detaching it (MNT_DETACH)", mount_point_);
    if (::umount2(mount_point_.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
      return ErrnoStatus("detach " + mount_point_);
    }
  }
  mounted_ = false;
  kLog.Info("unmounted {}", mount_point_);
  return Status::Ok();
}

}  // namespace capsule::agent::storage
