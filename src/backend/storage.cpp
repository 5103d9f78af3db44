#include "backend/storage.h"

#include "backend/backend.h"
#include "wick/error.h"

namespace wick {

Storage::~Storage() {
  if (backend_) backend_->release(data_, nbytes_);
}

Device Storage::device() const { return backend_->device(); }

void throw_not_supported(const Backend& backend, OpKey op, DType dtype) {
  throw NotSupportedError(detail::str_cat(op.name(), ": not supported for dtype ", dtype, " on ", backend.name()));
}

}  // namespace wick
