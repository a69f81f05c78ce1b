// ustar headers (POSIX.1-1988 with the POSIX.1-2001 prefix field for names
// up to 255 bytes), as every OCI tool and containerd's unpacker read them.
#include "deploy/node-image/tar_writer.h"

#include <cstring>

namespace capsule::oci {
namespace {

constexpr size_t kBlock = 512;

// `value` as zero-padded octal filling width-1 digits plus a NUL.
void Octal(char* field, size_t width, uint64_t value) {
  for (size_t i = width - 1; i-- > 0;) {
    field[i] = static_cast<char>('0' + (value & 7));
    value >>= 3;
  }
  field[width - 1] = '\0';
}

}  // namespace

Status TarWriter::Header(std::string_view name, char type, mode_t mode, uint64_t size, std::string_view link) {
  char h[kBlock] = {};
  std::string_view prefix;
  std::string_view base = name;
  if (name.size() > 100) {
    // Split at a '/' so that the prefix fits 155 bytes and the rest 100.
    size_t cut = name.rfind('/', 155);
    while (cut != std::string_view::npos && name.size() - cut - 1 > 100) cut = std::string_view::npos;
    if (cut == std::string_view::npos) return InvalidArgument("tar: name too long for ustar: " + std::string(name));
    prefix = name.substr(0, cut);
    base = name.substr(cut + 1);
  }
  if (link.size() > 100) return InvalidArgument("tar: symlink target too long: " + std::string(link));
  // An empty view may carry a null pointer, which memcpy must never get.
  if (!base.empty()) std::memcpy(h, base.data(), base.size());
  Octal(h + 100, 8, mode & 07777);
  Octal(h + 108, 8, 0);
  Octal(h + 116, 8, 0);
  Octal(h + 124, 12, size);
  Octal(h + 136, 12, static_cast<uint64_t>(mtime_));
  std::memset(h + 148, ' ', 8);
  h[156] = type;
  if (!link.empty()) std::memcpy(h + 157, link.data(), link.size());
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  if (!prefix.empty()) std::memcpy(h + 345, prefix.data(), prefix.size());
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  Octal(h + 148, 7, sum);
  h[155] = ' ';
  out_.append(h, kBlock);
  return Status::Ok();
}

Status TarWriter::AddFile(std::string_view name, std::string_view data, mode_t mode) {
  RETURN_IF_ERROR(Header(name, '0', mode, data.size(), {}));
  out_.append(data);
  out_.append((kBlock - data.size() % kBlock) % kBlock, '\0');
  return Status::Ok();
}

Status TarWriter::AddDirectory(std::string_view name, mode_t mode) {
  std::string n(name);
  if (n.empty() || n.back() != '/') n += '/';
  return Header(n, '5', mode, 0, {});
}

Status TarWriter::AddSymlink(std::string_view name, std::string_view target) {
  return Header(name, '2', 0777, 0, target);
}

std::string TarWriter::Finish() {
  out_.append(2 * kBlock, '\0');
  return std::move(out_);
}

}  // namespace capsule::oci
