// See agent_stdio.h.
#include "shim/task/agent_stdio.h"

#include <fmt/format.h>

#include "shim/pod/agent_status.h"

namespace capsule::shim::task {

namespace v1 = agentclient::v1;
using agentclient::AgentClient;

std::string AgentStdio::Name() const {
  return exec_id_.empty() ? container_id_ : container_id_ + " exec " + exec_id_;
}

Result<io::ReadChunk> AgentStdio::Read(io::OutputStream stream, size_t max_bytes) {
  v1::ReadStreamRequest req;
  req.set_container_id(container_id_);
  req.set_exec_id(exec_id_);
  req.set_len(static_cast<uint32_t>(max_bytes));
  const bool out = stream == io::OutputStream::kStdout;
  auto resp = agent_->LongPoll<Result<v1::ReadStreamResponse>>([&](AgentClient& a) {
    return out ? a.ReadStdout(req) : a.ReadStderr(req);
  });
  if (!resp.ok()) return pod::FromAgent(resp.status(), (out ? "read stdout of " : "read stderr of ") + Name());
  // The guest's answer is input: never more than was asked for.
  if (resp->data().size() > max_bytes)
    return Internal(fmt::format("read {}: the agent returned {} bytes, more than the {} asked for", Name(),
                                resp->data().size(), max_bytes));
  io::ReadChunk chunk;
  chunk.data = std::move(*resp->mutable_data());
  chunk.eof = resp->eof();
  if (chunk.data.empty() && !chunk.eof) {
    // The agent promises data or eof; an empty answer would spin the copier.
    return Internal("read " + Name() + ": the agent returned neither data nor eof");
  }
  return chunk;
}

Status AgentStdio::Write(std::string_view data) {
  while (!data.empty()) {
    v1::WriteStreamRequest req;
    req.set_container_id(container_id_);
    req.set_exec_id(exec_id_);
    req.set_data(std::string(data));
    auto resp = agent_->LongPoll<Result<v1::WriteStreamResponse>>([&](AgentClient& a) { return a.WriteStdin(req); });
    if (!resp.ok()) return pod::FromAgent(resp.status(), "write stdin of " + Name());
    if (resp->len() == 0 || resp->len() > data.size())
      return Internal("write stdin of " + Name() + ": the agent took " + std::to_string(resp->len()) + " of " +
                      std::to_string(data.size()) + " bytes");
    data.remove_prefix(resp->len());
  }
  return Status::Ok();
}

Status AgentStdio::CloseStdin() {
  v1::CloseStdinRequest req;
  req.set_container_id(container_id_);
  req.set_exec_id(exec_id_);
  return pod::FromAgent(agent_->Call<Status>([&](AgentClient& a) { return a.CloseStdin(req); }),
                        "close stdin of " + Name());
}

}  // namespace capsule::shim::task
