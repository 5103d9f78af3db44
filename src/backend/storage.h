// A block of device (or host) memory owned by a Backend. Tensors share Storage through
// shared_ptr; the Backend that made it frees it. A Storage may instead borrow memory that
// something else owns (a mapped model file): it then keeps that owner alive and frees nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "wick/device.h"

namespace wick {

class Backend;

class Storage {
 public:
  Storage(Backend* backend, void* data, size_t nbytes) : backend_(backend), data_(data), nbytes_(nbytes) {}
  // Memory of `backend`'s device that `owner` owns: kept alive while the Storage lives, never
  // released to the backend (owner may be null: memory that nothing here needs to keep).
  Storage(Backend* backend, void* data, size_t nbytes, std::shared_ptr<const void> owner)
      : backend_(backend), data_(data), nbytes_(nbytes), owner_(std::move(owner)), borrowed_(true) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Backend& backend() const { return *backend_; }
  Device device() const;

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  Backend* backend_;
  void* data_;
  size_t nbytes_;
  std::shared_ptr<const void> owner_;
  bool borrowed_ = false;
};

using StoragePtr = std::shared_ptr<Storage>;

}  // namespace wick
