// Times a tiny guest through raw KVM ioctls: one vCPU in real mode runs a
// countdown loop and halts. Runs in a forked child so that a KVM that hangs
// or crashes cannot take the caller with it; the child is killed at the
// deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "runtime/hypervisor/accel_probe.h"

namespace capsule::hypervisor {

KvmTiming TimeKvmGuest(const std::string& dev_kvm, uint32_t iterations, std::chrono::milliseconds deadline);

}  // namespace capsule::hypervisor
