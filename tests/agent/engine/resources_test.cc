// cgroup v2 behaviour: placement, freezer, stats, limits (cpu, memory with
// OOM kill and event, pids), updates, and removal. Tests needing a
// controller the host's cgroup2 lacks skip here; engine_vm_test runs them
// in a guest kernel with a pure cgroup2 hierarchy.
#include "agent/engine/cgroup_stats.h"
#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "runtime/oci/spec_parser.h"
#include "tests/agent/engine/engine_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine::testing {
namespace {

using namespace std::chrono_literals;

#define REQUIRE_CONTROLLER(name)                                                                       \
  if (!HasController(cgroup_root_, name))                                                              \
  GTEST_SKIP() << "cgroup2 at " << cgroup_root_ << " lacks the " name                                  \
               << " controller (bound to cgroup v1 on this host); engine_vm_test covers it in a guest"

std::string Read(const std::string& path) { return ReadFile(path).value_or("<missing>"); }

TEST_F(EngineTest, ProcessesLandInTheContainerCgroupAndNamespace) {
  ContainerPtr c = StartContainer("cg", WithCgroup(DefaultSpec({"sh", "-c", "grep ^0:: /proc/self/cgroup; echo ready; exec sleep 1000"}), "cg"));
  ASSERT_TRUE(c);
  // cgroup namespace: the container sees its own cgroup as the root.
  EXPECT_EQ(ReadUntil(*c->Io(""), Stream::kStdout, "ready\n"), "0::/\nready\n");
  EXPECT_EQ(Read(CgroupDir("cg") + "/cgroup.procs"), std::to_string(c->init_pid()) + "\n");
}

TEST_F(EngineTest, PauseAndResumeFreezeTheCgroup) {
  ContainerPtr c = StartContainer("frz", WithCgroup(DefaultSpec({"cat"}), "frz"));
  ASSERT_TRUE(c);
  ASSERT_OK(c->Pause());
  EXPECT_EQ(c->state(), ContainerState::kPaused);
  EXPECT_EQ(EventValue(Read(CgroupDir("frz") + "/cgroup.events"), "frozen"), 1u);
  EXPECT_EQ(c->Pause().code(), Code::kFailedPrecondition);
  EXPECT_EQ(c->Exec("e", Parse(DefaultSpec({"true"})).process).status().code(), Code::kFailedPrecondition);
  auto io = *c->Io("");
  ASSERT_OK(io->Write("while-frozen\n"));  // sits in the pipe
  ASSERT_OK(c->Resume());
  EXPECT_EQ(c->state(), ContainerState::kRunning);
  EXPECT_EQ(EventValue(Read(CgroupDir("frz") + "/cgroup.events"), "frozen"), 0u);
  EXPECT_EQ(ReadUntil(io, Stream::kStdout, "while-frozen\n"), "while-frozen\n");
  Status resume = c->Resume();
  EXPECT_EQ(resume.code(), Code::kFailedPrecondition);
  EXPECT_REASON(resume, reason::kWrongState);
}

TEST_F(EngineTest, RemovingAPausedContainerWorks) {
  ContainerPtr c = StartContainer("frzrm", DefaultSpec({"sleep", "1000"}));
  ASSERT_TRUE(c);
  ASSERT_OK(c->Pause());
  ASSERT_OK(sandbox_->Remove("frzrm", 10s));
  EXPECT_EQ(c->Wait("")->status, 128 + SIGKILL);
}

TEST_F(EngineTest, StatsReportCpuUsage) {
  ContainerPtr c = StartContainer("stats", DefaultSpec({"sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done; exec sleep 1000"}));
  ASSERT_TRUE(c);
  EXPECT_EQ(ReadUntil(*c->Io(""), Stream::kStdout, "done\n"), "done\n");
  auto m = c->Stats();
  ASSERT_OK(m);
  ASSERT_TRUE(m->cpu.has_value());
  EXPECT_GT(m->cpu->usage_usec, 0u);
  EXPECT_GT(m->cpu->user_usec + m->cpu->system_usec, 0u);
  if (HasController(cgroup_root_, "memory")) {
    ASSERT_TRUE(m->memory.has_value());
    EXPECT_GT(m->memory->usage, 0u);
    EXPECT_GT(m->memory->Stat("anon") + m->memory->Stat("file"), 0u);
  }
  if (HasController(cgroup_root_, "pids")) {
    ASSERT_TRUE(m->pids.has_value());
    EXPECT_EQ(m->pids->current, 1u);
  }
}

TEST_F(EngineTest, CpuLimitAndUpdateWriteCpuMax) {
  REQUIRE_CONTROLLER("cpu");
  auto spec = WithCgroup(DefaultSpec({"sleep", "1000"}), "cpu");
  spec["linux"]["resources"] = {{"cpu", {{"quota", 50000}, {"period", 100000}, {"shares", 1024}}}};
  ContainerPtr c = StartContainer("cpu", spec);
  ASSERT_TRUE(c);
  EXPECT_EQ(Read(CgroupDir("cpu") + "/cpu.max"), "50000 100000\n");
  EXPECT_EQ(Read(CgroupDir("cpu") + "/cpu.weight"), "39\n");
  auto update = oci::ParseLinuxResources(R"({"cpu": {"quota": -1, "period": 200000}})");
  ASSERT_OK(update);
  ASSERT_OK(c->Update(*update));
  EXPECT_EQ(Read(CgroupDir("cpu") + "/cpu.max"), "max 200000\n");
}

TEST_F(EngineTest, MemoryLimitOomKillsAndRaisesEvent) {
  REQUIRE_CONTROLLER("memory");
  auto spec = WithCgroup(DefaultSpec({"sh", "-c", "echo start; exec tail /dev/zero"}), "oom");
  spec["linux"]["resources"] = {{"memory", {{"limit", 16 << 20}, {"swap", 16 << 20}}}};
  ContainerPtr c = StartContainer("oom", spec);
  ASSERT_TRUE(c);
  EXPECT_EQ(Read(CgroupDir("oom") + "/memory.max"), std::to_string(16 << 20) + "\n");
  auto exit = c->Wait("");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 128 + SIGKILL);
  EXPECT_TRUE(exit->oom_killed);
  auto event = sandbox_->WaitOomEvent(10s);
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(*event, "oom");
  auto m = c->Stats();
  ASSERT_OK(m);
  ASSERT_TRUE(m->memory_events.has_value());
  EXPECT_GE(m->memory_events->oom_kill, 1u);
}

TEST_F(EngineTest, PidsLimitMakesForkFail) {
  REQUIRE_CONTROLLER("pids");
  // sh plus three sleeps fill a limit of 4; the fourth fork fails and ash exits.
  auto spec = WithCgroup(DefaultSpec({"sh", "-c", "for i in 1 2 3 4 5; do sleep 100 & done; echo not-reached"}), "pids");
  spec["linux"]["resources"] = {{"pids", {{"limit", 4}}}};
  ContainerPtr c = StartContainer("pids", spec);
  ASSERT_TRUE(c);
  EXPECT_EQ(Read(CgroupDir("pids") + "/pids.max"), "4\n");
  auto out = Drain(*c->Io(""));
  EXPECT_EQ(out.first, "");
  EXPECT_NE(out.second.find("Resource temporarily unavailable"), std::string::npos) << out.second;
  auto exit = c->Wait("");
  ASSERT_OK(exit);
  EXPECT_NE(exit->status, 0);
  auto m = c->Stats();
  ASSERT_OK(m);
  ASSERT_TRUE(m->pids.has_value());
  EXPECT_EQ(m->pids->limit, 4u);
}

}  // namespace
}  // namespace capsule::engine::testing
