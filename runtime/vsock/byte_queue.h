// ByteQueue: the bytes a guest sent that its host socket has not taken yet.
// Bounded by the credit we advertise (buf_alloc), so it never grows past it
// unless the guest cheats, which the connection checks before appending.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace capsule::vsock {

class ByteQueue {
 public:
  bool empty() const { return head_ == buf_.size(); }
  size_t size() const { return buf_.size() - head_; }
  const uint8_t* data() const { return buf_.data() + head_; }

  void Append(const std::vector<iovec>& iov) {
    for (const iovec& v : iov) {
      const auto* p = static_cast<const uint8_t*>(v.iov_base);
      buf_.insert(buf_.end(), p, p + v.iov_len);
    }
  }
  void Append(std::string_view s) { buf_.insert(buf_.end(), s.begin(), s.end()); }

  void Consume(size_t n) {
    head_ += std::min(n, size());
    if (empty()) {
      // Release a large buffer once drained; an idle connection keeps none.
      std::vector<uint8_t>().swap(buf_);
      head_ = 0;
    } else if (head_ >= kCompactThreshold && head_ * 2 >= buf_.size()) {
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  // Compact once this much consumed space sits at the front.
  static constexpr size_t kCompactThreshold = 64 * 1024;
  std::vector<uint8_t> buf_;
  size_t head_ = 0;
};

}  // namespace capsule::vsock
