// See dense_files.h.
#include "shim/task/dense_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/reasons.h"
#include "runtime/common/unique_fd.h"
#include "runtime/erofs/erofs_image.h"

namespace capsule::shim::task {
namespace {

const log::Logger kDenseFilesLog("shim.dense");

struct Tally {
  uint64_t bytes = 0, entries = 0;
  bool over() const { return bytes > kMaxMountsBytes || entries > kMaxMountsEntries; }
};

// Adds what the tree at `fd` (a directory) holds, never following a link,
// and stops as soon as the tally is over its bounds.
void TallyDir(int fd, Tally& t, int depth) {
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  while (dirent* e = ::readdir(d)) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    ++t.entries;
    struct stat st{};
    if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) t.bytes += static_cast<uint64_t>(st.st_size);
    if (S_ISDIR(st.st_mode) && depth < 64) {
      const int child = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child >= 0) TallyDir(child, t, depth + 1);
    }
    if (t.over()) break;
  }
  ::closedir(d);
}

Status CheckMountsSize(const std::vector<ShareBind>& binds) {
  Tally t;
  for (const ShareBind& b : binds) {
    struct stat st{};
    if (::stat(b.host_source.c_str(), &st) != 0) return ErrnoStatus("stat host mount " + b.host_source);
    ++t.entries;
    if (S_ISREG(st.st_mode)) t.bytes += static_cast<uint64_t>(st.st_size);
    if (S_ISDIR(st.st_mode)) {
      const int fd = ::open(b.host_source.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return ErrnoStatus("open host mount " + b.host_source);
      TallyDir(fd, t, 0);
    }
    if (t.over())
      return FailedPrecondition(fmt::format(
          "host mounts hold more than {} MiB or {} entries (at {}): guest.device_set dense copies them at every "
          "create; use a RuntimeClass of the virtio-fs device set", kMaxMountsBytes >> 20, kMaxMountsEntries,
          b.host_source));
  }
  return Status::Ok();
}

}  // namespace

std::string DenseGuestPath(std::string_view rel) {
  std::string out(kDenseGuestRoot);
  if (!rel.empty()) out += "/" + std::string(rel);
  return out;
}

std::string EmptyDirVolumeName(std::string_view host_source) {
  constexpr std::string_view kVolumes = "/volumes/kubernetes.io~empty-dir/";
  const size_t at = host_source.rfind(kVolumes);
  if (at == std::string_view::npos) return "";
  const std::string_view name = host_source.substr(at + kVolumes.size());
  const std::string_view pod = host_source.substr(0, at);  // <root>/pods/<uid>
  const size_t uid = pod.rfind('/');
  if (uid == std::string_view::npos || uid < 5 || pod.substr(uid - 5, 6) != "/pods/" || uid + 1 == pod.size())
    return "";
  bool ok = !name.empty() && name.size() <= 63 && name != "." && name != "..";
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-');
  return ok ? std::string(name) : "";
}

std::vector<agent::v1::Storage> LocalVolumes(std::vector<ShareBind>* binds, nlohmann::json* spec) {
  std::vector<agent::v1::Storage> out;
  std::vector<ShareBind> rest;
  for (ShareBind& b : *binds) {
    const std::string name = b.directory ? EmptyDirVolumeName(b.host_source) : "";
    if (name.empty()) {
      rest.push_back(std::move(b));
      continue;
    }
    const std::string guest = fmt::format("{}/{}", kLocalVolumeGuestRoot, name);
    const std::string from = DenseGuestPath(b.rel);
    if (spec->contains("mounts") && (*spec)["mounts"].is_array()) {
      for (auto& m : (*spec)["mounts"]) {
        if (m.is_object() && m.value("source", "") == from) m["source"] = guest;
      }
    }
    bool known = false;
    for (const auto& s : out) known = known || s.mount_point() == guest;
    if (known) continue;
    agent::v1::Storage& s = out.emplace_back();
    s.set_driver("local");
    s.set_source(name);
    s.set_mount_point(guest);
  }
  *binds = std::move(rest);
  return out;
}

Status RefuseSharedDirectories(const std::vector<ShareBind>& binds) {
  for (const ShareBind& b : binds) {
    if (!b.directory) continue;
    bool ro = false;
    for (const std::string& o : b.options) ro = ro || o == "ro";
    if (!ro)
      return FailedPrecondition(fmt::format(
          "mount of host directory {} is read-write: guest.device_set dense has no shared filesystem, so the "
          "guest's writes could never reach it (use a RuntimeClass of the virtio-fs device set, or mount it "
          "read-only)", b.host_source));
  }
  return Status::Ok();
}

