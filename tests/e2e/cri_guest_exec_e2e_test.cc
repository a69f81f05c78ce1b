// `capsule-runtime exec POD -- CMD` against a CRI pod of containerd 1.6: the
// command runs in the pod's guest outside its containers (the guest's pid
// namespace: it sees the agent as PID 1 and every container's processes),
// with a container's tools, stdin, a terminal that follows resizes, the
// command's exit status, and signals passed on. Nothing it started is left in
// the guest afterwards. One VM boot; the fixture checks nothing is left on
// the host after it.
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "tests/e2e/cri_e2e_fixture.h"
#include "tests/e2e/pty_command.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

constexpr milliseconds kCommandTimeout{60000};

class CriGuestExecE2eTest : public CriE2eTest {
 protected:
  std::string Cli() const { return std::string(std::getenv("CAPSULE_BUILD_DIR")) + "/runtime/cli/capsule-runtime"; }
  std::vector<std::string> Exec(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {Cli(), "--config", env_->config_path(), "exec"};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }
  // `capsule-runtime exec` with the tools of `tools`, to completion.
  Result<CommandResult> RunInGuest(const std::string& pod, const std::string& tools, const std::string& script) {
    return RunCommand(Exec({pod, "--tools-from", tools, "--", "sh", "-c", script}), kCommandTimeout);
  }
};

