// The user process's own settings, precomputed in the parent (ProcessPlan)
// and applied in the container child after the rootfs: rlimits, oom score,
// groups/gid/uid, capabilities, umask, cwd, no_new_privs, executable lookup
// in the container's PATH, seccomp and execve.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/engine/capabilities.h"
#include "agent/engine/seccomp.h"
#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

struct ProcessPlan {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::string cwd;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> additional_gids;
  std::optional<mode_t> umask;
  std::vector<oci::Rlimit> rlimits;
  bool no_new_privileges = false;
  std::optional<int> oom_score_adj;
  CapabilityPlan capabilities;
  std::optional<SeccompProgram> seccomp;
  bool terminal = false;
  std::optional<oci::ConsoleSize> console_size;
};

// Compiles the seccomp profile (errors name linux.seccomp fields).
Result<ProcessPlan> PlanProcess(const oci::Process& process, const std::optional<oci::Seccomp>& seccomp);

// Child side. oom_score_adj goes through the agent's /proc, so call it
// before the rootfs pivot.
Status WriteOomScoreAdj(const ProcessPlan& plan);
Status ApplyRlimits(const ProcessPlan& plan);
// Bounding set, groups, gid, uid (keeping caps across it), capability sets,
// umask, cwd. Seccomp comes first when no_new_privileges is off (loading it
// then needs CAP_SYS_ADMIN, which the uid change may drop).
Status ApplyCredentials(const ProcessPlan& plan);
// args[0] as execve wants it: a path with '/' is used as is, else the
// process env's PATH (or the default one) is searched.
Result<std::string> ResolveExecutable(const ProcessPlan& plan);
// no_new_privs, seccomp (when it was not loaded earlier), then execve.
// Returns only on failure.
Status ExecUserProcess(const ProcessPlan& plan, const std::string& path);

// Resets every signal disposition to default and unblocks all signals: the
// agent's ignored signals (SIGPIPE) must not leak into containers.
void ResetSignals();
// Closes every fd >= 3 not in `keep` (close_range over the gaps).
void CloseAllExcept(std::vector<int> keep);

}  // namespace capsule::engine
