// CloseInBackground: closes a file descriptor on a low-priority worker
// thread instead of the caller's. Closing the last reference to a large
// shared-memory file (a VM's guest RAM) frees its pages inside close(2),
// about 35 ms per 256 MiB on these machines: time a pod's stop should not
// wait for. The worker starts on first use; the process's normal exit waits
// for it (static destructor), so every queued fd is closed by then.
#pragma once

#include "runtime/common/unique_fd.h"

namespace capsule {

// Queues `fd` for the worker; closes it on this thread if no worker can run.
void CloseInBackground(UniqueFd fd);

// Returns once every fd queued before the call is closed.
void FlushBackgroundCloses();

}  // namespace capsule
