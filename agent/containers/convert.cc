// Field-by-field copies; the checks live in the handlers and the engine.
#include "agent/containers/convert.h"

#include <chrono>

namespace capsule::agent::containers {

v1::WaitProcessResponse WaitResponseFromExit(const engine::ExitInfo& exit) {
  v1::WaitProcessResponse out;
  out.set_status(exit.status);
  out.set_exited_at_unix_nanos(
      std::chrono::duration_cast<std::chrono::nanoseconds>(exit.exited_at.time_since_epoch()).count());
  out.set_oom_killed(exit.oom_killed);
  return out;
}

v1::ListProcessesResponse ProcessListToProto(const std::vector<engine::ProcessInfo>& processes) {
  v1::ListProcessesResponse out;
  for (const auto& p : processes) {
    v1::ProcessInfo* info = out.add_processes();
    info->set_pid(static_cast<uint32_t>(p.pid));
    info->set_exec_id(p.exec_id);
    info->set_command(p.command);
  }
  return out;
}

v1::ReadStreamResponse ReadResultToProto(engine::ReadResult&& read) {
  v1::ReadStreamResponse out;
  out.set_data(std::move(read.data));
  out.set_eof(read.eof);
  return out;
}

void NetworkStatsToProto(const std::vector<net::InterfaceStats>& stats, v1::StatsContainerResponse* out) {
  for (const auto& s : stats) {
    v1::NetworkStats* n = out->add_network();
    n->set_name(s.name);
    n->set_rx_bytes(s.rx_bytes);
    n->set_rx_packets(s.rx_packets);
    n->set_rx_errors(s.rx_errors);
    n->set_rx_dropped(s.rx_dropped);
    n->set_tx_bytes(s.tx_bytes);
    n->set_tx_packets(s.tx_packets);
    n->set_tx_errors(s.tx_errors);
    n->set_tx_dropped(s.tx_dropped);
  }
}

}  // namespace capsule::agent::containers
