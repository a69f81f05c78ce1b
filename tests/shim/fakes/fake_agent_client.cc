// See fake_agent_client.h.
#include "tests/shim/fakes/fake_agent_client.h"

#include <csignal>

namespace capsule::testing {

void FakeAgentClient::FailNext(const std::string& method, Status status) {
  std::lock_guard lock(mu_);
  failures_[method] = std::move(status);
}

void FakeAgentClient::SetScript(const std::string& cid, const std::string& exec_id, Script script) {
  std::lock_guard lock(mu_);
  scripts_[{cid, exec_id}] = std::move(script);
}

void FakeAgentClient::Exit(const std::string& cid, const std::string& exec_id, int code, const std::string& out) {
  std::lock_guard lock(mu_);
  auto p = FindProc(cid, exec_id);
  if (!p.ok()) return;
  (*p)->out += out;
  ExitProc(**p, code);
}

void FakeAgentClient::ExitOomKilled(const std::string& cid, const std::string& exec_id) {
  std::lock_guard lock(mu_);
  auto p = FindProc(cid, exec_id);
  if (!p.ok()) return;
  (*p)->oom_killed = true;
  ExitProc(**p, 137);
}

void FakeAgentClient::InjectOom(const std::string& cid) {
  std::lock_guard lock(mu_);
  ooms_.push_back(cid);
  cv_.notify_all();
}

void FakeAgentClient::set_oversized_reads(bool on) {
  std::lock_guard lock(mu_);
  oversized_reads_ = on;
}

size_t FakeAgentClient::pending_ooms() const {
  std::lock_guard lock(mu_);
  return ooms_.size();
}

std::vector<std::string> FakeAgentClient::calls() const {
  std::lock_guard lock(mu_);
  return calls_;
}

bool FakeAgentClient::called(const std::string& method) const {
  std::lock_guard lock(mu_);
  return std::find(calls_.begin(), calls_.end(), method) != calls_.end();
}

std::string FakeAgentClient::stdin_of(const std::string& cid, const std::string& exec_id) const {
  std::lock_guard lock(mu_);
  auto c = containers_.find(cid);
  if (c == containers_.end()) return "";
  auto p = c->second.procs.find(exec_id);
  return p == c->second.procs.end() ? "" : p->second.in;
}

bool FakeAgentClient::stdin_closed(const std::string& cid, const std::string& exec_id) const {
  std::lock_guard lock(mu_);
  auto c = containers_.find(cid);
  if (c == containers_.end()) return false;
  auto p = c->second.procs.find(exec_id);
  return p != c->second.procs.end() && p->second.in_closed;
}

av1::CreateSandboxRequest FakeAgentClient::sandbox() const {
  std::lock_guard lock(mu_);
  return sandbox_;
}

std::optional<av1::CreateContainerRequest> FakeAgentClient::created(const std::string& cid) const {
  std::lock_guard lock(mu_);
  auto c = containers_.find(cid);
  if (c == containers_.end()) return std::nullopt;
  return c->second.create;
}

std::string FakeAgentClient::last_update() const {
  std::lock_guard lock(mu_);
  return last_update_;
}

bool FakeAgentClient::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

size_t FakeAgentClient::container_count() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [id, c] : containers_) n += c.removed ? 0 : 1;
  return n;
}

Status FakeAgentClient::Enter(const std::string& method) {
  calls_.push_back(method);
  if (closed_) return Unavailable("fake agent: closed");
  auto f = failures_.find(method);
  if (f == failures_.end()) return Status::Ok();
  Status st = f->second;
  failures_.erase(f);
  return st;
}

Result<FakeAgentClient::Proc*> FakeAgentClient::FindProc(const std::string& cid, const std::string& exec_id) {
  auto c = containers_.find(cid);
  if (c == containers_.end() || c->second.removed) return NotFound("fake agent: no container " + cid);
  auto p = c->second.procs.find(exec_id);
  if (p == c->second.procs.end() || p->second.removed) return NotFound("fake agent: no process " + exec_id);
  return &p->second;
}