TEST_F(CriGuestExecE2eTest, ExecRunsOutsideTheContainersWithStdinTtySignalsAndExitStatus) {
  const v1::PodSandboxConfig pod = Pod("ge-pod", v1::POD);
  auto pod_id = RunPod(pod);
  ASSERT_OK(pod_id);
  auto tools = StartContainer(*pod_id, pod, "tools", {"sleep", "3600"});
  ASSERT_OK(tools);

  // The guest's pid namespace: PID 1 is the agent (the container's own PID 1
  // is its sleep), and the container's process is there under the guest's pid.
  auto ps = RunInGuest(*pod_id, *tools, "cat /proc/1/comm; ps -o pid,args");
  ASSERT_OK(ps);
  ASSERT_EQ(ps->exit_code, 0) << ps->out << ps->err;
  EXPECT_EQ(ps->out.substr(0, ps->out.find('\n')), "init") << ps->out;
  EXPECT_NE(ps->out.find("sleep 3600"), std::string::npos) << ps->out;
  // From inside the container, PID 1 is the pod's: the guest's pod holder,
  // named pause as the process it stands for.
  auto inside = cri_->ExecSync(*tools, {"cat", "/proc/1/comm", "/proc/1/cmdline"}, 30);
  ASSERT_OK(inside);
  EXPECT_EQ(inside->out.substr(0, inside->out.find('\n') + 1), "pause\n") << inside->out;
  EXPECT_NE(inside->out.find("--pod-holder"), std::string::npos) << inside->out;

  // The pod and the tools' container by the names kubectl shows, the
  // command's exit status, stderr apart.
  auto status = RunInGuest("default/ge-pod", "tools", "echo to-err >&2; exit 7");
  ASSERT_OK(status);
  EXPECT_EQ(status->exit_code, 7) << status->err;
  EXPECT_EQ(status->err, "to-err\n");

  // -i passes stdin; without it the command reads end of file at once.
  auto piped = RunCommand({"/bin/sh", "-c",
                           fmt::format("printf 'through-stdin\\n' | '{}' --config '{}' exec -i {} --tools-from {} -- cat",
                                       Cli(), env_->config_path(), pod_id->substr(0, 12), *tools)},
                          kCommandTimeout);
  ASSERT_OK(piped);
  EXPECT_EQ(piped->exit_code, 0) << piped->err;
  EXPECT_EQ(piped->out, "through-stdin\n");
  auto no_stdin = RunCommand(Exec({*pod_id, "--tools-from", *tools, "--", "cat"}), kCommandTimeout);
  ASSERT_OK(no_stdin);
  EXPECT_EQ(no_stdin->exit_code, 0) << no_stdin->err;
  EXPECT_EQ(no_stdin->out, "");

  // A reader that goes away (`| head`) gives the command SIGPIPE, as a
  // pipeline on the host would, and the CLI exits with its status.
  auto headed = RunCommand({"/bin/sh", "-c",
                            fmt::format("('{}' --config '{}' exec {} --tools-from tools -- yes; echo \"exec=$?\" >&2) "
                                        "| head -n 2",
                                        Cli(), env_->config_path(), *pod_id)},
                           kCommandTimeout);
  ASSERT_OK(headed);
  EXPECT_EQ(headed->out, "y\ny\n");
  EXPECT_NE(headed->err.find("exec=141"), std::string::npos) << headed->err;

  // -t: a terminal of the caller's size that follows a resize; every key,
  // Ctrl-C included, goes to the guest's shell.
  auto tty = PtyCommand::Start(Exec({"-it", *pod_id, "--tools-from", *tools, "--", "sh"}), 30, 100);
  ASSERT_OK(tty);
  ASSERT_OK(tty->Write("stty size\n"));
  EXPECT_OK(tty->WaitForOutput("30 100", kCommandTimeout)) << tty->output();
  tty->Consume();
  ASSERT_OK(tty->Resize(45, 123));
  ::usleep(500 * 1000);  // SIGWINCH reaches the CLI, which resizes the guest's pty
  ASSERT_OK(tty->Write("stty size\n"));
  EXPECT_OK(tty->WaitForOutput("45 123", kCommandTimeout)) << tty->output();
  ASSERT_OK(tty->Write("sleep 1000\n"));
  ::usleep(500 * 1000);
  ASSERT_OK(tty->Write("\x03"));  // Ctrl-C ends the sleep, not the session
  ASSERT_OK(tty->Write("echo after-$((40+2))\n"));
  EXPECT_OK(tty->WaitForOutput("after-42", kCommandTimeout)) << tty->output();
  ASSERT_OK(tty->Write("exit 5\n"));
  auto tty_exit = tty->Wait(kCommandTimeout);
  ASSERT_OK(tty_exit);
  EXPECT_EQ(*tty_exit, 5) << tty->output();

  // SIGTERM to the CLI goes to the guest command; the CLI exits as it did.
  auto long_run = StreamingCommand::Start(Exec({*pod_id, "--tools-from", *tools, "--", "sh", "-c",
                                                "echo started; exec sleep 3599"}));
  ASSERT_OK(long_run);
  ASSERT_OK(long_run->WaitForOutput("started", kCommandTimeout)) << long_run->output();
  ASSERT_OK(long_run->Signal(SIGTERM));
  auto wstatus = long_run->Wait(kCommandTimeout);
  ASSERT_OK(wstatus);
  ASSERT_TRUE(WIFEXITED(*wstatus)) << "the CLI died of the signal instead of passing it on";
  EXPECT_EQ(WEXITSTATUS(*wstatus), 128 + SIGTERM) << long_run->output();

  // --timeout: a command that runs longer is killed with what it started,
  // and the CLI exits 124 as timeout(1) does, saying why.
  auto timed = RunCommand(Exec({"--timeout", "2", *pod_id, "--tools-from", *tools, "--", "sh", "-c",
                                "sleep 1000 & exec sleep 1000"}),
                          kCommandTimeout);
  ASSERT_OK(timed);
  EXPECT_EQ(timed->exit_code, 124) << timed->err;
  EXPECT_NE(timed->err.find("ran past"), std::string::npos) << timed->err;

  // Nothing any of them started is left in the guest: no process, and only
  // the checking command's own cgroup.
  auto left = RunInGuest(*pod_id, *tools, "ps -o args | grep -c '^sleep 3599\\|^sleep 1000\\|^yes'; "
                                          "ls -d /sys/fs/cgroup/capsule-debug-* | wc -l");
  ASSERT_OK(left);
  EXPECT_EQ(left->out, "0\n1\n") << left->err;

  // The production guest image has no shell: without --tools-from, "sh" is
  // an error of the guest's (126) naming the way out; an unknown pod is ours (125).
  auto no_tools = RunCommand(Exec({*pod_id, "--", "sh"}), kCommandTimeout);
  ASSERT_OK(no_tools);
  EXPECT_EQ(no_tools->exit_code, 126) << no_tools->err;
  EXPECT_NE(no_tools->err.find("\"sh\""), std::string::npos) << no_tools->err;
  EXPECT_NE(no_tools->err.find("--tools-from"), std::string::npos) << no_tools->err;
  auto no_pod = RunCommand(Exec({"no-such-pod", "--", "true"}), kCommandTimeout);
  ASSERT_OK(no_pod);
  EXPECT_EQ(no_pod->exit_code, 125);
  EXPECT_NE(no_pod->err.find("no-such-pod"), std::string::npos) << no_pod->err;
  auto no_container = RunCommand(Exec({*pod_id, "--tools-from", "no-such-container", "--", "true"}), kCommandTimeout);
  ASSERT_OK(no_container);
  EXPECT_EQ(no_container->exit_code, 126);
  EXPECT_NE(no_container->err.find("no-such-container"), std::string::npos) << no_container->err;

  // The tenant replaces /bin/sh in its container. The operator's next
  // command from it runs that file, but with the container's capabilities
  // and without the guest's root (/proc/1/root); --tools-as-root is the
  // operator's explicit choice of the guest's root.
  auto own_caps = cri_->ExecSync(*tools, {"grep", "CapEff", "/proc/self/status"}, 30);
  ASSERT_OK(own_caps);
  auto planted = cri_->ExecSync(
      *tools,
      {"/bin/busybox", "sh", "-c",
       "rm /bin/sh && printf '%s\\n' '#!/bin/busybox sh' 'grep CapEff /proc/self/status' "
       "'ls /proc/1/root/ >/dev/null 2>&1 && echo guest-root-visible' 'exec /bin/busybox sh \"$@\"' > /bin/sh && "
       "chmod 755 /bin/sh"},
      30);
  ASSERT_OK(planted);
  ASSERT_EQ(planted->exit_code, 0) << planted->err;
  auto confined = RunInGuest(*pod_id, *tools, "id -u");
  ASSERT_OK(confined);
  EXPECT_EQ(confined->out, own_caps->out + "0\n") << confined->err;
  auto rooted = RunCommand(Exec({*pod_id, "--tools-from", *tools, "--tools-as-root", "--", "sh", "-c", "id -u"}),
                           kCommandTimeout);
  ASSERT_OK(rooted);
  EXPECT_NE(rooted->out.find("guest-root-visible\n0\n"), std::string::npos) << rooted->out << rooted->err;
  EXPECT_EQ(rooted->out.find(own_caps->out), std::string::npos) << rooted->out;

  ASSERT_OK(cri_->StopPod(*pod_id));
  ASSERT_OK(cri_->RemovePod(*pod_id));
}

}  // namespace
}  // namespace capsule::testing
