// Host programs the image builder runs (ldd, a compressor): found on PATH and
// run with their output captured, errors naming the program.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::deploy {

// Absolute path of `name` from $PATH (plus /usr/sbin:/sbin); NOT_FOUND names
// the Debian package to install when `package` is given.
Result<std::string> FindProgram(const std::string& name, const std::string& package = "");

// Runs argv (argv[0] absolute) and returns its stdout; a non-zero exit is
// an error carrying the first lines of stderr.
Result<std::string> RunCapture(const std::vector<std::string>& argv);

// Runs argv with stdin from `in_path` and stdout into `out_path`.
Status RunFilter(const std::vector<std::string>& argv, const std::string& in_path, const std::string& out_path);

}  // namespace capsule::deploy
