// Paged attention (nn::paged_attention) on the CPU: the tiles of attention.cpp over keys and values
// gathered from the pools through each sequence's block table (paged_attention_tiles), and the
// rounding of value rows to Q8_0 for pools that hold them. The front end has checked every index
// the kernel reads.
#include <type_traits>

#include "core/dispatch.h"
#include "cpu/nn/attention.h"
#include "cpu/nn/nn_kernels.h"
#include "cpu/parallel.h"
#include "kernels/numeric.h"
#include "kernels/quant.h"
#include "wick/nn.h"

namespace wick::cpu {

namespace kq = kernels::quant;

StoragePtr CpuNnKernels::paged_attention(const View& q, const View& k_pool, const View& v_pool, const View& tables,
                                         const View& seqs, const View& positions, const AttentionArgs& args) const {
  StoragePtr out = backend_.alloc(q.dtype, q.layout.numel());
  dispatch(q.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T> && !std::is_same_v<T, f8e4m3>) {
      if (k_pool.dtype == DType::U8)
        paged_attention_tiles<T, uint8_t>(q, k_pool, v_pool, tables, seqs, positions, args, out->as<T>());
      else
        paged_attention_tiles<T, T>(q, k_pool, v_pool, tables, seqs, positions, args, out->as<T>());
    } else {
      throw_not_supported(backend_, NnOp::PagedAttention, q.dtype);
    }
  });
  return out;
}

StoragePtr CpuNnKernels::quantize_q8_0(const View& x) const {
  const int64_t n = x.layout.shape()[0], d = x.layout.shape()[1], blocks = d / 32;
  StoragePtr out = backend_.alloc(DType::U8, static_cast<size_t>(n * nn::paged_q8_0_row_bytes(d)));
  auto* dst = out->as<kq::BlockQ8_0>();
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>) {
      const T* src = static_cast<const T*>(x.storage.data()) + x.layout.offset();
      parallel_for(n * blocks, 64, [&](int64_t begin, int64_t end) {
        float v[32];
        for (int64_t b = begin; b < end; ++b) {
          for (int c = 0; c < 32; ++c) v[c] = kernels::to_opmath(src[b * 32 + c]);
          kq::quantize_q8_0(v, dst[b]);
        }
      });
    } else {
      throw DTypeError(detail::str_cat("paged_write: Q8_0 rows from ", x.dtype, " (f32, f16 or bf16)"));
    }
  });
  return out;
}

}  // namespace wick::cpu
