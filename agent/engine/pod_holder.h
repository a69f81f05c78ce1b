// The pod holder: what keeps a CRI pod's namespaces (pid, ipc, uts) alive
// in place of the pause container. The agent makes it in every VM before
// any claim (a pooled VM's template carries it into every clone), so that
// at claim the sandbox container becomes this existing process: no pause
// image is read and no process is created in the guest for it.
//
// The holder is the agent's own binary run as `capsule-agent --pod-holder`,
// launched like a container init (own cgroup, pid/ipc/uts/mount
// namespaces) but without a root filesystem of its own. It confines itself
// before it waits: an empty read-only root, uid/gid 65535, no
// capabilities, no new privileges. As PID 1 of the pod's pid namespace it
// reaps the orphans of a shareProcessNamespace pod; SIGTERM or SIGINT end
// it with status 0, like pause. Its comm is "pause", which is what tools
// (and users) expect to see as a pod's PID 1.
#pragma once

#include <string>
#include <string_view>

#include "agent/engine/namespaces.h"
#include "runtime/common/status.h"
#include "runtime/oci/spec.h"

namespace capsule::engine {

// argv[1] that makes capsule-agent the holder.
inline constexpr std::string_view kPodHolderArg = "--pod-holder";
// The id a holder has until a sandbox container adopts it.
inline constexpr const char* kPodHolderId = "capsule-pod-holder";
// Who the holder runs as once confined (the pause image's user).
inline constexpr uint32_t kPodHolderUid = 65535;
// What the holder writes to its stdout once confined and named.
inline constexpr std::string_view kPodHolderReady = "ready\n";

// The spec the engine launches the holder with: `exe` (the agent binary)
// with kPodHolderArg, root's credentials (the holder drops them itself),
// new pid, ipc, uts and mount namespaces, no root.path.
oci::Spec PodHolderSpec(const std::string& exe);

// The holder's body, from main(); returns the exit status (0 after SIGTERM
// or SIGINT, 1 when it could not confine itself).
int RunPodHolder();

// Sets the hostname inside the uts namespace `uts` (a holder's), from a
// short-lived thread so that the agent's own stays as it is.
Status SetHostnameIn(int uts, const std::string& hostname);

}  // namespace capsule::engine
