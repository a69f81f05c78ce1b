// Install / Uninstall (see installer.h). The manifest is saved after every
// step, so an install that fails half-way still uninstalls cleanly.
#include "runtime/install/installer.h"

#include <nlohmann/json.hpp>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/install/containerd_imports.h"
#include "runtime/install/dropin.h"
#include "runtime/install/manifest.h"
#include "runtime/install/root_dir.h"
#include "runtime/common/sha256.h"

namespace capsule::install {
namespace {

const log::Logger kInstallerLog("install");

// Writes the manifest; directories made for it are recorded in it too.
Status SaveManifest(const RootDir& root, const InstallLayout& layout, Manifest& m) {
  std::vector<std::string> created;
  RETURN_IF_ERROR(root.WriteAtomic(layout.Manifest(), ManifestToJson(m), 0644, &created));
  if (created.empty()) return Status::Ok();
  m.AddCreatedDirs(created);
  return root.WriteAtomic(layout.Manifest(), ManifestToJson(m), 0644);
}

Result<Manifest> LoadManifest(const RootDir& root, const InstallLayout& layout, bool* found) {
  ASSIGN_OR_RETURN(auto text, root.Read(layout.Manifest()));
  *found = text.has_value();
  if (!text) return Manifest{};
  return ManifestFromJson(*text, root.Display(layout.Manifest()));
}

// Copies one planned file unless it is already there as it should be.
Status InstallFile(const RootDir& root, const InstallLayout& layout, const PlannedFile& f, Manifest& m,
                   InstallReport& report) {
  ASSIGN_OR_RETURN(std::string data, ReadFile(f.source));
  std::string sha = Sha256Hex(data);
  std::string shown = root.Display(f.target);
  ASSIGN_OR_RETURN(auto current, root.Read(f.target));
  const ManifestFile* rec = m.Find(f.target);
  if (current) {
    std::string cur_sha = Sha256Hex(*current);
    if (rec == nullptr && f.keep_existing) {
      report.kept.push_back(f.target);
      kInstallerLog.Info("keeping {}: it was not written by capsule-runtime install", shown);
      return Status::Ok();
    }
    if (cur_sha == sha) {
      report.unchanged.push_back(f.target);
      return Status::Ok();
    }
    if (rec == nullptr) {
      return FailedPrecondition(shown + " exists and was not written by capsule-runtime install; remove it first");
    }
    if (cur_sha != rec->sha256) {
      if (f.keep_existing) {
        report.kept.push_back(f.target);
        kInstallerLog.Info("keeping {}: changed since capsule-runtime install wrote it", shown);
        return Status::Ok();
      }
      return FailedPrecondition(shown + " changed since capsule-runtime install wrote it; remove it first");
    }
  }
  std::vector<std::string> created;
  RETURN_IF_ERROR(root.WriteAtomic(f.target, data, f.mode, &created));
  m.AddCreatedDirs(created);
  m.Put(f.target, sha);
  report.written.push_back(f.target);
  kInstallerLog.Info("wrote {}", shown);
  return SaveManifest(root, layout, m);
}

// Writes `path` when its content differs; true when it did.
Result<bool> WriteIfDifferent(const RootDir& root, const std::string& path, const std::string& data, mode_t mode,
                              Manifest& m) {
  ASSIGN_OR_RETURN(auto current, root.Read(path));
  if (current && *current == data) return false;
  std::vector<std::string> created;
  RETURN_IF_ERROR(root.WriteAtomic(path, data, mode, &created));
  m.AddCreatedDirs(created);
  return true;
}

Status InstallContainerd(const RootDir& root, const InstallOptions& opts, Manifest& m, InstallReport& report) {
  const InstallLayout& layout = opts.layout;
  const std::string& main = opts.containerd_config;
  ASSIGN_OR_RETURN(auto current, root.Read(main));
  if (m.containerd && m.containerd->config != main) {
    return FailedPrecondition("already installed against " + root.Display(m.containerd->config) +
                              "; run capsule-runtime uninstall first");
  }
  if (!m.containerd) {
    // The original is saved and recorded before the config is touched.
    ContainerdRecord rec;
    rec.config = main;
    rec.dropin = layout.dropin;
    rec.existed = current.has_value();
    if (current) {
      ASSIGN_OR_RETURN(auto mode, root.Mode(main));
      rec.original_mode = static_cast<int>(mode.value_or(0644));
      rec.original_sha256 = Sha256Hex(*current);
      std::vector<std::string> created;
      RETURN_IF_ERROR(root.WriteAtomic(layout.SavedConfig(), *current, 0600, &created));
      m.AddCreatedDirs(created);
    }
    m.containerd = rec;
    RETURN_IF_ERROR(SaveManifest(root, layout, m));
  }
  int version = 2;
  if (current) {
    auto v = ContainerdConfigVersion(*current);
    if (!v.ok()) return std::move(v).status().WithContext(root.Display(main));
    version = *v;
  }
  ASSIGN_OR_RETURN(std::string dropin,
                   BuildDropin({current.value_or(""), main, version, layout.capsule_config}));
  ConfigEdit edit{NewConfigWithImport(layout.dropin), true};
  if (current) {
    auto e = AddImport(*current, layout.dropin);
    if (!e.ok()) return std::move(e).status().WithContext(root.Display(main));
    edit = std::move(*e);
  }
  // The drop-in first: an import of a missing file would stop containerd.
  ASSIGN_OR_RETURN(bool dropin_changed, WriteIfDifferent(root, layout.dropin, dropin, 0644, m));
  m.containerd->dropin_sha256 = Sha256Hex(dropin);
  (dropin_changed ? report.written : report.unchanged).push_back(layout.dropin);
  if (edit.changed) {
    mode_t mode = static_cast<mode_t>(m.containerd->original_mode);
    std::vector<std::string> created;
    RETURN_IF_ERROR(root.WriteAtomic(main, edit.text, mode, &created));
    m.AddCreatedDirs(created);
    report.written.push_back(main);
    kInstallerLog.Info("{} now imports {}", root.Display(main), layout.dropin);
  } else {
    report.unchanged.push_back(main);
  }
  m.containerd->written_sha256 = Sha256Hex(edit.text);
  report.containerd_config_changed = dropin_changed || edit.changed;
  return SaveManifest(root, layout, m);
}

Status UninstallContainerd(const RootDir& root, const InstallLayout& layout, const ContainerdRecord& c,
                           InstallReport& report) {
  ASSIGN_OR_RETURN(auto current, root.Read(c.config));
  std::string shown = root.Display(c.config);
  if (current && Sha256Hex(*current) == c.written_sha256) {
    if (c.existed) {
      ASSIGN_OR_RETURN(auto original, root.Read(layout.SavedConfig()));
      if (!original || Sha256Hex(*original) != c.original_sha256) {
        return Status(Code::kDataLoss, "the saved original of " + shown + " (" + root.Display(layout.SavedConfig()) +
                        ") is missing or changed; " + shown + " left as it is");
      }
      RETURN_IF_ERROR(root.WriteAtomic(c.config, *original, static_cast<mode_t>(c.original_mode)));
      kInstallerLog.Info("restored {} as it was before install", shown);
    } else {
      RETURN_IF_ERROR(root.Remove(c.config));
      report.removed.push_back(c.config);
      kInstallerLog.Info("removed {}: install had created it", shown);
    }
    report.containerd_config_changed = true;
  } else if (current) {
    ASSIGN_OR_RETURN(ConfigEdit edit, RemoveImport(*current, c.dropin));
    if (edit.changed) {
      RETURN_IF_ERROR(root.WriteAtomic(c.config, edit.text, static_cast<mode_t>(c.original_mode)));
      report.containerd_config_changed = true;
    }
    report.warnings.push_back(shown + " was edited since install: removed only its import of " + c.dropin);
  } else {
    report.warnings.push_back(shown + " is gone; nothing to restore");
  }
  ASSIGN_OR_RETURN(auto dropin, root.Read(c.dropin));
  if (dropin && Sha256Hex(*dropin) == c.dropin_sha256) {
    RETURN_IF_ERROR(root.Remove(c.dropin));
    report.removed.push_back(c.dropin);
    report.containerd_config_changed = true;
  } else if (dropin) {
    report.kept.push_back(c.dropin);
    report.warnings.push_back(root.Display(c.dropin) + " was changed since install; kept");
  }
  return root.Remove(layout.SavedConfig());
}

}  // namespace

std::string ReportToJson(const InstallReport& r) {
  nlohmann::json j = {{"action", r.action},   {"containerd_config_changed", r.containerd_config_changed},
                      {"written", r.written}, {"unchanged", r.unchanged},
                      {"removed", r.removed}, {"kept", r.kept},
                      {"warnings", r.warnings}};
  return j.dump(2) + "\n";
}

Result<InstallReport> Install(const InstallOptions& opts) {
  InstallReport report;
  report.action = "install";
  ASSIGN_OR_RETURN(RootDir root, RootDir::Open(opts.root));
  ASSIGN_OR_RETURN(auto plan, PlanFiles(opts.from, opts.layout));
  bool found = false;
  ASSIGN_OR_RETURN(Manifest m, LoadManifest(root, opts.layout, &found));
  for (const PlannedFile& f : plan) RETURN_IF_ERROR(InstallFile(root, opts.layout, f, m, report));
  RETURN_IF_ERROR(InstallContainerd(root, opts, m, report));
  return report;
}

Result<InstallReport> Uninstall(const InstallOptions& opts) {
  InstallReport report;
  report.action = "uninstall";
  ASSIGN_OR_RETURN(RootDir root, RootDir::Open(opts.root));
  bool found = false;
  ASSIGN_OR_RETURN(Manifest m, LoadManifest(root, opts.layout, &found));
  if (!found) {
    report.warnings.push_back("no " + root.Display(opts.layout.Manifest()) + ": nothing was installed");
    return report;
  }
  if (m.containerd) RETURN_IF_ERROR(UninstallContainerd(root, opts.layout, *m.containerd, report));
  for (const ManifestFile& f : m.files) {
    ASSIGN_OR_RETURN(auto current, root.Read(f.path));
    if (!current) continue;
    if (Sha256Hex(*current) != f.sha256) {
      report.kept.push_back(f.path);
      report.warnings.push_back(root.Display(f.path) + " was changed since install; kept");
      continue;
    }
    RETURN_IF_ERROR(root.Remove(f.path));
    report.removed.push_back(f.path);
  }
  RETURN_IF_ERROR(root.Remove(opts.layout.Manifest()));
  for (auto it = m.created_dirs.rbegin(); it != m.created_dirs.rend(); ++it) {
    RETURN_IF_ERROR(root.RemoveDirIfEmpty(*it));
  }
  for (const std::string& w : report.warnings) kInstallerLog.Warn("{}", w);
  return report;
}

}  // namespace capsule::install
