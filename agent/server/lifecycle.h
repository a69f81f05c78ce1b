// What the RPC handlers need from the agent's process lifecycle: a way to
// power the VM off after a reply, and whether the agent is going down.
#pragma once

#include <cstdint>
#include <string_view>

namespace capsule::agent::server {

class AgentLifecycle {
 public:
  virtual ~AgentLifecycle() = default;
  // Called once the reply of the requesting call has been handed to the
  // transport; the agent then stops serving, syncs and powers off (as a
  // host process: exits).
  virtual void RequestPowerOff(std::string_view reason) = 0;
  virtual bool shutting_down() const = 0;
  // CLOCK_BOOTTIME microseconds when the agent began serving.
  virtual uint64_t ready_monotonic_us() const = 0;
};

}  // namespace capsule::agent::server