std::vector<TerminationMessageFile> TerminationMessageFiles(const std::vector<ShareBind>& binds) {
  std::vector<TerminationMessageFile> out;
  for (const ShareBind& b : binds) {
    if (b.directory || std::find(b.options.begin(), b.options.end(), "ro") != b.options.end()) continue;
    // .../pods/<uid>/containers/<name>/<id>: the last five components.
    std::vector<std::string_view> parts;
    std::string_view rest = b.host_source;
    while (!rest.empty() && parts.size() < 6) {
      const size_t slash = rest.rfind('/');
      const std::string_view part = slash == std::string_view::npos ? rest : rest.substr(slash + 1);
      if (!part.empty()) parts.push_back(part);
      rest = slash == std::string_view::npos ? std::string_view() : rest.substr(0, slash);
    }
    if (parts.size() < 5 || parts[2] != "containers" || parts[4] != "pods") continue;
    out.push_back({DenseGuestPath(b.rel), b.host_source});
  }
  return out;
}

Status WriteTerminationMessage(const std::string& host_path, std::string_view message) {
  UniqueFd fd(::open(host_path.c_str(), O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    // A link (ELOOP), a directory (EISDIR), a FIFO without a reader or a
    // device without a driver (ENXIO): not the kubelet's regular file.
    if (errno == ELOOP || errno == EISDIR || errno == ENXIO)
      return FailedPrecondition(fmt::format("termination message file {} is not a regular file: {}", host_path,
                                            std::strerror(errno)))
          .WithReason(reason::kWrongFileType);
    return ErrnoStatus("open termination message file " + host_path);
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + host_path);
  if (!S_ISREG(st.st_mode))
    return FailedPrecondition(fmt::format("termination message file {} is not a regular file", host_path))
        .WithReason(reason::kWrongFileType);
  if (::ftruncate(fd.get(), 0) != 0) return ErrnoStatus("truncate " + host_path);
  return WriteAll(fd.get(), message.substr(0, kMaxTerminationMessageBytes), "write " + host_path);
}

Status MountsImage(mount::Mounter* mounter, const std::vector<ShareBind>& binds, const std::string& staging,
                   const std::string& container_id, const std::string& image) {
  RETURN_IF_ERROR_CTX(CheckMountsSize(binds), "host mounts of container " + container_id);
  const std::string top = fmt::format("{}/{}/mounts", staging, container_id);
  RETURN_IF_ERROR(MkdirAll(top, 0755));
  std::vector<mount::ScopedMount> mounts;  // unmounted when this returns, whatever happens
  for (const ShareBind& b : binds) {
    const std::string target = staging + "/" + b.rel;
    RETURN_IF_ERROR(mount::MakeMountTarget(target, b.directory));
    // Read-only and not recursive: the image holds what the bind shows.
    ASSIGN_OR_RETURN(mount::ScopedMount m, mount::ScopedMount::Make(mounter, {"bind", b.host_source, target, {"bind", "ro"}}));
    mounts.push_back(std::move(m));
  }
  Status made = erofs::MakeErofsImage(top, image);
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it) {
    if (Status st = it->Unmount(); !st.ok() && made.ok()) made = st;
  }
  mounts.clear();
  if (Status st = RemoveAll(staging); !st.ok() && made.ok()) made = st;
  return made.WithContext("host mounts of container " + container_id);
}

std::vector<agent::v1::Storage> DenseStorages(const std::string& container_id, const std::string& rootfs_serial,
                                              const std::string& mounts_serial) {
  const std::string base = DenseGuestPath(container_id);
  std::vector<agent::v1::Storage> out;
  auto add = [&](std::string driver, std::string source, std::string fstype, std::vector<std::string> options,
                 std::string mount_point) {
    agent::v1::Storage& s = out.emplace_back();
    s.set_driver(std::move(driver));
    s.set_source(std::move(source));
    s.set_fstype(std::move(fstype));
    for (auto& o : options) s.add_options(std::move(o));
    s.set_mount_point(std::move(mount_point));
  };
  add("tmpfs", "dense-rw", "tmpfs", {"nosuid", "nodev", "mode=0700"}, base + "/.rw");
  auto layer = [&](const std::string& serial, const std::string& name) {
    add("blk", serial, "erofs", {}, fmt::format("{}/.{}-image", base, name));
    add("overlay", fmt::format("{}/.{}-image", base, name), "overlay",
        {fmt::format("upperdir={}/.rw/{}-upper", base, name), fmt::format("workdir={}/.rw/{}-work", base, name)},
        fmt::format("{}/{}", base, name));
  };
  layer(rootfs_serial, "rootfs");
  if (!mounts_serial.empty()) layer(mounts_serial, "mounts");
  return out;
}

}  // namespace capsule::shim::task
