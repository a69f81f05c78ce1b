// The fixture of the ctr end-to-end suites: one private containerd 1.6 per
// test binary with the busybox image imported into namespace "e2e", `ctr
// run` / `ctr` helpers that use the built shim, and the leak check after
// each test (no shim, QEMU, virtiofsd, capsule-vsockd, mount, VM dir or
// shim socket of ours left).
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/file_util.h"
#include "tests/e2e/e2e_env.h"
#include "tests/support/containerd_harness.h"
#include "tests/support/images/test_images.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {

using std::chrono::seconds;

inline constexpr const char* kNs = "e2e";
// A cold boot under TCG plus the task itself.
inline constexpr seconds kRunTimeout{180};

// A path as a URI path: percent-encodes what url.Parse would not take
// verbatim (here, the spaces a test puts in on purpose).
inline std::string UriPath(const std::string& path) {
  std::string out;
  for (char c : path) out += c == ' ' ? std::string("%20") : std::string(1, c);
  return out;
}

class CtrE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto env = E2eEnv::Create();
    ASSERT_OK(env);
    env_ = new E2eEnv(std::move(*env));
    ContainerdOptions o;
    o.env = {{"PATH", E2eEnv::PathWithShim()}};
    auto h = ContainerdHarness::Start(o);
    ASSERT_OK(h);
    ctrd_ = h->release();
    auto imported = ctrd_->Ctr({"-n", kNs, "images", "import", TestImageTar("busybox")}, seconds(120));
    ASSERT_TRUE(imported.ok() && imported->ok()) << (imported.ok() ? imported->err : imported.status().ToString());
  }
  static void TearDownTestSuite() {
    if (ctrd_ != nullptr && env_ != nullptr) env_->Reap(ctrd_->grpc_address(), {ctrd_->dir()});
    delete ctrd_;
    ctrd_ = nullptr;
    delete env_;
    env_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(ctrd_, nullptr) << "containerd did not start";
  }
  void TearDown() override {
    if (ctrd_ == nullptr) return;
    // `ctr run --rm` returns once containerd deleted the task; the shim then
    // exits on its own after containerd's Shutdown. Give that a bounded
    // while (as the CRI fixture does), so that a shim that outlives its task
    // is a leak and not a race.
    auto leaks = env_->Leaks(ctrd_->grpc_address(), {ctrd_->dir()}, kNs, ids_);
    for (int i = 0; i < 150 && !leaks.empty(); ++i) {
      ::usleep(100 * 1000);
      leaks = env_->Leaks(ctrd_->grpc_address(), {ctrd_->dir()}, kNs, ids_);
    }
    EXPECT_TRUE(leaks.empty()) << leaks.size() << " leaks, first: " << leaks.front();
    if (!leaks.empty()) env_->Reap(ctrd_->grpc_address(), {ctrd_->dir()});
    if (HasFailure()) ADD_FAILURE() << "containerd log tail:\n" << ctrd_->LogTail(8192);
  }

  // `ctr -n e2e run --rm --runtime io.containerd.capsule.v2 ... busybox <id> args...`
  // `flags` go before the image (e.g. {"--log-uri", uri}).
  Result<CommandResult> Run(const std::string& id, const std::vector<std::string>& args, bool detach = false,
                            const std::vector<std::string>& flags = {}) {
    ids_.push_back(id);
    std::vector<std::string> argv = {"-n", kNs, "run", "--runtime", kCapsuleRuntimeType, "--runtime-config-path",
                                     env_->config_path()};
    argv.push_back(detach ? "-d" : "--rm");
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(kBusyboxImage);
    argv.push_back(id);
    argv.insert(argv.end(), args.begin(), args.end());
    return ctrd_->Ctr(argv, kRunTimeout);
  }
  // The shim daemons of task `id` under this suite's containerd.
  std::vector<pid_t> ShimsOf(const std::string& id) const {
    std::vector<pid_t> out;
    for (const auto& [pid, cmd] : E2eEnv::Processes({"capsule-shimd"})) {
      if (cmd.find(" -id " + id + " ") != std::string::npos && cmd.find(ctrd_->grpc_address()) != std::string::npos)
        out.push_back(pid);
    }
    return out;
  }
  Result<CommandResult> Ctr(const std::vector<std::string>& args, seconds timeout = seconds(60)) {
    std::vector<std::string> argv = {"-n", kNs};
    argv.insert(argv.end(), args.begin(), args.end());
    return ctrd_->Ctr(argv, timeout);
  }
  // `ctr task rm [flags] id` then `ctr containers rm id`, each expected to
  // succeed.
  void RemoveTaskAndContainer(const std::string& id, const std::vector<std::string>& task_rm_flags = {},
                              seconds timeout = seconds(60)) {
    std::vector<std::string> task_rm = {"task", "rm"};
    task_rm.insert(task_rm.end(), task_rm_flags.begin(), task_rm_flags.end());
    task_rm.push_back(id);
    auto rm = Ctr(task_rm, timeout);
    ASSERT_OK(rm);
    EXPECT_EQ(rm->exit_code, 0) << rm->err;
    auto crm = Ctr({"containers", "rm", id});
    ASSERT_OK(crm);
    EXPECT_EQ(crm->exit_code, 0) << crm->err;
  }

  // `ctr events`, returned once it demonstrably receives events. (The
  // harness's SubscribeEvents reuses its probe names, so it works once per
  // containerd; this suite shares one containerd between tests.)
  static Result<StreamingCommand> SubscribeEvents(const std::string& tag) {
    ASSIGN_OR_RETURN(StreamingCommand events, ctrd_->StartCtr({"events"}));
    for (int i = 0; i < 20; ++i) {
      const std::string probe = "e2e-probe-" + tag + "-" + std::to_string(i);
      ASSIGN_OR_RETURN(CommandResult r, ctrd_->Ctr({"namespaces", "create", probe}));
      if (!r.ok()) return Internal("ctr namespaces create " + probe + ": " + r.err);
      auto seen = events.WaitForOutput("\"name\":\"" + probe + "\"", std::chrono::milliseconds(1000));
      (void)ctrd_->Ctr({"namespaces", "rm", probe});
      if (seen.ok()) return events;
      if (seen.status().code() != Code::kDeadlineExceeded) return std::move(seen).status();
    }
    return DeadlineExceeded("ctr events never showed a probe namespace");
  }

  static inline E2eEnv* env_ = nullptr;
  static inline ContainerdHarness* ctrd_ = nullptr;
  std::vector<std::string> ids_;
};

}  // namespace capsule::testing
