// Request checks of the container RPCs that need no engine state: ids,
// signal numbers, window sizes, read sizes. Each error names the proto
// field, so a bad request is answered before anything is touched.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "agent/pod/pod_spec.h"
#include "runtime/common/status.h"

namespace capsule::agent::containers {

// ReadStdout/ReadStderr: len 0 means this (agent.proto), and no reply carries
// more than kMaxReadLen (well inside gRPC's 4 MiB message limit).
inline constexpr uint32_t kDefaultReadLen = 32 * 1024;
inline constexpr uint32_t kMaxReadLen = 1024 * 1024;
// Highest signal number: SIGRTMAX on Linux x86-64/arm64 (asm/signal.h _NSIG).
inline constexpr uint32_t kMaxSignal = 64;
// struct winsize has unsigned short rows and columns (asm-generic/termios.h).
inline constexpr uint32_t kMaxWinSize = 65535;

// Container ids are pod::CheckId's. exec_id: "" (the init) when
// `allow_init`, else an id like a container's.
Status CheckExecId(std::string_view field, const std::string& id, bool allow_init);
// The process RPCs' (container_id, exec_id): container_id "" names a guest
// process (ExecGuestProcess), which always has an exec id.
Status CheckProcessTarget(const std::string& container_id, const std::string& exec_id, bool allow_init);
Status CheckSignal(uint32_t signal);
Status CheckWinSize(uint32_t row, uint32_t column);
// The effective read size for a requested `len`.
size_t ReadLen(uint32_t len);

}  // namespace capsule::agent::containers
