// capsule-runtime's command tree. Run() parses argv and executes one command,
// returning the process exit code.
#pragma once

namespace capsule::cli {

int Run(int argc, char** argv);

}  // namespace capsule::cli
