// Options -> ImageInputs -> CpioArchive -> compressed file, with progress on
// stdout and a one-line summary (sizes, counts, time) for build logs.
#include "deploy/mkinitrd/mkinitrd.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <optional>
#include <cstdlib>
#include <sys/stat.h>

#include "deploy/mkinitrd/compress.h"
#include "deploy/mkinitrd/image_builder.h"
#include "runtime/common/file_util.h"
#include "runtime/common/version.h"

namespace capsule::deploy {
namespace {

struct Args {
  std::string agent, kernel_dir, output, kernel_out, busybox, compression = "zstd";
  std::vector<std::string> extra_modules, optional_modules;
  int level = 0;
  std::optional<uint32_t> mtime;
};

// SOURCE_DATE_EPOCH (reproducible-builds.org) or 0.
uint32_t DefaultMtime() {
  const char* env = std::getenv("SOURCE_DATE_EPOCH");
  return env ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : 0;
}

Status CopyKernel(const KernelTree& k, const std::string& out) {
  ASSIGN_OR_RETURN(std::string data, ReadFile(k.vmlinuz));
  return WriteFileAtomic(out, data, 0644);
}

Status Build(const Args& a) {
  auto started = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(Compression compression, ParseCompression(a.compression));
  ImageInputs in;
  in.agent = a.agent;
  ASSIGN_OR_RETURN(in.kernel, FindKernel(a.kernel_dir));
  in.modules.insert(in.modules.end(), a.extra_modules.begin(), a.extra_modules.end());
  in.optional_modules.insert(in.optional_modules.end(), a.optional_modules.begin(), a.optional_modules.end());
  in.busybox = a.busybox;
  CpioArchive archive(a.mtime.value_or(DefaultMtime()));
  ASSIGN_OR_RETURN(ImageReport report, BuildImage(in, archive));
  std::string cpio = archive.Serialize();
  RETURN_IF_ERROR_CTX(WriteCompressed(cpio, compression, a.level, a.output), "write " + a.output);
  if (!a.kernel_out.empty()) RETURN_IF_ERROR_CTX(CopyKernel(in.kernel, a.kernel_out), "copy kernel");
  struct stat st{};
  ::stat(a.output.c_str(), &st);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  fmt::print("capsule-mkinitrd: {} ({} KiB {}, {} KiB unpacked, {} entries: {} libraries, {} boot + {} optional "
             "modules{}) for kernel {} in {} ms\n",
             a.output, st.st_size / 1024, a.compression, cpio.size() / 1024, archive.size(), report.libraries.size(),
             report.modules.size(), report.optional_modules,
             report.busybox_applets ? fmt::format(", busybox with {} applets", report.busybox_applets) : "",
             in.kernel.release, ms.count());
  return Status::Ok();
}

}  // namespace

int RunMkinitrd(int argc, char** argv) {
  CLI::App app{"capsule-mkinitrd: build the Capsule guest initrd (capsule-agent as /init)"};
  app.set_version_flag("--version", std::string("capsule-mkinitrd ") + kVersion);
  Args a;
  app.add_option("--agent", a.agent, "capsule-agent binary to install as /init")->required()->check(CLI::ExistingFile);
  app.add_option("--kernel-dir", a.kernel_dir, "unpacked guest kernel (.cache/guest-kernel/current)")->required();
  app.add_option("--output", a.output, "initrd to write")->required();
  app.add_option("--kernel-out", a.kernel_out, "also copy the kernel image here");
  app.add_option("--module", a.extra_modules, "extra module for the boot set (repeatable)");
  app.add_option("--optional-module", a.optional_modules, "extra module shipped but not loaded at boot (repeatable)");
  app.add_option("--busybox", a.busybox, "add this busybox and its applet links (debug image)");
  app.add_option("--compression", a.compression, "zstd|gzip|none")->capture_default_str();
  app.add_option("--level", a.level, "compression level (0: the format's default)");
  app.add_option("--mtime", a.mtime, "timestamp of every entry (default $SOURCE_DATE_EPOCH or 0)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  Status st = Build(a);
  if (!st.ok()) {
    fmt::print(stderr, "capsule-mkinitrd: error: {}\n", st.message());
    return 1;
  }
  return 0;
}

}  // namespace capsule::deploy
