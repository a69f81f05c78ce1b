// capsule-mkinitrd: the guest image builder's command line. Builds
// capsule-initrd.img (and copies the kernel next to it) from the agent
// binary and the kernel unpacked by `make deps`.
#pragma once

namespace capsule::deploy {

int RunMkinitrd(int argc, char** argv);

}  // namespace capsule::deploy
