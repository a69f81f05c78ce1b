// The two ways a shim can hand an event to containerd:
//   TtrpcSender   Events/Forward on containerd's ttrpc socket ($TTRPC_ADDRESS),
//                 what containerd 1.6 gives every shim;
//   BinarySender  `<publish-binary> --address A publish --topic T --namespace N`
//                 with the Any on stdin, for a containerd that sets no
//                 TTRPC_ADDRESS (the shim v2 protocol's original path).
#pragma once

#include <chrono>
#include <string>

#include "runtime/ttrpc/client.h"
#include "shim/events/publisher.h"

namespace capsule::shim::events {

inline constexpr const char* kEventsService = "containerd.services.events.ttrpc.v1.Events";
inline constexpr const char* kForwardMethod = "Forward";
// containerd reads the namespace of a ttrpc call from this metadata key
// (namespaces/ttrpc.go).
inline constexpr const char* kNamespaceMetadataKey = "containerd-namespace-ttrpc";
// One dial of containerd's socket; a restarting containerd is retried by
// the queue, not here.
inline constexpr std::chrono::milliseconds kDialTimeout{1000};
inline constexpr std::chrono::milliseconds kForwardTimeout{5000};
inline constexpr std::chrono::milliseconds kPublishBinaryTimeout{10000};

class TtrpcSender : public Sender {
 public:
  explicit TtrpcSender(std::string address) : address_(std::move(address)) {}
  Status Send(const ev::Envelope& envelope) override;
  std::string Describe() const override { return "ttrpc " + address_; }

 private:
  const std::string address_;
  ttrpc::ClientPtr client_;  // used by the queue's one worker only; redialled after a failure
};

class BinarySender : public Sender {
 public:
  BinarySender(std::string binary, std::string containerd_address)
      : binary_(std::move(binary)), address_(std::move(containerd_address)) {}
  Status Send(const ev::Envelope& envelope) override;
  std::string Describe() const override { return binary_ + " publish"; }

 private:
  const std::string binary_;
  const std::string address_;
};

// TtrpcSender when `ttrpc_address` is set, else BinarySender; INVALID_ARGUMENT
// when neither is known.
Result<SenderPtr> MakeSender(const std::string& ttrpc_address, const std::string& publish_binary,
                             const std::string& containerd_address);

}  // namespace capsule::shim::events