void FakeAgentClient::StartProc(const std::string& cid, const std::string& exec_id, Proc& p) {
  p.started = true;
  p.pid = next_pid_++;
  auto s = scripts_.find({cid, exec_id});
  if (s == scripts_.end()) return;
  p.out += s->second.out;
  p.err += s->second.err;
  if (s->second.exit_code) ExitProc(p, *s->second.exit_code);
}

void FakeAgentClient::ExitProc(Proc& p, int status) {
  if (p.exited) return;
  p.exited = true;
  p.status = status;
  cv_.notify_all();
}

Result<av1::CheckResponse> FakeAgentClient::Check(std::chrono::milliseconds) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("Check"));
  av1::CheckResponse r;
  r.set_status(av1::CheckResponse::SERVING);
  return r;
}

Result<av1::VersionResponse> FakeAgentClient::Version() { return Unimplemented("fake agent: Version"); }
Status FakeAgentClient::SetGuestTime(const av1::SetGuestTimeRequest& req) {
  RETURN_IF_ERROR(Gate("SetGuestTime"));
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("SetGuestTime"));
  guest_time_ = req;
  return Status::Ok();
}

av1::SetGuestTimeRequest FakeAgentClient::guest_time() const {
  std::lock_guard lock(mu_);
  return guest_time_;
}

uint64_t FakeAgentClient::reseeds() const {
  std::lock_guard lock(mu_);
  return reseeds_;
}
Result<av1::AddRandomnessResponse> FakeAgentClient::AddRandomness(const av1::AddRandomnessRequest& req) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("AddRandomness"));
  av1::AddRandomnessResponse r;
  r.set_reseeds(++reseeds_);
  r.set_bytes_added(req.data().size());
  return r;
}

Status FakeAgentClient::CreateSandbox(const av1::CreateSandboxRequest& req) {
  RETURN_IF_ERROR(Gate("CreateSandbox"));
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("CreateSandbox"));
  sandbox_ = req;
  return Status::Ok();
}

Result<av1::SetupSandboxResponse> FakeAgentClient::SetupSandbox(const av1::SetupSandboxRequest& req) {
  RETURN_IF_ERROR(Gate("SetupSandbox"));
  {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Enter("SetupSandbox"));
  }
  av1::SetupSandboxResponse resp;
  RETURN_IF_ERROR(SetGuestTime(req.time()));
  ASSIGN_OR_RETURN(*resp.mutable_randomness(), AddRandomness(req.randomness()));
  RETURN_IF_ERROR(CreateSandbox(req.sandbox()));
  for (const auto& iface : req.interfaces()) {
    av1::UpdateInterfaceRequest one;
    *one.mutable_interface() = iface;
    ASSIGN_OR_RETURN(*resp.add_interfaces(), UpdateInterface(one));
  }
  if (req.has_routes()) {
    av1::UpdateRoutesRequest routes;
    *routes.mutable_routes() = req.routes();
    ASSIGN_OR_RETURN(*resp.mutable_routes(), UpdateRoutes(routes));
  }
  if (!req.holder_container_id().empty()) {
    // As the agent: the pod holder becomes that container, already running.
    std::lock_guard lock(mu_);
    auto& c = containers_[req.holder_container_id()];
    if (!c.procs.empty() && !c.removed) return AlreadyExists("fake agent: container " + req.holder_container_id());
    c = Ctr{};
    c.create.set_container_id(req.holder_container_id());
    StartProc(req.holder_container_id(), "", c.procs[""]);
    resp.set_holder_pid(c.procs[""].pid);
  }
  return resp;
}

Status FakeAgentClient::DestroySandbox(const av1::DestroySandboxRequest&) {
  std::lock_guard lock(mu_);
  return Enter("DestroySandbox");
}

