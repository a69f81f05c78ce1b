// reboot(2) wrappers for PID 1.
#include "agent/init/power.h"

#include <sys/reboot.h>
#include <unistd.h>

#include "runtime/common/logging.h"

namespace capsule::agent::init {
namespace {
const log::Logger kPowerLog("init");
}  // namespace

void PowerOff(std::string_view reason) {
  kPowerLog.Info("powering off: {}", reason);
  ::sync();
  ::reboot(RB_POWER_OFF);
  kPowerLog.Error("reboot(RB_POWER_OFF) failed: {}; halting", ErrnoStatus("reboot").message());
  ::reboot(RB_HALT_SYSTEM);
  for (;;) ::pause();
}

Status DisableCtrlAltDel() {
  if (::reboot(RB_DISABLE_CAD) != 0) return ErrnoStatus("reboot(RB_DISABLE_CAD)");
  return Status::Ok();
}

}  // namespace capsule::agent::init
