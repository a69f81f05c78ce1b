// A long-running command's stop: SIGTERM or SIGINT, taken with sigwait.
// Block them before any thread starts (threads inherit the mask), so that
// neither kills the process half-way and the waiter always gets them.
#pragma once

namespace capsule {

// Blocks SIGTERM and SIGINT in the calling thread.
void BlockStopSignals();
// Waits for one of them (blocked first); returns its number.
int WaitForStopSignal();

}  // namespace capsule
