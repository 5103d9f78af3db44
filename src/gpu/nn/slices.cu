#include "gpu/nn/rows.cuh"
#include "gpu/nn/slices.cuh"

namespace wick::gpu::nn {

SlicePlan plan_slices(const View& x, int dim) {
  const Layout& l = x.layout;
  const Layout xs = l.narrow(dim, 0, 1), os = Layout(l.shape()).narrow(dim, 0, 1);
  SlicePlan p{};
  p.starts = collapse<2>({&os, &xs});
  p.count = p.starts.numel();
  p.len = l.dim(dim);
  p.x_stride = l.stride(dim);
  p.out_stride = Layout(l.shape()).stride(dim);
  // Dense slices: a group per slice, reading along it; a warp for short ones. Strided slices: a
  // thread per slice, neighbouring threads on neighbouring slices.
  p.group = p.x_stride != 1 ? 1 : p.len >= 1024 ? 256 : 32;
  const int64_t out_extent = l.numel(), x_extent = l.extent();
  p.small = p.starts.fits_int32() && out_extent < (int64_t(1) << 31) && x_extent < (int64_t(1) << 31);
  return p;
}

bool dense_param(const View& p) {
  return (p.layout.stride(0) == 1 || p.layout.dim(0) == 1) &&
         aligned(static_cast<const char*>(p.storage.data()) + p.layout.offset() * dtype_size(p.dtype), 16);
}

std::optional<RowPlan> plan_rows(const View& x) {
  const Layout& l = x.layout;
  if (x.dtype != DType::F32 && x.dtype != DType::F16 && x.dtype != DType::BF16) return std::nullopt;
  if (l.rank() == 0 || !l.is_contiguous() || l.numel() == 0) return std::nullopt;
  const int64_t size = dtype_size(x.dtype), len = l.dim(l.rank() - 1), per_pack = 16 / size;
  if (len % per_pack != 0 || !aligned(static_cast<const char*>(x.storage.data()) + l.offset() * size, 16))
    return std::nullopt;
  const int64_t packs = len / per_pack;
  // The smallest group that holds the row: small groups synchronise less, and several share an SM.
  const int group = packs <= 32 * 4                ? 32
                    : packs <= 256 * kMaxPacks     ? 256
                    : packs <= 512 * kMaxPacks     ? 512
                                                   : 1024;
  if (packs > int64_t(group) * kMaxPacks) return std::nullopt;
  int per_thread = 1;
  while (int64_t(per_thread) * group < packs) per_thread *= 2;
  return RowPlan{l.numel() / len, len, group, per_thread};
}

}  // namespace wick::gpu::nn
