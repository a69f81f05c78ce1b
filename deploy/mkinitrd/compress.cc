// Runs zstd/gzip as filters over a temp file next to the output. Both are
// deterministic for a given input and level (gzip -n drops name and time).
#include "deploy/mkinitrd/compress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "deploy/mkinitrd/tools.h"
#include "runtime/common/file_util.h"

namespace capsule::deploy {
namespace {

constexpr int kDefaultZstdLevel = 3;
constexpr int kDefaultGzipLevel = 6;

}  // namespace

Result<Compression> ParseCompression(std::string_view name) {
  if (name == "zstd") return Compression::kZstd;
  if (name == "gzip") return Compression::kGzip;
  if (name == "none") return Compression::kNone;
  return InvalidArgument(fmt::format("compression '{}' is not one of zstd, gzip, none", name));
}

Status WriteCompressed(const std::string& data, Compression c, int level, const std::string& out_path) {
  const std::string raw = out_path + ".cpio.tmp";
  const std::string packed = out_path + ".tmp";
  Status st = WriteFile(raw, data);
  if (st.ok()) {
    if (c == Compression::kNone) {
      st = ::rename(raw.c_str(), packed.c_str()) == 0 ? Status::Ok() : ErrnoStatus("rename " + raw);
    } else if (c == Compression::kZstd) {
      auto zstd = FindProgram("zstd", "zstd");
      st = zstd.ok() ? RunFilter({*zstd, "-q", "-T0", fmt::format("-{}", level ? level : kDefaultZstdLevel), "-c"},
                                 raw, packed)
                     : zstd.status();
    } else {
      auto gzip = FindProgram("gzip", "gzip");
      st = gzip.ok() ? RunFilter({*gzip, "-n", fmt::format("-{}", level ? level : kDefaultGzipLevel), "-c"}, raw,
                                 packed)
                     : gzip.status();
    }
  }
  if (st.ok() && ::rename(packed.c_str(), out_path.c_str()) != 0) st = ErrnoStatus("rename to " + out_path);
  ::unlink(raw.c_str());
  ::unlink(packed.c_str());
  return st;
}

}  // namespace capsule::deploy
