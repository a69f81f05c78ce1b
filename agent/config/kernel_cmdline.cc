// Kernel command line tokenizer; quoting follows lib/cmdline.c: a quote
// toggles "inside quotes" anywhere in a word and quotes are dropped from the
// key and the value ("a=\"b c\"" -> a, b c).
#include "agent/config/kernel_cmdline.h"

#include <cctype>

namespace capsule::agent::config {
namespace {

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Reads one whitespace-delimited word starting at `pos`, honouring quotes.
std::string NextWord(std::string_view s, size_t& pos) {
  std::string word;
  bool quoted = false;
  for (; pos < s.size(); ++pos) {
    char c = s[pos];
    if (c == '"') {
      quoted = !quoted;
      word.push_back(c);
      continue;
    }
    if (!quoted && IsSpace(c)) break;
    word.push_back(c);
  }
  return word;
}

std::string StripQuotes(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c != '"') out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<KernelParam> ParseKernelCmdline(std::string_view cmdline) {
  std::vector<KernelParam> params;
  size_t pos = 0;
  for (;;) {
    while (pos < cmdline.size() && IsSpace(cmdline[pos])) ++pos;
    if (pos >= cmdline.size()) break;
    std::string word = NextWord(cmdline, pos);
    if (word == "--") break;  // what follows belongs to init's argv
    // The first '=' outside quotes splits key from value.
    size_t eq = std::string::npos;
    bool quoted = false;
    for (size_t i = 0; i < word.size(); ++i) {
      if (word[i] == '"') quoted = !quoted;
      if (word[i] == '=' && !quoted) {
        eq = i;
        break;
      }
    }
    KernelParam p;
    if (eq == std::string::npos) {
      p.key = StripQuotes(word);
    } else {
      p.key = StripQuotes(std::string_view(word).substr(0, eq));
      p.value = StripQuotes(std::string_view(word).substr(eq + 1));
    }
    params.push_back(std::move(p));
  }
  return params;
}

}  // namespace capsule::agent::config
