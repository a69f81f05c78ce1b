// A reproducible ustar writer: entries carry uid/gid 0, no user names and
// the mtime the caller gives, so the same tree gives the same bytes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::oci {

class TarWriter {
 public:
  explicit TarWriter(int64_t mtime = 0) : mtime_(mtime) {}

  // `name` is relative ("usr/local/bin/x", "blobs/" for a directory).
  Status AddFile(std::string_view name, std::string_view data, mode_t mode);
  Status AddDirectory(std::string_view name, mode_t mode = 0755);
  Status AddSymlink(std::string_view name, std::string_view target);
  // The archive with its two zero end blocks; the writer is spent after.
  std::string Finish();

 private:
  Status Header(std::string_view name, char type, mode_t mode, uint64_t size, std::string_view link);

  int64_t mtime_;
  std::string out_;
};

}  // namespace capsule::oci
