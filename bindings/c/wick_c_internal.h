// What the three files of the C API share: the handles, the guard that turns every exception into
// a status and this thread's message, and the checks of C arguments.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <utility>

#include "wick/dist.h"
#include "wick/io.h"
#include "wick/quant.h"
#include "wick/tensor.h"
#include "wick/wick_c.h"

struct wick_tensor {
  wick::Tensor t;
};
struct wick_qtensor {
  wick::quant::QTensor q;
};

namespace wick::capi {

// A misuse of the C API itself (a null pointer, an unknown enum value): WICK_ERROR_ARGUMENT.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

void set_error(const char* message);
const char* last_error();
wick_status fail(wick_status status, const char* message);

// Runs f, which reports through its outputs; every exception becomes a status and a message.
template <typename F>
wick_status guard(F&& f) noexcept {
  try {
    std::forward<F>(f)();
    set_error("");
    return WICK_OK;
  } catch (const ArgumentError& e) {
    return fail(WICK_ERROR_ARGUMENT, e.what());
  } catch (const ShapeError& e) {
    return fail(WICK_ERROR_SHAPE, e.what());
  } catch (const DTypeError& e) {
    return fail(WICK_ERROR_DTYPE, e.what());
  } catch (const DeviceError& e) {
    return fail(WICK_ERROR_DEVICE, e.what());
  } catch (const IndexError& e) {
    return fail(WICK_ERROR_INDEX, e.what());
  } catch (const OutOfMemoryError& e) {
    return fail(WICK_ERROR_OUT_OF_MEMORY, e.what());
  } catch (const NotSupportedError& e) {
    return fail(WICK_ERROR_NOT_SUPPORTED, e.what());
  } catch (const io::FormatError& e) {
    return fail(WICK_ERROR_FORMAT, e.what());
  } catch (const dist::DistError& e) {
    return fail(WICK_ERROR_DIST, e.what());
  } catch (const std::bad_alloc&) {
    return fail(WICK_ERROR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return fail(WICK_ERROR_OTHER, e.what());
  } catch (...) {
    return fail(WICK_ERROR_OTHER, "an unknown exception");
  }
}

// The tensor behind a handle; ArgumentError naming op and the argument if it is null.
const Tensor& in(const wick_tensor* t, const char* op, const char* arg = "x");
Tensor& in_mut(wick_tensor* t, const char* op, const char* arg = "t");
// Checks an output pointer before the work, so that a null one costs nothing.
template <typename T>
T* out_ptr(T* out, const char* op, const char* arg = "out") {
  if (!out) throw ArgumentError(std::string(op) + ": the output pointer " + arg + " is null");
  return out;
}
// Hands a new handle to *out.
void give(wick_tensor** out, Tensor t);
DType dtype_in(int32_t dtype, const char* op);
Device device_in(wick_device device, const char* op);
Shape shape_in(const int64_t* shape, int rank, const char* op, const char* arg = "shape");
// A call that makes one new tensor from one: checks the output pointer, then hands f's result out.
template <typename F>
wick_status map(const char* op, const wick_tensor* t, wick_tensor** out, F&& f) {
  return guard([&] {
    out_ptr(out, op);
    give(out, f(in(t, op)));
  });
}
// Copies text into buf as the header describes (truncated, NUL-terminated, *len the full length).
void text_out(const std::string& text, char* buf, size_t cap, size_t* len);

}  // namespace wick::capi

namespace wick::capi {
// A C double as a wick Scalar: a whole number within int64 is an integer (so that it fills and
// compares with integer dtypes), any other value a float.
Scalar scalar_in(double v);
}  // namespace wick::capi
