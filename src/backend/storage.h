// A block of device (or host) memory owned by a Backend. Tensors share Storage through
// shared_ptr; the Backend that made it frees it.
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
};

using StoragePtr = std::shared_ptr<Storage>;

}  // namespace wick
