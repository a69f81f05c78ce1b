// See printable.h.
#include "runtime/common/printable.h"

#include <fmt/format.h>

namespace capsule {
namespace {

// The length of the well-formed UTF-8 sequence at the start of `s` that
// encodes a printable code point (not C1), or 0.
size_t PrintableSequence(std::string_view s) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  size_t len = 0;
  uint32_t cp = 0;
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    len = 2;
    cp = b0 & 0x1fu;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    len = 3;
    cp = b0 & 0x0fu;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    len = 4;
    cp = b0 & 0x07u;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xc0u) != 0x80u) return 0;
    cp = (cp << 6) | (b & 0x3fu);
  }
  // Overlong forms, surrogates, beyond U+10FFFF, and the C1 controls.
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff) ||
      (cp >= 0x80 && cp <= 0x9f))
    return 0;
  return len;
}

}  // namespace

std::string Printable(std::string_view text, size_t max_bytes, bool keep_tabs) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 16);
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t take = 1;
    if (c >= 0x80) take = PrintableSequence(text.substr(i));
    if (i + std::max<size_t>(take, 1) > max_bytes) break;
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else if (c == '\t' && keep_tabs) {
      out.push_back('\t');
    } else if (take > 1) {
      out.append(text.substr(i, take));
    } else {
      take = 1;
      out += fmt::format("\\x{:02x}", c);
    }
    i += take;
  }
  if (i < text.size()) out += fmt::format("... ({} more bytes)", text.size() - i);
  return out;
}

}  // namespace capsule
