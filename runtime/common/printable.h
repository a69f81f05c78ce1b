// Text from an untrusted peer (a guest's error message, a tenant's name, an
// API server's body) made safe for one line of a log or a terminal: control
// bytes (C0, DEL and the C1 range, which terminals read as escape
// sequences), and bytes that are not UTF-8, are written as \xNN, and the
// text is cut to a bound, saying how much was left out.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace capsule {

// At most `max_bytes` of `text` (never a UTF-8 sequence split), escaped;
// "... (N more bytes)" when cut. A tab stays a tab when `keep_tabs`.
std::string Printable(std::string_view text, size_t max_bytes, bool keep_tabs = false);

}  // namespace capsule
