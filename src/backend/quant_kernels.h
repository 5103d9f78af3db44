// The optional kernel interface of the quantized-weight ops (Backend::quant()). The front end
// (src/quant) has checked every argument and calls a kernel only where supports() says it exists;
// elsewhere it dequantizes on the host and multiplies with Backend::matmul. Blocks are read from
// the start of `w`: `rows` rows of quant::row_bytes(qtype, cols) bytes each.
#pragma once

#include "backend/backend.h"
#include "backend/op.h"
#include "wick/error.h"
#include "wick/quant.h"

namespace wick {

class QuantKernels {
 public:
  virtual ~QuantKernels() = default;

  // Whether the kernel of `op` exists for the float dtype `dtype` (never beyond op_defined). By
  // default: dequantize and matmul for every dtype they take; quantize runs in the front end, and
  // matmul_grouped where a backend says so.
  virtual bool supports(QuantOp op, DType dtype) const {
    return op != QuantOp::Quantize && op != QuantOp::MatmulGrouped && op_defined(op, {&dtype, 1});
  }

  // The (rows, cols) values of the blocks as new contiguous storage of `dtype`: ggml's values bit
  // for bit (kernels/quant.h's dequantize_group), rounded to dtype.
  virtual StoragePtr dequantize(const Storage& w, quant::QType qtype, int64_t rows, int64_t cols,
                                DType dtype) const = 0;

  // x (m, cols), a contiguous view of a float dtype, times the blocks transposed: new contiguous
  // storage (m, rows) of x's dtype, accumulated in f32.
  virtual StoragePtr matmul(const View& x, const Storage& w, quant::QType qtype, int64_t rows,
                            int64_t cols) const = 0;

  // quant::qmatmul_grouped: x (p, cols), its rows dense and either cols apart (contiguous) or 0
  // apart (one token's row standing for all its pairs), times `experts` weights of `rows` rows
  // stacked in w (as arrange() made them, where `arranged`), each over the rows of x its entries of
  // groups (g, 3) i64 contiguous name; new contiguous storage (p, rows) of x's dtype, zeros where no
  // group names a row. A backend whose memory is the device's checks each entry as it reads it (an
  // IndexError at the next wait; that group left out). null (the default): the front end composes
  // it from qmatmul.
  virtual StoragePtr matmul_grouped(const View& /*x*/, const Storage& /*w*/, quant::QType /*qtype*/, int64_t /*rows*/,
                                    int64_t /*cols*/, int64_t /*experts*/, const View& /*groups*/, int64_t /*max_rows*/,
                                    bool /*arranged*/) const {
    return nullptr;
  }

  // The blocks rearranged for this backend's products (quant::QTensor::arrange): new storage of as
  // many bytes, or null where the backend keeps blocks of qtype in GGUF's order (the default).
  virtual StoragePtr arrange(const Storage& /*w*/, quant::QType /*qtype*/, int64_t /*rows*/, int64_t /*cols*/) const {
    return nullptr;
  }

  // Blocks that arrange() made: back in GGUF's order (new storage), and their product as matmul's.
  // Called for no other blocks, so a backend without arrange() never is.
  virtual StoragePtr plain(const Storage& /*w*/, quant::QType qtype, int64_t /*rows*/, int64_t /*cols*/) const {
    throw Error(detail::str_cat("plain: no arrangement of ", qtype, " blocks on this backend"));
  }
  virtual StoragePtr matmul_arranged(const View& /*x*/, const Storage& /*w*/, quant::QType qtype, int64_t /*rows*/,
                                     int64_t /*cols*/) const {
    throw Error(detail::str_cat("qmatmul: no arrangement of ", qtype, " blocks on this backend"));
  }
};

// Group i of quant::qmatmul_grouped's groups ([expert e, rows first to end)) read on the host,
// checked against `experts` and the p rows of x: an IndexError naming it and the backend.
inline void check_group(int64_t i, int64_t e, int64_t first, int64_t end, int64_t experts, int64_t p,
                        const std::string& backend) {
  if (e < 0 || e >= experts || first < 0 || first > end || end > p)
    throw IndexError(detail::str_cat("qmatmul_grouped: group ", i, " (expert ", e, ", rows ", first, " to ", end,
                                     ") names an expert outside the ", experts, " or rows outside the ", p,
                                     " rows of x (", backend, ")"));
}

}  // namespace wick
