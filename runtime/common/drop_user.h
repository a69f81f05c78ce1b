// Giving up root for an unprivileged user between fork and exec (QEMU and
// virtiofsd as daemons, the metrics HTTP front end as a child): the
// supplementary groups, gid and uid in that order, then no_new_privs. A
// setuid from root to a non-zero uid clears every capability set (no
// SECBIT_KEEP_CAPS). Only async-signal-safe calls.
#pragma once

#include <grp.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>

namespace capsule {

enum class DropStep { kDone, kSetgroups, kSetgid, kSetuid, kNoNewPrivs };

inline DropStep DropToUser(uid_t uid, gid_t gid, const gid_t* groups, size_t group_count) {
  if (::setgroups(group_count, groups) != 0) return DropStep::kSetgroups;
  if (::setresgid(gid, gid, gid) != 0) return DropStep::kSetgid;
  if (::setresuid(uid, uid, uid) != 0) return DropStep::kSetuid;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return DropStep::kNoNewPrivs;
  return DropStep::kDone;
}

}  // namespace capsule
