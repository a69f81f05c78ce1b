// Guest networking at boot: only the loopback interface. Pod interfaces come
// later from the host (UpdateInterface), not from the boot.
#pragma once

#include <string>

#include "runtime/common/status.h"

namespace capsule::agent::init {

// Sets IFF_UP on `name`; the kernel gives "lo" 127.0.0.1/8 and ::1 itself.
Status BringUpInterface(const std::string& name);

}  // namespace capsule::agent::init
