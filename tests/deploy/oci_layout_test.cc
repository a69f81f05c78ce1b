// The node image's OCI layout: every digest and size in index.json, the
// manifest and the config matches its blob, the layer lists exactly the
// tree, and the same tree gives the same bytes.
#include "deploy/node-image/oci_layout.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/sha256.h"
#include "tests/support/status_matchers.h"

namespace capsule::oci {
namespace {

using nlohmann::json;

struct TarEntry {
  char type;
  std::string data;
  unsigned mode;
  unsigned uid;
  long mtime;
  std::string link;
};

// A ustar reader for the test: name (with prefix) -> entry.
std::map<std::string, TarEntry> ReadTar(const std::string& tar) {
  std::map<std::string, TarEntry> out;
  size_t p = 0;
  auto field = [&](size_t off, size_t len) {
    std::string s = tar.substr(p + off, len);
    return s.substr(0, s.find('\0'));
  };
  while (p + 512 <= tar.size()) {
    if (tar.compare(p, 512, std::string(512, '\0')) == 0) break;
    unsigned sum = 0;
    for (size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(tar[p + i]);
    EXPECT_EQ(std::stoul(field(148, 8), nullptr, 8), sum) << "checksum of entry at " << p;
    std::string name = field(0, 100);
    std::string prefix = field(345, 155);
    if (!prefix.empty()) name = prefix + "/" + name;
    size_t size = std::stoul(field(124, 12), nullptr, 8);
    TarEntry e{tar[p + 156], tar.substr(p + 512, size), static_cast<unsigned>(std::stoul(field(100, 8), nullptr, 8)),
               static_cast<unsigned>(std::stoul(field(108, 8), nullptr, 8)), std::stol(field(136, 12), nullptr, 8),
               field(157, 100)};
    out[name] = e;
    p += 512 + (size + 511) / 512 * 512;
  }
  return out;
}

class OciLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = TempDir::Create("oci-tree");
    ASSERT_OK(t);
    tree_ = std::make_unique<TempDir>(std::move(*t));
    Put("usr/local/bin/capsule-runtime", "binary", 0700);
    Put("usr/local/share/capsule/capsule-initrd.img", std::string(1000, 'i'), 0600);
    Put("usr/local/share/capsule/" + std::string(90, 'n') + "/" + std::string(60, 'f'), "long name", 0644);
    ASSERT_EQ(::symlink("vmlinux", (tree_->path() + "/usr/local/share/capsule/kernel").c_str()), 0);
  }
  void Put(const std::string& rel, const std::string& data, mode_t mode) {
    std::string path = tree_->path() + "/" + rel;
    ASSERT_OK(MkdirAll(path.substr(0, path.rfind('/'))));
    ASSERT_OK(WriteFile(path, data));
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }
  ImageOptions Options() const {
    ImageOptions o;
    o.tree = tree_->path();
    o.entrypoint = {"/usr/local/bin/capsule-runtime"};
    o.cmd = {"install", "--root", "/host", "--wait"};
    o.ref_name = "docker.io/capsule/capsule-node:0.1.0";
    return o;
  }
  std::unique_ptr<TempDir> tree_;
};

// The blob a descriptor names, after checking its digest and size.
std::string Resolve(const std::map<std::string, TarEntry>& layout, const json& desc) {
  std::string digest = desc.at("digest").get<std::string>();
  EXPECT_EQ(digest.substr(0, 7), "sha256:");
  auto it = layout.find("blobs/sha256/" + digest.substr(7));
  if (it == layout.end()) {
    ADD_FAILURE() << "no blob for " << digest;
    return "";
  }
  EXPECT_EQ("sha256:" + Sha256Hex(it->second.data), digest);
  EXPECT_EQ(desc.at("size").get<size_t>(), it->second.data.size());
  return it->second.data;
}

TEST_F(OciLayoutTest, DigestsAndSizesMatchTheBlobsAndTheLayerIsTheTree) {
  auto image = BuildImageLayout(Options());
  ASSERT_OK(image);
  auto layout = ReadTar(*image);
  ASSERT_TRUE(layout.count("oci-layout"));
  EXPECT_EQ(json::parse(layout["oci-layout"].data)["imageLayoutVersion"], "1.0.0");
  json index = json::parse(layout["index.json"].data);
  ASSERT_EQ(index["manifests"].size(), 1u);
  EXPECT_EQ(index["manifests"][0]["annotations"]["io.containerd.image.name"], "docker.io/capsule/capsule-node:0.1.0");
  json manifest = json::parse(Resolve(layout, index["manifests"][0]));
  EXPECT_EQ(manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json");
  json config = json::parse(Resolve(layout, manifest["config"]));
  ASSERT_EQ(manifest["layers"].size(), 1u);
  std::string layer = Resolve(layout, manifest["layers"][0]);
  EXPECT_EQ(config["rootfs"]["diff_ids"][0], manifest["layers"][0]["digest"]);
  EXPECT_EQ(config["config"]["Entrypoint"][0], "/usr/local/bin/capsule-runtime");
  EXPECT_EQ(layout.size(), 7u) << "oci-layout, index.json, blobs/, blobs/sha256/ and three blobs";

  auto files = ReadTar(layer);
  std::vector<std::string> names;
  for (const auto& [name, e] : files) {
    names.push_back(name);
    EXPECT_EQ(e.uid, 0u);
    EXPECT_EQ(e.mtime, 0);
  }
  std::string long_dir = "usr/local/share/capsule/" + std::string(90, 'n');
  std::vector<std::string> want = {"usr/",
                                   "usr/local/",
                                   "usr/local/bin/",
                                   "usr/local/bin/capsule-runtime",
                                   "usr/local/share/",
                                   "usr/local/share/capsule/",
                                   long_dir + "/",
                                   long_dir + "/" + std::string(60, 'f'),
                                   "usr/local/share/capsule/capsule-initrd.img",
                                   "usr/local/share/capsule/kernel"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(names, want);
  EXPECT_EQ(files["usr/local/bin/capsule-runtime"].data, "binary");
  EXPECT_EQ(files["usr/local/bin/capsule-runtime"].mode, 0755u);
  EXPECT_EQ(files["usr/local/share/capsule/capsule-initrd.img"].mode, 0644u);
  EXPECT_EQ(files["usr/local/share/capsule/kernel"].type, '2');
  EXPECT_EQ(files["usr/local/share/capsule/kernel"].link, "vmlinux");
}

TEST_F(OciLayoutTest, SameTreeGivesTheSameBytes) {
  auto a = BuildImageLayout(Options());
  ASSERT_OK(a);
  ::utimes((tree_->path() + "/usr/local/bin/capsule-runtime").c_str(), nullptr);  // touch: mtimes are not kept
  auto b = BuildImageLayout(Options());
  ASSERT_OK(b);
  EXPECT_TRUE(*a == *b);
}

TEST_F(OciLayoutTest, ExtraFilesJoinAtTheirOwnPath) {
  ImageOptions o = Options();
  auto libs = LddDependencies("/bin/true");
  ASSERT_OK(libs);
  ASSERT_FALSE(libs->empty());
  o.extra_files = *libs;
  auto image = BuildImageLayout(o);
  ASSERT_OK(image);
  auto layout = ReadTar(*image);
  json index = json::parse(layout["index.json"].data);
  json manifest = json::parse(Resolve(layout, index["manifests"][0]));
  auto files = ReadTar(Resolve(layout, manifest["layers"][0]));
  for (const std::string& lib : *libs) EXPECT_TRUE(files.count(lib.substr(1))) << lib;
}

}  // namespace
}  // namespace capsule::oci
