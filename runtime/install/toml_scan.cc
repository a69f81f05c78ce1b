// TOML statement scanner (see toml_scan.h). Follows TOML 1.0's lexical
// rules for keys, the four string forms, comments and nested brackets,
// which is all it takes to find where each statement starts and ends.
#include "runtime/install/toml_scan.h"

#include <fmt/format.h>

namespace capsule::install {
namespace {

bool IsBareKeyChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

class Scanner {
 public:
  explicit Scanner(std::string_view text) : t_(text) {}

  Result<std::vector<TomlItem>> Run() {
    std::vector<TomlItem> items;
    while (p_ < t_.size()) {
      TomlItem item;
      item.begin = p_;
      item.line = line_;
      SkipSpaces();
      Status st = Statement(item);
      if (!st.ok()) return std::move(st).WithContext(fmt::format("line {}", item.line));
      item.end = p_;
      items.push_back(std::move(item));
    }
    return items;
  }

  // Decodes one basic ("...") or literal ('...') single-line string at p_.
  Result<std::string> String() {
    char quote = t_[p_++];
    std::string out;
    while (p_ < t_.size() && t_[p_] != quote) {
      char c = t_[p_];
      if (c == '\n') return InvalidArgument("string not closed before the end of the line");
      if (quote == '"' && c == '\\' && p_ + 1 < t_.size()) {
        char e = t_[p_ + 1];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          default: out += '\\'; out += e; break;  // kept as written; only compared
        }
        p_ += 2;
        continue;
      }
      out += c;
      ++p_;
    }
    if (p_ >= t_.size()) return InvalidArgument("string not closed");
    ++p_;
    return out;
  }

  void SkipSpaces() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t')) ++p_;
  }
  // Spaces, newlines and comments between array elements.
  void SkipFiller() {
    while (p_ < t_.size()) {
      char c = t_[p_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++p_;
      } else if (c == '\n') {
        ++p_;
        ++line_;
      } else if (c == '#') {
        while (p_ < t_.size() && t_[p_] != '\n') ++p_;
      } else {
        break;
      }
    }
  }
  size_t pos() const { return p_; }
  void set_pos(size_t p) { p_ = p; }
  char at(size_t i) const { return i < t_.size() ? t_[i] : '\0'; }

 private:
  Status Statement(TomlItem& item) {
    char c = at(p_);
    if (c == '\n' || c == '\r' || c == '#' || c == '\0') {
      item.kind = TomlItem::Kind::kBlank;
      return RestOfLine();
    }
    if (c == '[') {
      bool array = at(p_ + 1) == '[';
      item.kind = array ? TomlItem::Kind::kArrayTable : TomlItem::Kind::kTable;
      p_ += array ? 2 : 1;
      ASSIGN_OR_RETURN(item.key, Key());
      if (at(p_) != ']' || (array && at(p_ + 1) != ']')) return InvalidArgument("table header not closed by ]");
      p_ += array ? 2 : 1;
      return RestOfLine();
    }
    item.kind = TomlItem::Kind::kKeyValue;
    ASSIGN_OR_RETURN(item.key, Key());
    if (at(p_) != '=') return InvalidArgument("expected = after a key");
    ++p_;
    SkipSpaces();
    item.value_begin = p_;
    RETURN_IF_ERROR(Value(&item.value_end));
    return RestOfLine();
  }

  // Dotted key up to (not including) '=' or ']'; spaces around parts skipped.
  Result<std::vector<std::string>> Key() {
    std::vector<std::string> parts;
    while (true) {
      SkipSpaces();
      char c = at(p_);
      if (c == '"' || c == '\'') {
        if (at(p_ + 1) == c && at(p_ + 2) == c) return InvalidArgument("multi-line string as a key");
        ASSIGN_OR_RETURN(std::string s, String());
        parts.push_back(std::move(s));
      } else {
        size_t start = p_;
        while (IsBareKeyChar(at(p_))) ++p_;
        if (p_ == start) return InvalidArgument("malformed key");
        parts.emplace_back(t_.substr(start, p_ - start));
      }
      SkipSpaces();
      if (at(p_) != '.') return parts;
      ++p_;
    }
  }

