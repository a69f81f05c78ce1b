// PID 1's standard streams: the kernel opens /dev/console for init when the
// initramfs has that node; when it could not, stdio is reattached to
// /dev/console once devtmpfs is up, so the log has somewhere to go.
#pragma once

namespace capsule::agent::init {

// Makes fds 0, 1, 2 the console when they are not open; returns true when
// they are usable afterwards.
bool EnsureConsole();

}  // namespace capsule::agent::init
