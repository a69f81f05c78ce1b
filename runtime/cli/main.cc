// capsule-runtime: thin main over the CLI library.
#include "runtime/cli/cli.h"

int main(int argc, char** argv) { return capsule::cli::Run(argc, argv); }
