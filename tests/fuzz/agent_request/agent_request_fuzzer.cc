// libFuzzer target for the agent's request checks: the first byte picks a
// request (CreateSandbox, an Interface, Routes, mount options, ids and
// paths), the rest is its protobuf encoding or its text. Conversion and
// validation never crash; what validation accepts holds what it promises
// (a resolv.conf without stray lines, a MAC in canonical form, an absolute
// guest path without "..").
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "agent/containers/validate.h"
#include "agent/net/validate.h"
#include "agent/pod/pod_spec.h"
#include "agent/server/convert.h"
#include "agent/server/convert_net.h"
#include "agent/storage/guest_path.h"
#include "runtime/common/mount_options.h"

namespace {

namespace v1 = ::capsule::agent::v1;
using namespace capsule::agent;

std::vector<std::string> SplitNul(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '\0') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

void Sandbox(const std::string& bytes) {
  v1::CreateSandboxRequest req;
  if (!req.ParseFromString(bytes)) return;
  pod::PodSpec spec = server::PodSpecFromProto(req);
  if (!pod::ValidatePodSpec(spec).ok()) return;
  auto conf = pod::ResolvConfFromDns(spec.dns);
  if (!conf.ok()) return;
  std::istringstream lines(*conf);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("nameserver ", 0) != 0 && line.rfind("search ", 0) != 0 && line.rfind("options ", 0) != 0 &&
        line.rfind("domain ", 0) != 0 && line.rfind("sortlist ", 0) != 0)
      __builtin_trap();  // a line resolv.conf does not know: an injection
  }
}

void Interface(const std::string& bytes) {
  v1::Interface in;
  if (!in.ParseFromString(bytes)) return;
  net::Interface i = server::InterfaceFromProto(in);
  (void)net::ValidateInterface(i);
  if (!i.hw_addr.empty()) {
    auto mac = net::NormalizeMac("hw_addr", i.hw_addr);
    if (mac.ok() && mac->size() != 17) __builtin_trap();
  }
}

void Routes(const std::string& bytes) {
  v1::Routes in;
  if (!in.ParseFromString(bytes)) return;
  for (const net::Route& r : server::RoutesFromProto(in)) (void)net::ValidateRoute("routes", r);
}

void Strings(const std::string& text) {
  const std::vector<std::string> parts = SplitNul(text);
  (void)capsule::ParseMountOptions("", parts);
  for (const std::string& p : parts) {
    (void)pod::CheckId("container_id", p);
    (void)containers::CheckExecId("exec_id", p, true);
    if (storage::CheckAbsolutePath("path", p).ok()) {
      if (p.empty() || p[0] != '/') __builtin_trap();
      if (("/" + p + "/").find("/../") != std::string::npos) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: Sandbox(rest); break;
    case 1: Interface(rest); break;
    case 2: Routes(rest); break;
    default: Strings(rest); break;
  }
  return 0;
}
