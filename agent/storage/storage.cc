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

const log::Logger kStorageLog("storage");

constexpr size_t kVirtioFsTagMax = 36;  // VIRTIO_FS tag field size, from linux/virtio_fs.h
constexpr size_t kBlockSerialMax = 20;  // hypervisor::kMaxBlockSerialLen

Status CheckFstype(const StorageSpec& s, std::string_view field, std::initializer_list<std::string_view> allowed) {
  if (s.fstype.empty()) return Status::Ok();
  for (auto a : allowed) {
    if (s.fstype == a) return Status::Ok();
  }
  return InvalidArgument(fmt::format("{}.fstype '{}' does not fit driver {}", field, s.fstype, s.driver));
}

// Overlay's mount data separates directories by ',' and lowerdirs by ':'.
Status CheckOverlayDir(const std::string& field, const std::string& path) {
  RETURN_IF_ERROR(CheckAbsolutePath(field, path));
  if (path.find_first_of(",:\\") != std::string::npos)
    return InvalidArgument(fmt::format("{} '{}' must not hold ',', ':' or '\\' (overlay's separators)", field, path));
  return Status::Ok();
}

struct OverlayDirs {
  std::string upper, work;
};

// upperdir= and workdir=, each once; no other data (lowerdir is the source).
Result<OverlayDirs> OverlayDirsOf(const StorageSpec& s, std::string_view field) {
  ASSIGN_OR_RETURN(MountOptions o, ParseMountOptions("", s.options));
  OverlayDirs d;
  std::string_view data = o.data;
  while (!data.empty()) {
    const size_t comma = data.find(',');
    const std::string_view word = data.substr(0, comma);
    data = comma == std::string_view::npos ? std::string_view() : data.substr(comma + 1);
    std::string* out = nullptr;
    if (word.starts_with("upperdir=")) out = &d.upper;
    if (word.starts_with("workdir=")) out = &d.work;
    if (out == nullptr || !out->empty())
      return InvalidArgument(fmt::format("{}.options: '{}' is not an overlay's one upperdir= or workdir=", field, word));
    *out = std::string(word.substr(word.find('=') + 1));
    RETURN_IF_ERROR(CheckOverlayDir(fmt::format("{}.options {}", field, word.substr(0, word.find('='))), *out));
  }
  if (d.upper.empty() || d.work.empty())
    return InvalidArgument(fmt::format("{}.options must name an upperdir= and a workdir=", field));
  return d;
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
  if (s.driver == kDriverOverlay) {
    RETURN_IF_ERROR(CheckOverlayDir(source_field, s.source));
    RETURN_IF_ERROR(OverlayDirsOf(s, field).status());
    return CheckFstype(s, field, {"overlay"});
  }
  if (s.driver == kDriverLocal) {
    bool ok = !s.source.empty() && s.source.size() <= kLocalVolumeNameMax && s.source != "." && s.source != "..";
    for (char c : s.source) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
    if (!ok)
      return InvalidArgument(fmt::format("{} must be a volume name of 1..{} chars of [A-Za-z0-9_.-]", source_field,
                                         kLocalVolumeNameMax));
    if (!s.options.empty()) return InvalidArgument(fmt::format("{}.options must be empty for driver local", field));
    return CheckFstype(s, field, {"local"});
  }
  return InvalidArgument(
      fmt::format("{}.driver '{}' is not supported (virtiofs, tmpfs, bind, blk, overlay, local)", field, s.driver));
}

