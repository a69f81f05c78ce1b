// OCI image layout (image-spec v1.0: image-layout.md, manifest.md,
// config.md) from a tree: layer tar first, then the config naming its
// diff_id, then the manifest, then index.json naming the manifest.
#include "deploy/node-image/oci_layout.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "deploy/node-image/tar_writer.h"
#include "runtime/common/file_util.h"
#include "runtime/common/sha256.h"

namespace capsule::oci {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Blob {
  std::string media_type;
  std::string data;
  std::string Digest() const { return "sha256:" + Sha256Hex(data); }
  json Descriptor() const { return {{"mediaType", media_type}, {"digest", Digest()}, {"size", data.size()}}; }
};

// What goes into the layer, keyed by its path in the image (sorted).
struct Entry {
  enum class Kind { kDir, kFile, kSymlink } kind;
  std::string source;  // file on this machine (kFile) or link target
  mode_t mode;
};

Status CollectTree(const std::string& tree, std::map<std::string, Entry>& out) {
  std::error_code ec;
  fs::recursive_directory_iterator it(tree, ec), end;
  if (ec) return InvalidArgument("read tree " + tree + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return InvalidArgument("walk " + tree + ": " + ec.message());
    std::string rel = fs::relative(it->path(), tree).string();
    struct stat st{};
    if (::lstat(it->path().c_str(), &st) != 0) return ErrnoStatus("lstat " + it->path().string());
    mode_t mode = (st.st_mode & 0111) != 0 ? 0755 : 0644;  // normalized: umask must not change the image
    if (S_ISDIR(st.st_mode)) {
      out[rel] = {Entry::Kind::kDir, "", 0755};
    } else if (S_ISLNK(st.st_mode)) {
      out[rel] = {Entry::Kind::kSymlink, fs::read_symlink(it->path()).string(), 0777};
    } else if (S_ISREG(st.st_mode)) {
      out[rel] = {Entry::Kind::kFile, it->path().string(), mode};
    } else {
      return InvalidArgument(it->path().string() + ": not a file, directory or symlink");
    }
  }
  return Status::Ok();
}

// A host file added at its own path; its parent directories too.
void AddExtra(const std::string& path, std::map<std::string, Entry>& out) {
  std::string rel = path.substr(path.find_first_not_of('/'));
  struct stat st{};
  mode_t mode = ::stat(path.c_str(), &st) == 0 && (st.st_mode & 0111) != 0 ? 0755 : 0644;
  out[rel] = {Entry::Kind::kFile, path, mode};
  for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1)) {
    out.emplace(rel.substr(0, slash), Entry{Entry::Kind::kDir, "", 0755});
  }
}

Result<std::string> LayerTar(const std::map<std::string, Entry>& entries, int64_t mtime) {
  TarWriter tar(mtime);
  for (const auto& [name, e] : entries) {
    switch (e.kind) {
      case Entry::Kind::kDir:
        RETURN_IF_ERROR(tar.AddDirectory(name, e.mode));
        break;
      case Entry::Kind::kSymlink:
        RETURN_IF_ERROR(tar.AddSymlink(name, e.source));
        break;
      case Entry::Kind::kFile: {
        ASSIGN_OR_RETURN(std::string data, ReadFile(e.source));
        RETURN_IF_ERROR(tar.AddFile(name, data, e.mode));
        break;
      }
    }
  }
  return tar.Finish();
}

std::string Canonical(const json& j) { return j.dump(); }  // keys sorted by nlohmann's std::map

}  // namespace

Result<std::string> BuildImageLayout(const ImageOptions& opts) {
  std::map<std::string, Entry> entries;
  RETURN_IF_ERROR(CollectTree(opts.tree, entries));
  for (const std::string& f : opts.extra_files) AddExtra(f, entries);
  ASSIGN_OR_RETURN(std::string layer_data, LayerTar(entries, opts.mtime));
  Blob layer{"application/vnd.oci.image.layer.v1.tar", std::move(layer_data)};

  json config = {{"architecture", "amd64"},
                 {"os", "linux"},
                 {"config", {{"Env", opts.env}}},
                 {"rootfs", {{"type", "layers"}, {"diff_ids", {layer.Digest()}}}}};
  if (!opts.entrypoint.empty()) config["config"]["Entrypoint"] = opts.entrypoint;
  if (!opts.cmd.empty()) config["config"]["Cmd"] = opts.cmd;
  Blob config_blob{"application/vnd.oci.image.config.v1+json", Canonical(config)};

  json manifest = {{"schemaVersion", 2},
                   {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                   {"config", config_blob.Descriptor()},
                   {"layers", {layer.Descriptor()}}};
  Blob manifest_blob{"application/vnd.oci.image.manifest.v1+json", Canonical(manifest)};

  json desc = manifest_blob.Descriptor();
  if (!opts.ref_name.empty()) {
    // containerd's import reads io.containerd.image.name; other tools the tag.
    std::string tag = opts.ref_name.substr(opts.ref_name.rfind(':') + 1);
    desc["annotations"] = {{"io.containerd.image.name", opts.ref_name}, {"org.opencontainers.image.ref.name", tag}};
  }
  json index = {{"schemaVersion", 2}, {"mediaType", "application/vnd.oci.image.index.v1+json"}, {"manifests", {desc}}};

  TarWriter out(opts.mtime);
  RETURN_IF_ERROR(out.AddFile("oci-layout", R"({"imageLayoutVersion":"1.0.0"})", 0644));
  RETURN_IF_ERROR(out.AddFile("index.json", Canonical(index), 0644));
  RETURN_IF_ERROR(out.AddDirectory("blobs"));
  RETURN_IF_ERROR(out.AddDirectory("blobs/sha256"));
  std::vector<const Blob*> blobs = {&layer, &config_blob, &manifest_blob};
  std::sort(blobs.begin(), blobs.end(), [](const Blob* a, const Blob* b) { return a->Digest() < b->Digest(); });
  for (const Blob* b : blobs) {
    RETURN_IF_ERROR(out.AddFile("blobs/sha256/" + b->Digest().substr(7), b->data, 0644));
  }
  return out.Finish();
}

Result<std::vector<std::string>> LddDependencies(const std::string& binary) {
  std::string cmd = "ldd '" + binary + "' 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(cmd.c_str(), "r"), ::pclose);
  if (!p) return ErrnoStatus("run ldd " + binary);
  std::vector<std::string> out;
  char line[4096];
  while (std::fgets(line, sizeof line, p.get()) != nullptr) {
    std::string l(line);
    if (l.find("not found") != std::string::npos) return NotFound("ldd " + binary + ": " + l);
    // "libx.so.1 => /lib/x86_64-linux-gnu/libx.so.1 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
    size_t arrow = l.find("=> ");
    size_t start = arrow != std::string::npos ? arrow + 3 : l.find_first_not_of(" \t");
    if (start == std::string::npos || l[start] != '/') continue;
    out.push_back(l.substr(start, l.find(' ', start) - start));
  }
  return out;
}

}  // namespace capsule::oci
