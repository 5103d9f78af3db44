// Argument checks that build wick's error messages, and the glue between a Tensor and its Backend:
// used by Tensor itself (src/core) and by every front end above it (src/ops, src/nn), so they live
// at the lowest of those layers. The namespace says what they serve: the ops' checks.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/storage.h"
#include "wick/error.h"
#include "wick/tensor.h"

namespace wick::ops {

// "[2, 3] f32 on cpu"
std::string describe(const Tensor& t);

void check_defined(const char* op, const Tensor& t);
// A possibly negative dim of t (of a tensor one rank larger with extra_rank = 1) mapped to
// [0, rank); ShapeError naming the tensor otherwise.
int dim_of(const char* op, const Tensor& t, int64_t dim, int extra_rank = 0);
// Every tensor defined and on one device.
void check_same_device(const char* op, std::initializer_list<const Tensor*> ts);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
// op_defined (else DTypeError), then the backend's supports (else NotSupportedError).
void check_supported(const char* op, const Tensor& t, OpKey key, std::initializer_list<DType> dtypes);
// An integer dtype usable as indices / a condition.
void check_index_dtype(const char* op, const Tensor& ids);
// The scalar converts to dtype without loss (Scalar::fits); `context` says what it is for
// (the tensor, or the shape and device being made).
void check_scalar_fits(const char* op, const Scalar& v, DType dtype, const std::string& context);
// Numpy broadcasting of the tensors' shapes; ShapeError naming both tensors when incompatible.
Shape broadcast_shape(const char* op, const Tensor& a, const Tensor& b);
// A tensor written in place may not reach one element under two indices: a broadcast view, or
// any layout that fails Layout::is_non_overlapping.
void check_writable(const char* op, const Tensor& t);
// An op's result of `shape` and `dtype` can exist: sizes non-negative, its element count and
// byte size within int64. ShapeError naming op and the operands otherwise.
void check_output(const char* op, const Shape& shape, DType dtype, std::initializer_list<const Tensor*> operands);
// The (g, 3) i64 groups of a grouped product (quant::qmatmul_grouped, nn::matmul_grouped) read on
// the host, each [expert, first, end) checked: an IndexError naming op and the group unless its
// expert is one of `experts` and its rows lie within the p rows of x.
std::vector<int64_t> host_groups(const char* op, const Tensor& groups, int64_t experts, int64_t p);

inline Backend& backend_of(const Tensor& t) { return t.storage()->backend(); }
inline View view_of(const Tensor& t) { return {*t.storage(), t.layout(), t.dtype()}; }
inline View view_of(const Tensor& t, const Layout& layout) { return {*t.storage(), layout, t.dtype()}; }
inline MutView mut_view_of(const Tensor& t) { return {*t.storage(), t.layout(), t.dtype()}; }

// A contiguous tensor over new storage of `shape`.
inline Tensor wrap(StoragePtr s, const Shape& shape, DType dtype) { return Tensor(std::move(s), Layout(shape), dtype); }

// `src` itself, or a copy of it if it shares storage with `dst` (so in-place writes never read
// what they have already overwritten).
Tensor unaliased(const Tensor& src, const Tensor& dst);

}  // namespace wick::ops