// A local volume: its directory, made world-writable once (a later
// container of the pod finds it as the first one left it).
Status MakeLocalVolume(const StorageSpec& s) {
  const std::string parent = s.mount_point.substr(0, s.mount_point.rfind('/'));
  if (!parent.empty()) RETURN_IF_ERROR(MkdirAll(parent, 0755));
  if (::mkdir(s.mount_point.c_str(), 0700) == 0) {
    if (::chmod(s.mount_point.c_str(), 0777) != 0) return ErrnoStatus("chmod local volume " + s.mount_point);
    kStorageLog.Info("made local volume {} at {}", s.source, s.mount_point);
    return Status::Ok();
  }
  if (errno != EEXIST) return ErrnoStatus("make local volume " + s.mount_point);
  struct stat st{};
  if (::lstat(s.mount_point.c_str(), &st) != 0) return ErrnoStatus("stat local volume " + s.mount_point);
  if (!S_ISDIR(st.st_mode))
    return FailedPrecondition(fmt::format("local volume {}: {} is there and is not a directory", s.source,
                                          s.mount_point));
  return Status::Ok();
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
  std::string data = o.data;
  if (s.driver == kDriverVirtioFs) {
    type = "virtiofs";
  } else if (s.driver == kDriverTmpfs) {
    type = "tmpfs";
    if (source.empty()) source = "tmpfs";
  } else if (s.driver == kDriverBlock) {
    ASSIGN_OR_RETURN(source, BlockDeviceBySerial(s.source, kBlockDeviceWait));
    type = "erofs";  // read-only by nature: never mounted writable
    flags |= MS_RDONLY;
  } else if (s.driver == kDriverOverlay) {
    ASSIGN_OR_RETURN(OverlayDirs dirs, OverlayDirsOf(s, "storage"));
    RETURN_IF_ERROR(MkdirAll(dirs.upper, 0755));
    RETURN_IF_ERROR(MkdirAll(dirs.work, 0700));
    type = "overlay";
    data = fmt::format("lowerdir={},{}", s.source, o.data);
    source = "overlay";
  } else {
    flags = MS_BIND | (o.flags & MS_REC);
  }
  if (::mount(source.c_str(), s.mount_point.c_str(), type, flags, data.empty() ? nullptr : data.c_str()) != 0) {
    return ErrnoStatus(fmt::format("mount {} {} on {} (options '{}')", s.driver, source, s.mount_point, data));
  }
  return Status::Ok();
}

Status ApplyAfterMount(const StorageSpec& s, const MountOptions& o) {
  unsigned long remount = o.bind_remount_flags();
  if (s.driver == kDriverBind && remount != 0 &&
      ::mount(nullptr, s.mount_point.c_str(), nullptr, MS_REMOUNT | MS_BIND | remount, nullptr) != 0) {
    return ErrnoStatus("remount bind " + s.mount_point + " with its flags");
  }
  for (unsigned long p : o.propagation) {
    if (::mount(nullptr, s.mount_point.c_str(), nullptr, p, nullptr) != 0)
      return ErrnoStatus("set propagation of " + s.mount_point);
  }
  return Status::Ok();
}

}  // namespace

std::vector<std::string> ModulesFor(const std::vector<StorageSpec>& specs) {
  for (const StorageSpec& s : specs) {
    if (s.driver == kDriverBlock) return {"crc32c_generic", "erofs"};
  }
  return {};
}

Status ValidateStorage(const StorageSpec& spec, std::string_view field) {
  RETURN_IF_ERROR(ValidateSource(spec, field));
  RETURN_IF_ERROR(CheckAbsolutePath(fmt::format("{}.mount_point", field), spec.mount_point));
  if (spec.mount_point == "/") return InvalidArgument(fmt::format("{}.mount_point must not be /", field));
  RETURN_IF_ERROR_CTX(ParseMountOptions("", spec.options).status(), fmt::format("{}.options", field));
  return Status::Ok();
}

Result<MountedStorage> MountedStorage::Mount(const StorageSpec& spec) {
  RETURN_IF_ERROR(ValidateStorage(spec));
  if (spec.driver == kDriverLocal) {
    RETURN_IF_ERROR(MakeLocalVolume(spec));
    return MountedStorage(spec.mount_point, false);
  }
  ASSIGN_OR_RETURN(MountOptions options, ParseMountOptions("", spec.options));
  RETURN_IF_ERROR(CreateMountPoint(spec));
  RETURN_IF_ERROR(MountFilesystem(spec, options));
  MountedStorage mounted(spec.mount_point, true);
  RETURN_IF_ERROR(ApplyAfterMount(spec, options));  // `mounted` unmounts on failure
  kStorageLog.Info("mounted {} {} on {}", spec.driver, spec.source.empty() ? "-" : spec.source, spec.mount_point);
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
  if (!st.ok()) kStorageLog.Error("{}", st.message());
}

Status MountedStorage::Unmount() {
  if (!mounted_) return Status::Ok();
  if (::umount2(mount_point_.c_str(), UMOUNT_NOFOLLOW) != 0) {
    if (errno != EBUSY) return ErrnoStatus("unmount " + mount_point_);
    kStorageLog.Warn("{} is busy, detaching it (MNT_DETACH)", mount_point_);
    if (::umount2(mount_point_.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0) {
      return ErrnoStatus("detach " + mount_point_);
    }
  }
  mounted_ = false;
  kStorageLog.Info("unmounted {}", mount_point_);
  return Status::Ok();
}

}  // namespace capsule::agent::storage