void FakeAgentClient::HoldNext(const std::string& method, std::function<void()> on_enter) {
  std::lock_guard lock(mu_);
  holds_[method] = on_enter ? std::move(on_enter) : [] {};
}

void FakeAgentClient::Release(const std::string& method) {
  std::lock_guard lock(mu_);
  held_.erase(method);
  cv_.notify_all();
}

void FakeAgentClient::TimeOutNext(const std::string& method, std::chrono::milliseconds after) {
  std::lock_guard lock(mu_);
  time_outs_[method] = after;
}

Status FakeAgentClient::Gate(const std::string& method) {
  std::unique_lock lock(mu_);
  if (auto t = time_outs_.find(method); t != time_outs_.end()) {
    const auto after = t->second;
    time_outs_.erase(t);
    calls_.push_back(method);
    if (cv_.wait_for(lock, after, [this] { return closed_; })) return Cancelled("fake agent: closed during " + method);
    return DeadlineExceeded("agent " + method + ": deadline exceeded after " + std::to_string(after.count()) + " ms");
  }
  auto h = holds_.find(method);
  if (h == holds_.end()) return Status::Ok();
  std::function<void()> on_enter = std::move(h->second);
  holds_.erase(h);
  held_.insert(method);
  lock.unlock();
  on_enter();
  lock.lock();
  cv_.wait(lock, [&] { return closed_ || held_.count(method) == 0; });
  if (closed_) return Cancelled("fake agent: closed during " + method);
  return Status::Ok();
}

void FakeAgentClient::HangNextCreateContainer(std::function<void()> on_enter) {
  std::lock_guard lock(mu_);
  hang_create_ = std::move(on_enter);
}

Result<av1::CreateContainerResponse> FakeAgentClient::CreateContainer(const av1::CreateContainerRequest& req) {
  RETURN_IF_ERROR(Gate("CreateContainer"));
  std::unique_lock lock(mu_);
  RETURN_IF_ERROR(Enter("CreateContainer"));
  if (hang_create_) {
    std::function<void()> on_enter;
    on_enter.swap(hang_create_);
    lock.unlock();
    on_enter();
    lock.lock();
    cv_.wait(lock, [this] { return closed_; });  // a guest that never answers
    return Cancelled("fake agent: closed during CreateContainer " + req.container_id());
  }
  auto& c = containers_[req.container_id()];
  if (!c.procs.empty() && !c.removed) return AlreadyExists("fake agent: container " + req.container_id());
  c = Ctr{};
  c.create = req;
  c.procs[""] = Proc{};
  c.procs[""].in_closed = req.stdin_closed();
  return av1::CreateContainerResponse();
}

Result<av1::StartContainerResponse> FakeAgentClient::StartContainer(const av1::StartContainerRequest& req) {
  RETURN_IF_ERROR(Gate("StartContainer"));
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("StartContainer"));
  ASSIGN_OR_RETURN(Proc * p, FindProc(req.container_id(), ""));
  if (p->started) return FailedPrecondition("fake agent: already started");
  StartProc(req.container_id(), "", *p);
  av1::StartContainerResponse r;
  r.set_pid(p->pid);
  return r;
}

Status FakeAgentClient::RemoveContainer(const av1::RemoveContainerRequest& req) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("RemoveContainer"));
  auto c = containers_.find(req.container_id());
  if (c == containers_.end() || c->second.removed) return NotFound("fake agent: no container " + req.container_id());
  // As in the guest: a removed container's pipes are gone with what was unread.
  for (auto& [id, p] : c->second.procs) {
    ExitProc(p, 128 + SIGKILL);
    p.out.clear();
    p.err.clear();
  }
  c->second.removed = true;
  return Status::Ok();
}

