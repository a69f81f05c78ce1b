// capsule-mkinitrd: thin main over deploy/mkinitrd.
#include "deploy/mkinitrd/mkinitrd.h"

int main(int argc, char** argv) { return capsule::deploy::RunMkinitrd(argc, argv); }
