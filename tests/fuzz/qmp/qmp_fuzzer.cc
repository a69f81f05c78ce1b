// libFuzzer target for what Capsule reads from a VMM or from disk about a
// VM: the QMP byte stream (framing + message parsing + error mapping) and
// vm.json. The first byte picks the chunk size, so feed boundaries vary.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/hypervisor/qmp_protocol.h"
#include "runtime/hypervisor/vm_record.h"

using capsule::hypervisor::QmpLineReader;
using capsule::hypervisor::QmpReply;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t chunk = size > 0 ? static_cast<size_t>(data[0] % 64) + 1 : 1;
  QmpLineReader reader;
  for (size_t i = 0; i < in.size(); i += chunk) {
    if (!reader.Feed(in.substr(i, chunk)).ok()) break;
    while (auto line = reader.Next()) {
      auto msg = capsule::hypervisor::ParseQmpMessage(*line);
      if (!msg.ok()) continue;
      if (auto* reply = std::get_if<QmpReply>(&*msg)) {
        if (!reply->ok) (void)capsule::hypervisor::QmpErrorStatus("fuzz", *reply);
        (void)capsule::hypervisor::JsonForLog(reply->value);
      }
    }
  }
  auto record = capsule::hypervisor::VmRecordFromJson(in, "fuzz");
  if (record.ok()) {
    // What we read back must serialize and parse to the same record.
    auto again = capsule::hypervisor::VmRecordFromJson(capsule::hypervisor::VmRecordToJson(*record), "fuzz2");
    if (!again.ok() || !(*again == *record)) __builtin_trap();
  }
  return 0;
}