  // Scans a value to the newline that ends it (outside strings/brackets).
  Status Value(size_t* value_end) {
    int depth = 0;
    *value_end = p_;
    while (p_ < t_.size()) {
      char c = t_[p_];
      if (c == '\n') {
        if (depth == 0) return Status::Ok();
        ++line_;
        ++p_;
      } else if (c == '#') {
        while (p_ < t_.size() && t_[p_] != '\n') ++p_;
        continue;
      } else if (c == '"' || c == '\'') {
        RETURN_IF_ERROR(SkipString(c));
      } else {
        if (c == '[' || c == '{') ++depth;
        if (c == ']' || c == '}') --depth;
        if (depth < 0) return InvalidArgument("unbalanced ] or }");
        ++p_;
      }
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n') *value_end = p_;
    }
    if (depth != 0) return InvalidArgument("array or inline table not closed");
    return Status::Ok();
  }

  Status SkipString(char quote) {
    if (at(p_ + 1) == quote && at(p_ + 2) == quote) {  // multi-line form
      p_ += 3;
      while (p_ < t_.size()) {
        if (quote == '"' && t_[p_] == '\\') {
          if (at(p_ + 1) == '\n') ++line_;
          p_ += 2;
          continue;
        }
        if (t_[p_] == quote && at(p_ + 1) == quote && at(p_ + 2) == quote) {
          p_ += 3;
          while (at(p_) == quote) ++p_;  // up to two quotes may end the content
          return Status::Ok();
        }
        if (t_[p_] == '\n') ++line_;
        ++p_;
      }
      return InvalidArgument("multi-line string not closed");
    }
    return String().status();
  }

  // After a statement: optional spaces and a comment, then the newline.
  Status RestOfLine() {
    SkipSpaces();
    if (at(p_) == '#') {
      while (p_ < t_.size() && t_[p_] != '\n') ++p_;
    }
    if (at(p_) == '\r') ++p_;
    if (p_ >= t_.size()) return Status::Ok();
    if (t_[p_] != '\n') return InvalidArgument(fmt::format("unexpected '{}' after the statement", t_[p_]));
    ++p_;
    ++line_;
    return Status::Ok();
  }

  std::string_view t_;
  size_t p_ = 0;
  size_t line_ = 1;
};

}  // namespace

Result<std::vector<TomlItem>> ScanToml(std::string_view text) { return Scanner(text).Run(); }

Result<std::vector<TomlArrayString>> ArrayStrings(std::string_view text, const TomlItem& item, size_t* close) {
  std::string_view value = text.substr(0, item.value_end);
  Scanner s(value);
  s.set_pos(item.value_begin);
  if (s.at(s.pos()) != '[') return InvalidArgument("not an array");
  s.set_pos(s.pos() + 1);
  std::vector<TomlArrayString> out;
  while (true) {
    s.SkipFiller();
    char c = s.at(s.pos());
    if (c == ']') break;
    if (c != '"' && c != '\'') return InvalidArgument("not an array of strings");
    if (s.at(s.pos() + 1) == c && s.at(s.pos() + 2) == c) return InvalidArgument("multi-line string in the array");
    TomlArrayString e;
    e.begin = s.pos();
    ASSIGN_OR_RETURN(e.value, s.String());
    e.end = s.pos();
    out.push_back(std::move(e));
    s.SkipFiller();
    if (s.at(s.pos()) == ',') {
      s.set_pos(s.pos() + 1);
    } else if (s.at(s.pos()) != ']') {
      return InvalidArgument("expected , or ] in the array");
    }
  }
  if (close != nullptr) *close = s.pos();
  return out;
}

std::string TomlQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace capsule::install