Result<av1::ExecProcessResponse> FakeAgentClient::ExecProcess(const av1::ExecProcessRequest& req) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("ExecProcess"));
  ASSIGN_OR_RETURN(Proc * init, FindProc(req.container_id(), ""));
  if (!init->started || init->exited) return FailedPrecondition("fake agent: container not running");
  auto& procs = containers_[req.container_id()].procs;
  if (procs.count(req.exec_id()) != 0 && !procs[req.exec_id()].removed) return AlreadyExists("fake agent: exec");
  Proc& p = procs[req.exec_id()] = Proc{};
  p.in_closed = req.stdin_closed();
  StartProc(req.container_id(), req.exec_id(), p);
  av1::ExecProcessResponse r;
  r.set_pid(p.pid);
  return r;
}

Status FakeAgentClient::SignalProcess(const av1::SignalProcessRequest& req) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("SignalProcess"));
  ASSIGN_OR_RETURN(Proc * p, FindProc(req.container_id(), req.exec_id()));
  if (p->exited) return NotFound("fake agent: process already exited");
  if (req.signal() == SIGKILL || req.signal() == SIGTERM) ExitProc(*p, 128 + static_cast<int>(req.signal()));
  if (req.all() && req.signal() == SIGKILL) {
    for (auto& [id, q] : containers_[req.container_id()].procs) ExitProc(q, 128 + SIGKILL);
  }
  return Status::Ok();
}

Status FakeAgentClient::RemoveProcess(const av1::RemoveProcessRequest& req) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("RemoveProcess"));
  ASSIGN_OR_RETURN(Proc * p, FindProc(req.container_id(), req.exec_id()));
  if (!p->exited) return FailedPrecondition("fake agent: process still running");
  p->removed = true;
  return Status::Ok();
}

Result<av1::ListProcessesResponse> FakeAgentClient::ListProcesses(const av1::ListProcessesRequest& req) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("ListProcesses"));
  auto c = containers_.find(req.container_id());
  if (c == containers_.end() || c->second.removed) return NotFound("fake agent: no container");
  av1::ListProcessesResponse r;
  for (const auto& [id, p] : c->second.procs) {
    if (!p.started || p.exited) continue;
    auto* info = r.add_processes();
    info->set_pid(p.pid);
    info->set_exec_id(id);
  }
  return r;
}

Status FakeAgentClient::UpdateContainer(const av1::UpdateContainerRequest& req) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("UpdateContainer"));
  last_update_ = req.resources_json();
  return Status::Ok();
}

Result<av1::StatsContainerResponse> FakeAgentClient::StatsContainer(const av1::StatsContainerRequest& req) {
  RETURN_IF_ERROR(Gate("StatsContainer"));
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("StatsContainer"));
  ASSIGN_OR_RETURN(Proc * p, FindProc(req.container_id(), ""));
  (void)p;
  av1::StatsContainerResponse r;
  r.mutable_metrics()->mutable_cpu()->set_usage_usec(4242);
  r.mutable_metrics()->mutable_memory()->set_usage(1 << 20);
  r.mutable_metrics()->mutable_pids()->set_current(1);
  return r;
}

Status FakeAgentClient::PauseContainer(const av1::PauseContainerRequest&) {
  RETURN_IF_ERROR(Gate("PauseContainer"));
  std::lock_guard lock(mu_);
  return Enter("PauseContainer");
}

Status FakeAgentClient::ResumeContainer(const av1::ResumeContainerRequest&) {
  std::lock_guard lock(mu_);
  return Enter("ResumeContainer");
}

Result<av1::WaitProcessResponse> FakeAgentClient::WaitProcess(const av1::WaitProcessRequest& req,
                                                             std::optional<std::chrono::milliseconds>) {
  std::unique_lock lock(mu_);
  RETURN_IF_ERROR(Enter("WaitProcess"));
  ASSIGN_OR_RETURN(Proc * p, FindProc(req.container_id(), req.exec_id()));
  cv_.wait(lock, [&] { return p->exited || closed_; });
  if (!p->exited) return Cancelled("fake agent: closed");
  av1::WaitProcessResponse r;
  r.set_status(p->status);
  r.set_oom_killed(p->oom_killed);
  r.set_exited_at_unix_nanos(1700000000123456789);
  return r;
}

