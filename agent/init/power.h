// Ending the VM: PID 1 must never exit (the kernel would panic), so every
// way out - a fatal boot error, DestroySandbox(power_off), SIGTERM - ends in
// sync + reboot(RB_POWER_OFF). With ACPI (q35) QEMU then exits.
#pragma once

#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent::init {

// Logs why, flushes filesystems and powers off. Never returns: if the
// power-off itself fails, halts, and as a last resort sleeps forever.
[[noreturn]] void PowerOff(std::string_view reason);

// Ctrl-Alt-Del (or the host's "send-key ctrl-alt-delete") becomes SIGINT to
// PID 1 instead of an immediate reboot.
Status DisableCtrlAltDel();

}  // namespace capsule::agent::init
