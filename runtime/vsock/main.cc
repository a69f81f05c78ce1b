// capsule-vsockd: thin main over the vsockd library (runtime/vsock/vsockd.h).
#include "runtime/vsock/vsockd.h"

int main(int argc, char** argv) { return capsule::vsock::VsockdMain(argc, argv); }
