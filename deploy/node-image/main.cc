// capsule-oci-image: writes an OCI image layout tarball of a directory tree
// (see oci_layout.h). deploy/node-image/CMakeLists.txt runs it on the
// install tree to make the node installer's image.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "deploy/node-image/oci_layout.h"
#include "runtime/common/file_util.h"
#include "runtime/common/version.h"

int main(int argc, char** argv) {
  CLI::App app{"capsule-oci-image: an OCI image layout tarball from a directory tree"};
  app.set_version_flag("--version", std::string("capsule-oci-image ") + capsule::kVersion);
  capsule::oci::ImageOptions opts;
  std::string output;
  std::vector<std::string> with_libs;
  app.add_option("--tree", opts.tree, "directory that becomes the image's /")->required();
  app.add_option("--output", output, "the tarball to write")->required();
  app.add_option("--ref", opts.ref_name, "image name, e.g. docker.io/capsule/capsule-node:0.1.0");
  app.add_option("--entrypoint", opts.entrypoint, "the image's entrypoint (repeat for arguments)");
  app.add_option("--cmd", opts.cmd, "the image's default arguments (repeat)");
  app.add_option("--with-libraries-of", with_libs,
                 "path inside --tree of a binary whose shared libraries (ldd) join the image");
  app.add_option("--mtime", opts.mtime, "mtime of every entry (SOURCE_DATE_EPOCH)");
  CLI11_PARSE(app, argc, argv);
  for (const std::string& bin : with_libs) {
    auto libs = capsule::oci::LddDependencies(opts.tree + "/" + bin);
    if (!libs.ok()) {
      std::fprintf(stderr, "capsule-oci-image: %s\n", libs.status().message().c_str());
      return 1;
    }
    opts.extra_files.insert(opts.extra_files.end(), libs->begin(), libs->end());
  }
  auto image = capsule::oci::BuildImageLayout(opts);
  capsule::Status st = image.ok() ? capsule::WriteFileAtomic(output, *image) : image.status();
  if (!st.ok()) {
    std::fprintf(stderr, "capsule-oci-image: %s\n", st.message().c_str());
    return 1;
  }
  return 0;
}