Result<av1::ReadStreamResponse> FakeAgentClient::Read(const av1::ReadStreamRequest& req, bool err) {
  RETURN_IF_ERROR(Gate(err ? "ReadStderr" : "ReadStdout"));
  std::unique_lock lock(mu_);
  RETURN_IF_ERROR(Enter(err ? "ReadStderr" : "ReadStdout"));
  ASSIGN_OR_RETURN(Proc * p, FindProc(req.container_id(), req.exec_id()));
  std::string& buf = err ? p->err : p->out;
  cv_.wait(lock, [&] { return !buf.empty() || p->exited || closed_; });
  av1::ReadStreamResponse r;
  if (!buf.empty()) {
    const size_t n = oversized_reads_ ? buf.size() : std::min<size_t>(buf.size(), req.len() ? req.len() : 32768);
    r.set_data(buf.substr(0, n));
    buf.erase(0, n);
    return r;
  }
  if (closed_ && !p->exited) return Cancelled("fake agent: closed");
  r.set_eof(true);
  return r;
}

Result<av1::ReadStreamResponse> FakeAgentClient::ReadStdout(const av1::ReadStreamRequest& req) { return Read(req, false); }
Result<av1::ReadStreamResponse> FakeAgentClient::ReadStderr(const av1::ReadStreamRequest& req) { return Read(req, true); }

Result<av1::OOMEvent> FakeAgentClient::GetOOMEvent(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  RETURN_IF_ERROR(Enter("GetOOMEvent"));
  if (!cv_.wait_for(lock, timeout, [&] { return !ooms_.empty() || closed_; }))
    return DeadlineExceeded("fake agent: no OOM");
  if (ooms_.empty()) return Cancelled("fake agent: closed");
  av1::OOMEvent ev;
  ev.set_container_id(ooms_.front());
  ooms_.pop_front();
  return ev;
}

Result<av1::WriteStreamResponse> FakeAgentClient::WriteStdin(const av1::WriteStreamRequest& req) {
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("WriteStdin"));
  ASSIGN_OR_RETURN(Proc * p, FindProc(req.container_id(), req.exec_id()));
  p->in += req.data();
  av1::WriteStreamResponse r;
  r.set_len(static_cast<uint32_t>(req.data().size()));
  return r;
}

Status FakeAgentClient::CloseStdin(const av1::CloseStdinRequest& req) {
  RETURN_IF_ERROR(Gate("CloseStdin"));
  std::lock_guard lock(mu_);
  RETURN_IF_ERROR(Enter("CloseStdin"));
  ASSIGN_OR_RETURN(Proc * p, FindProc(req.container_id(), req.exec_id()));
  p->in_closed = true;
  return Status::Ok();
}

Status FakeAgentClient::TtyWinResize(const av1::TtyWinResizeRequest&) {
  std::lock_guard lock(mu_);
  return Enter("TtyWinResize");
}

Result<av1::Interface> FakeAgentClient::UpdateInterface(const av1::UpdateInterfaceRequest&) { return Unimplemented("fake"); }
Result<av1::Routes> FakeAgentClient::UpdateRoutes(const av1::UpdateRoutesRequest&) { return Unimplemented("fake"); }
Result<av1::Interfaces> FakeAgentClient::ListInterfaces() { return Unimplemented("fake"); }
Result<av1::Routes> FakeAgentClient::ListRoutes() { return Unimplemented("fake"); }
// The shim never starts guest processes (capsule-runtime exec does).
Result<av1::ExecProcessResponse> FakeAgentClient::ExecGuestProcess(const av1::ExecGuestProcessRequest&) {
  return Unimplemented("fake");
}

Result<av1::ReadGuestFileResponse> FakeAgentClient::ReadGuestFile(const av1::ReadGuestFileRequest&) {
  return Unimplemented("fake");
}

void FakeAgentClient::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

}  // namespace capsule::testing
