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

}  // namespace wick::gpu::nn
