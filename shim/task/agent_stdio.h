// ProcessStdio over the agent's stream RPCs (ReadStdout/ReadStderr block
// until data or end of stream; WriteStdin; CloseStdin): what the shim's
// StdioCopier moves between containerd's FIFOs and a guest process.
#pragma once

#include <string>

#include "shim/io/process_stdio.h"
#include "shim/pod/agent_handle.h"

namespace capsule::shim::task {

class AgentStdio : public io::ProcessStdio {
 public:
  AgentStdio(pod::AgentHandlePtr agent, std::string container_id, std::string exec_id)
      : agent_(std::move(agent)), container_id_(std::move(container_id)), exec_id_(std::move(exec_id)) {}

  Result<io::ReadChunk> Read(io::OutputStream stream, size_t max_bytes) override;
  Status Write(std::string_view data) override;
  Status CloseStdin() override;

 private:
  std::string Name() const;

  const pod::AgentHandlePtr agent_;
  const std::string container_id_;
  const std::string exec_id_;
};

}  // namespace capsule::shim::task
