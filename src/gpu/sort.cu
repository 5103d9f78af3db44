// argsort along the last dim: every row's values become unsigned keys that sort in the value's
// order (NaN above everything, -0 equal to +0), and a segmented radix sort of (key, index) pairs
// orders each row. Radix sorts are stable, so equal values keep their order, as on the CPU.
#include <algorithm>
#include <limits>

#include "core/dispatch.h"
#include "gpu/elementwise.cuh"
#include "gpu/gpu_backend.h"
#include "gpu/vendor/cub.h"
#include "kernels/numeric.h"

namespace wick::gpu {

namespace {

// The key type: 64 bits for 8-byte types, 32 otherwise.
template <typename T>
using key_t = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <typename T>
struct SortKey {
  using K = key_t<T>;
  __device__ K operator()(T v) const {
    if constexpr (kernels::is_float_v<T>) {
      using M = std::conditional_t<sizeof(K) == 8, double, float>;
      const M m = static_cast<M>(kernels::to_opmath(v));
      if (m != m) return ~K(0);  // NaN: the largest key
      K bits;
      const M z = m == M(0) ? M(0) : m;  // -0 sorts as +0
      __builtin_memcpy(&bits, &z, sizeof bits);
      constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
      return (bits & sign) ? ~bits : bits | sign;
    } else if constexpr (std::is_signed_v<T>) {
      constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
      return static_cast<K>(static_cast<int64_t>(v)) ^ sign;
    } else {
      return static_cast<K>(v);
    }
  }
};

// values[i] = i mod len (each element's index in its row); offsets[r] = r * len for r <= rows.
__global__ __launch_bounds__(kBlock) void iota_rows_kernel(uint32_t* values, int* offsets, int64_t n, int64_t len,
                                                           int64_t rows) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    values[i] = static_cast<uint32_t>(i % len);
  }
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r <= rows; r += step) {
    offsets[r] = static_cast<int>(r * len);
  }
}

}  // namespace

// The sorts count items in int: a tensor of 2^31 elements or more is sorted in blocks of whole
// rows that stay below that (every block has the same row offsets), a row of 2^31 or more alone.
StoragePtr GpuBackend::argsort(const View& x, bool ascending) {
  activate();
  const Layout& xl = x.layout;
  const int64_t n = xl.numel();
  StoragePtr out = alloc(DType::U32, n);
  if (n == 0) return out;
  const int64_t len = xl.rank() > 0 ? xl.dim(xl.rank() - 1) : 1, rows = n / len;
  WICK_CHECK(len <= (int64_t(1) << 32), NotSupportedError, "argsort", "rows of more than 2^32 elements (", len,
             ") do not fit u32 indices (", xl.shape(), " ", x.dtype, " on ", name(), ")");
  constexpr int64_t kMaxItems = std::numeric_limits<int>::max();
  const bool long_rows = len > kMaxItems;
  const int64_t block_rows = long_rows ? 1 : std::min(rows, kMaxItems / len);
  dispatch(x.dtype, [&]<typename T>() {
    using K = key_t<T>;
    StoragePtr keys = alloc(n * sizeof(K)), keys_sorted = alloc(n * sizeof(K));
    StoragePtr values = alloc(n * sizeof(uint32_t)), offsets = alloc((block_rows + 1) * sizeof(int));
    map_elementwise(*this, SortKey<T>{}, keys->as<K>(), Layout(xl.shape()),
                    Operand<T>{static_cast<const T*>(x.storage.data()), &xl});
    iota_rows_kernel<<<grid_for(std::max(n, block_rows + 1)), kBlock, 0, stream_>>>(
        values->as<uint32_t>(), offsets->as<int>(), n, len, long_rows ? 0 : block_rows);
    WICK_GPU_CHECK_LAUNCH();
    const int* begin = offsets->as<int>();
    constexpr int kBits = static_cast<int>(sizeof(K) * 8);
    // Sorts rows [first, first + count).
    auto sort = [&](void* temp, size_t& temp_bytes, int64_t first, int64_t count) {
      const int64_t at = first * len;
      const K* k_in = keys->as<K>() + at;
      K* k_out = keys_sorted->as<K>() + at;
      const uint32_t* v_in = values->as<uint32_t>() + at;
      uint32_t* v_out = out->as<uint32_t>() + at;
      if (long_rows) {
        return ascending ? gpucub::DeviceRadixSort::SortPairs(temp, temp_bytes, k_in, k_out, v_in, v_out, len, 0, kBits,
                                                              stream_)
                         : gpucub::DeviceRadixSort::SortPairsDescending(temp, temp_bytes, k_in, k_out, v_in, v_out, len,
                                                                        0, kBits, stream_);
      }
      const int items = static_cast<int>(count * len), segments = static_cast<int>(count);
      return ascending ? gpucub::DeviceSegmentedRadixSort::SortPairs(temp, temp_bytes, k_in, k_out, v_in, v_out, items,
                                                                     segments, begin, begin + 1, 0, kBits, stream_)
                       : gpucub::DeviceSegmentedRadixSort::SortPairsDescending(temp, temp_bytes, k_in, k_out, v_in,
                                                                               v_out, items, segments, begin, begin + 1,
                                                                               0, kBits, stream_);
    };
    size_t temp_bytes = 0;
    WICK_GPU_CHECK(sort(nullptr, temp_bytes, 0, block_rows));
    StoragePtr temp = alloc(std::max<size_t>(temp_bytes, 1));
    for (int64_t first = 0; first < rows; first += block_rows) {
      size_t bytes = temp_bytes;
      WICK_GPU_CHECK(sort(temp->data(), bytes, first, std::min(block_rows, rows - first)));
    }
  });
  return out;
}

}  // namespace wick::gpu
