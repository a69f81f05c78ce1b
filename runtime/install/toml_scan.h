// A structural scanner for TOML text: splits a document into its top-level
// statements (table headers, key = value pairs, blank/comment lines) with
// byte ranges, so the installer can edit containerd's config by inserting
// or removing bytes and leave every other byte as the user wrote it.
// It is not a TOML parser: values are kept as text, only keys and the
// strings of an array value are decoded.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/common/status.h"

namespace capsule::install {

struct TomlItem {
  enum class Kind { kBlank, kTable, kArrayTable, kKeyValue };
  Kind kind = Kind::kBlank;
  size_t begin = 0;         // first byte of the statement's line
  size_t end = 0;           // one past its last byte, newline included
  size_t line = 0;          // 1-based line where it starts
  std::vector<std::string> key;  // decoded key path ("a.\"b.c\"" -> a, b.c)
  size_t value_begin = 0;   // the value's text (kKeyValue only)
  size_t value_end = 0;
};

// A string element of an array value, with its byte range in the document.
struct TomlArrayString {
  std::string value;
  size_t begin = 0;
  size_t end = 0;
};

// Splits `text` into statements; an error names the line that could not be
// scanned (an unterminated string or array, a malformed key).
Result<std::vector<TomlItem>> ScanToml(std::string_view text);

// The elements of the array value [value_begin, value_end) of `item`; an
// error when the value is not an array of strings. `close` gets the offset
// of the array's closing bracket.
Result<std::vector<TomlArrayString>> ArrayStrings(std::string_view text, const TomlItem& item,
                                                  size_t* close = nullptr);

// `s` as a TOML basic string ("..." with \ and " escaped).
std::string TomlQuote(std::string_view s);

}  // namespace capsule::install
