// NoDestructor<T>: a function-local singleton that is never destroyed, for
// objects whose threads outlive exit() (destroying them would race those
// threads). Storage is inline; nothing is allocated.
#pragma once

#include <new>
#include <utility>

namespace capsule {

template <typename T>
class NoDestructor {
 public:
  template <typename... Args>
  explicit NoDestructor(Args&&... args) {
    new (storage_) T(std::forward<Args>(args)...);
  }
  NoDestructor(const NoDestructor&) = delete;
  NoDestructor& operator=(const NoDestructor&) = delete;
  ~NoDestructor() = default;  // deliberately leaves T alive

  T& get() { return *std::launder(reinterpret_cast<T*>(storage_)); }
  T* operator->() { return &get(); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace capsule
