// BlockingGate: admission for the blocking RPCs (see limits.h). Enter()
// hands out a slot while fewer than the limit are taken; the slot frees
// itself when the call ends.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <utility>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agent::server {

class BlockingGate {
 public:
  class Slot {
   public:
    explicit Slot(std::atomic<uint32_t>* in_use) : in_use_(in_use) {}
    Slot(Slot&& other) noexcept : in_use_(std::exchange(other.in_use_, nullptr)) {}
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (in_use_ != nullptr) in_use_->fetch_sub(1);
    }

   private:
    std::atomic<uint32_t>* in_use_;
  };

  explicit BlockingGate(uint32_t limit) : limit_(limit) {}

  // RESOURCE_EXHAUSTED naming `rpc` and the limit when all slots are taken.
  Result<Slot> Enter(std::string_view rpc);
  uint32_t in_use() const { return in_use_.load(); }

 private:
  const uint32_t limit_;
  std::atomic<uint32_t> in_use_{0};
};

}  // namespace capsule::agent::server
