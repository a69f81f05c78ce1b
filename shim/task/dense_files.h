// A container's files on the dense device set (guest.device_set dense),
// whose VMs have no shared filesystem: the rootfs and the host files the
// spec binds reach the guest as read-only erofs images on hot-plugged SCSI
// disks (the VM's virtio-scsi controller), and the agent makes each writable with an overlay whose
// upper layer is guest memory (a tmpfs of the container's own). The guest
// paths mirror the share's ("<id>/rootfs", "<id>/mounts/<n>-<name>") under
// kDenseGuestRoot, so the guest spec is made the same way for both.
//   rootfs  one image per set of image layers, in runtime.image_cache_dir
//           (image_cache.h). Any other rootfs (a bind, a used upper layer)
//           gets an image of its own, unlinked as soon as QEMU holds it.
//   mounts  the files and read-only directories the spec binds (CRI's
//           /etc/hosts, resolv.conf, hostname, secrets, config maps),
//           copied at create into one image of the container's own: bind
//           mounted into a staging tree that mkfs.erofs reads, so links
//           stay links and nothing under them is followed. Writes to them
//           stay in the guest, but for the kubelet's termination-message
//           file, copied back at the exit. A read-write host directory (hostPath)
//           cannot be shared this way and is refused, naming it.
//   emptyDir volumes live in the guest, as Kata makes them by default: a
//           local volume (a directory in guest memory) per volume name,
//           shared by the pod's containers and kept until the VM ends, so
//           a restarted container finds its files. The host's directory
//           stays empty (the kubelet's usage accounting does not see the
//           guest's files, and a subPath of one is a plain hostPath bind).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "capsule/agent/v1/agent.pb.h"
#include "runtime/common/status.h"
#include "shim/mount/mounter.h"
#include "shim/task/guest_spec.h"

namespace capsule::shim::task {

inline constexpr std::string_view kDenseGuestRoot = "/run/capsule/dense";
std::string DenseGuestPath(std::string_view rel);

// Where the agent makes a pod's local volumes.
inline constexpr std::string_view kLocalVolumeGuestRoot = "/run/capsule/volumes";

// The volume name of a kubelet emptyDir (".../pods/<uid>/volumes/
// kubernetes.io~empty-dir/<name>"), or "" when `host_source` is not one or
// its name does not fit a local volume.
std::string EmptyDirVolumeName(std::string_view host_source);

// Takes every emptyDir directory bind out of `binds`, points the spec's
// mounts of it (found by their guest source) at its local volume, and
// returns the storages that make those volumes, one per name.
std::vector<agent::v1::Storage> LocalVolumes(std::vector<ShareBind>* binds, nlohmann::json* spec);

// FAILED_PRECONDITION naming the first read-write directory bind.
Status RefuseSharedDirectories(const std::vector<ShareBind>& binds);

// What a container's host files may hold in all: they are copied at every
// create (into the bundle, a tmpfs), so a huge read-only hostPath would be
// a slow create and host memory taken; such a pod belongs on virtio-fs.
inline constexpr uint64_t kMaxMountsBytes = 64ull << 20;
inline constexpr uint64_t kMaxMountsEntries = 20000;

// Binds every `binds` entry under <staging>/<rel>, makes `image` of
// <staging>/<container_id>/mounts and unmounts them again.
// FAILED_PRECONDITION, naming the source, when they hold more than
// kMaxMountsBytes or kMaxMountsEntries (symlinks are counted, not followed).
Status MountsImage(mount::Mounter* mounter, const std::vector<ShareBind>& binds, const std::string& staging,
                   const std::string& container_id, const std::string& image);

// The kubelet reads a container's termination message, after it exited,
// from the host file it binds read-write at terminationMessagePath
// (<kubelet root>/pods/<uid>/containers/<name>/<id>), at most this much of
// it. On the dense device set the container writes its copy in the guest,
// so the shim copies that back before it reports the exit.
inline constexpr uint32_t kMaxTerminationMessageBytes = 4096;

struct TerminationMessageFile {
  std::string guest_path;  // the container's copy, in the guest
  std::string host_path;   // the kubelet's file
};

// The read-write file binds among `binds` whose host source is laid out as
// the kubelet's termination-message files are.
std::vector<TerminationMessageFile> TerminationMessageFiles(const std::vector<ShareBind>& binds);

// Replaces the content of the host file with the first
// kMaxTerminationMessageBytes of `message`. The file must already exist
// and be a regular file; a symlink in its place is refused, not followed
// (WRONG_FILE_TYPE).
Status WriteTerminationMessage(const std::string& host_path, std::string_view message);

// The storages CreateContainer takes: the rootfs disk (by serial) as the
// lower layer of <root>/<id>/rootfs, and, when `mounts_serial` is set, the
// mounts disk as that of <root>/<id>/mounts; the upper layers on one tmpfs.
std::vector<agent::v1::Storage> DenseStorages(const std::string& container_id, const std::string& rootfs_serial,
                                              const std::string& mounts_serial);

}  // namespace capsule::shim::task
