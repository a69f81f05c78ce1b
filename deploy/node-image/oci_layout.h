// Builds an OCI image layout tarball (oci-layout, index.json, blobs/sha256/
// for the config, the manifest and one uncompressed layer) from a directory
// tree, with no registry and no container engine: `ctr images import` or
// `skopeo copy oci-archive:` take it as it is. The same tree gives the same
// bytes: entries sorted, mtime fixed, uid/gid 0.
#pragma once

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::oci {

struct ImageOptions {
  std::string tree;                       // becomes the image's /
  std::vector<std::string> entrypoint;    // e.g. /usr/local/bin/capsule-runtime
  std::vector<std::string> cmd;
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  std::string ref_name;                   // e.g. docker.io/capsule/capsule-node:0.1.0
  std::vector<std::string> extra_files;   // host files added at the same path
  int64_t mtime = 0;                      // every entry's mtime
};

// The layout tarball's bytes.
Result<std::string> BuildImageLayout(const ImageOptions& opts);

// The shared libraries and loader `binary` needs (ldd), for extra_files.
Result<std::vector<std::string>> LddDependencies(const std::string& binary);

}  // namespace capsule::oci
