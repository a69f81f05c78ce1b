// Textual edits of containerd's top-level `imports` (see containerd_imports.h
// for what containerd 1.6 does with them).
#include "runtime/install/containerd_imports.h"

#include <fmt/format.h>

#include <optional>

#include "runtime/install/toml_scan.h"

namespace capsule::install {
namespace {

// The top-level statements: those before the first table header.
std::vector<TomlItem> TopLevel(const std::vector<TomlItem>& items) {
  std::vector<TomlItem> out;
  for (const TomlItem& it : items) {
    if (it.kind == TomlItem::Kind::kTable || it.kind == TomlItem::Kind::kArrayTable) break;
    out.push_back(it);
  }
  return out;
}

std::optional<TomlItem> FindTopLevel(const std::vector<TomlItem>& items, std::string_view key) {
  for (const TomlItem& it : TopLevel(items)) {
    if (it.kind == TomlItem::Kind::kKeyValue && it.key.size() == 1 && it.key[0] == key) return it;
  }
  return std::nullopt;
}

std::string ImportLine(std::string_view path) { return "imports = [" + TomlQuote(path) + "]\n"; }

// Where a new top-level line goes: after the last top-level key, else
// before the first table header (after any comments leading to it), else
// at the end.
size_t InsertionPoint(const std::vector<TomlItem>& items, size_t text_size) {
  std::optional<size_t> after_last_key;
  for (const TomlItem& it : items) {
    if (it.kind == TomlItem::Kind::kTable || it.kind == TomlItem::Kind::kArrayTable) {
      return after_last_key.value_or(it.begin);
    }
    if (it.kind == TomlItem::Kind::kKeyValue) after_last_key = it.end;
  }
  return after_last_key.value_or(text_size);
}

}  // namespace

Result<int> ContainerdConfigVersion(std::string_view text) {
  ASSIGN_OR_RETURN(auto items, ScanToml(text));
  auto v = FindTopLevel(items, "version");
  if (!v) return 1;
  std::string_view value = text.substr(v->value_begin, v->value_end - v->value_begin);
  if (value == "1") return 1;
  if (value == "2") return 2;
  return InvalidArgument(fmt::format("line {}: version {} (Capsule's installer knows containerd config versions 1 and 2)",
                                     v->line, value));
}

Result<ConfigEdit> AddImport(std::string_view text, std::string_view path) {
  ASSIGN_OR_RETURN(auto items, ScanToml(text));
  ConfigEdit edit{std::string(text), false};
  if (auto imports = FindTopLevel(items, "imports")) {
    size_t close = 0;
    auto elems = ArrayStrings(text, *imports, &close);
    if (!elems.ok()) return std::move(elems).status().WithContext(fmt::format("line {}: imports", imports->line));
    for (const TomlArrayString& e : *elems) {
      if (e.value == path) return edit;
    }
    if (elems->empty()) {
      edit.text.insert(close, TomlQuote(path));
    } else {
      edit.text.insert(elems->back().end, ", " + TomlQuote(path));
    }
    edit.changed = true;
    return edit;
  }
  size_t at = InsertionPoint(items, text.size());
  std::string line = ImportLine(path);
  if (at > 0 && text[at - 1] != '\n') line = "\n" + line;
  edit.text.insert(at, line);
  edit.changed = true;
  return edit;
}

Result<ConfigEdit> RemoveImport(std::string_view text, std::string_view path) {
  ASSIGN_OR_RETURN(auto items, ScanToml(text));
  ConfigEdit edit{std::string(text), false};
  auto imports = FindTopLevel(items, "imports");
  if (!imports) return edit;
  auto elems = ArrayStrings(text, *imports, nullptr);
  if (!elems.ok()) return std::move(elems).status().WithContext(fmt::format("line {}: imports", imports->line));
  for (size_t i = 0; i < elems->size(); ++i) {
    const TomlArrayString& e = (*elems)[i];
    if (e.value != path) continue;
    edit.changed = true;
    std::string_view stmt = text.substr(imports->begin, imports->end - imports->begin);
    if (elems->size() == 1 && (stmt == ImportLine(path) || stmt == ImportLine(path).substr(0, stmt.size()))) {
      edit.text.erase(imports->begin, imports->end - imports->begin);
    } else if (i + 1 < elems->size()) {
      edit.text.erase(e.begin, (*elems)[i + 1].begin - e.begin);
    } else if (i > 0) {
      size_t from = (*elems)[i - 1].end;
      edit.text.erase(from, e.end - from);
    } else {
      edit.text.erase(e.begin, e.end - e.begin);
    }
    return edit;
  }
  return edit;
}

std::string NewConfigWithImport(std::string_view path) {
  return "# Written by capsule-runtime install: containerd had no config here.\n"
         "version = 2\n" +
         ImportLine(path);
}

}  // namespace capsule::install
