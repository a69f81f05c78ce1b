// modules.dep parsing and a depth-first topological sort over it.
#include "agent/modules/module_index.h"

#include <algorithm>
#include <fmt/format.h>

namespace capsule::agent::modules {
namespace {

constexpr size_t kMaxDepth = 64;  // far beyond any real chain; stops runaway input

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitWords(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

template <typename F>
void ForEachLine(std::string_view text, F&& f) {
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    ++line_no;
    f(line, line_no);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

}  // namespace

std::string NormalizeModuleName(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::vector<std::string> ModuleFileLines(std::string_view text) {
  std::vector<std::string> out;
  ForEachLine(text, [&](std::string_view line, size_t) {
    if (!line.empty() && line.front() != '#') out.emplace_back(line);
  });
  return out;
}

std::string ModuleNameFromPath(std::string_view path) {
  size_t slash = path.rfind('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  size_t ko = base.find(".ko");
  if (ko != std::string_view::npos) base = base.substr(0, ko);
  return NormalizeModuleName(base);
}

Result<ModuleIndex> ModuleIndex::Parse(std::string_view modules_dep, std::string_view source) {
  ModuleIndex index;
  index.source_ = std::string(source);
  Status error;
  ForEachLine(modules_dep, [&](std::string_view raw, size_t line_no) {
    if (!error.ok()) return;
    std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#') return;
    size_t colon = line.find(':');
    std::string_view path = colon == std::string_view::npos ? line : Trim(line.substr(0, colon));
    if (colon == std::string_view::npos || path.empty() || path.find(".ko") == std::string_view::npos) {
      error = InvalidArgument(fmt::format("{}:{}: expected 'module.ko: deps...', got '{}'", source,
                                          line_no, line));
      return;
    }
    Entry e{std::string(path), {}};
    for (std::string_view dep : SplitWords(line.substr(colon + 1))) {
      e.deps.push_back(ModuleNameFromPath(dep));
    }
    index.modules_[ModuleNameFromPath(path)] = std::move(e);
  });
  if (!error.ok()) return error;
  return index;
}

bool ModuleIndex::Contains(std::string_view name) const {
  return modules_.find(NormalizeModuleName(name)) != modules_.end();
}

Result<std::string> ModuleIndex::PathOf(std::string_view name) const {
  auto it = modules_.find(NormalizeModuleName(name));
  if (it == modules_.end()) return NotFound(fmt::format("module {} not in {}", name, source_));
  return it->second.path;
}

Result<std::vector<std::string>> ModuleIndex::DependenciesOf(std::string_view name) const {
  auto it = modules_.find(NormalizeModuleName(name));
  if (it == modules_.end()) return NotFound(fmt::format("module {} not in {}", name, source_));
  return it->second.deps;
}

Status ModuleIndex::Visit(const std::string& name, std::set<std::string>& done,
                          std::vector<std::string>& stack, std::vector<std::string>& out) const {
  if (done.count(name) != 0) return Status::Ok();
  if (std::find(stack.begin(), stack.end(), name) != stack.end() || stack.size() > kMaxDepth) {
    return FailedPrecondition(fmt::format("{}: dependency cycle through module {}", source_, name));
  }
  auto it = modules_.find(name);
  if (it == modules_.end()) {
    std::string via = stack.empty() ? "" : fmt::format(" (needed by {})", stack.back());
    return NotFound(fmt::format("module {}{} not in {}", name, via, source_));
  }
  stack.push_back(name);
  for (const auto& dep : it->second.deps) RETURN_IF_ERROR(Visit(dep, done, stack, out));
  stack.pop_back();
  done.insert(name);
  out.push_back(it->second.path);
  return Status::Ok();
}

Result<std::vector<std::string>> ModuleIndex::LoadOrder(const std::vector<std::string>& names) const {
  std::set<std::string> done;
  std::vector<std::string> out;
  for (const auto& n : names) {
    std::vector<std::string> stack;
    RETURN_IF_ERROR(Visit(NormalizeModuleName(n), done, stack, out));
  }
  return out;
}

std::string ModuleIndex::Subset(const std::vector<std::string>& paths) const {
  std::vector<std::string> sorted = paths;
  std::sort(sorted.begin(), sorted.end());
  std::string text;
  for (const auto& path : sorted) {
    auto it = modules_.find(ModuleNameFromPath(path));
    if (it == modules_.end()) continue;
    text += path + ":";
    for (const auto& dep : it->second.deps) {
      auto d = modules_.find(dep);
      if (d != modules_.end()) text += " " + d->second.path;
    }
    text += "\n";
  }
  return text;
}

std::set<std::string, std::less<>> ParseBuiltinModules(std::string_view modules_builtin) {
  std::set<std::string, std::less<>> names;
  ForEachLine(modules_builtin, [&](std::string_view raw, size_t) {
    std::string_view line = Trim(raw);
    if (!line.empty() && line.front() != '#') names.insert(ModuleNameFromPath(line));
  });
  return names;
}

}  // namespace capsule::agent::modules
