// scatter_add_set and index_add on the GPU (index.cuh).
#include "gpu/index.cuh"

namespace wick::gpu {

using namespace indexed;

void GpuBackend::scatter_add_set(const MutView& dst, const View& ids, const View& src, int dim) {
  activate();
  dispatch_indexed(dst.dtype, ids.dtype, [&]<typename T, typename Ix>() {
    scatter<true, T, Ix>(*this, static_cast<T*>(dst.storage.data()), dst.layout, ids, ids.layout, src, dim,
                         OpCode::ScatterAddSet);
  });
}

StoragePtr GpuBackend::index_add(const View& x, const View& ids, const View& src, int dim) {
  activate();
  const Layout out_l(x.layout.shape());
  StoragePtr out = alloc(x.dtype, out_l.numel());
  copy_strided(x, MutView{*out, out_l, x.dtype});
  dispatch_indexed(x.dtype, ids.dtype, [&]<typename T, typename Ix>() {
    scatter<true, T, Ix>(*this, out->as<T>(), out_l, ids, ids_along(ids.layout, src.layout.shape(), dim), src, dim,
                         OpCode::IndexAdd);
  });
  return out;
}

}  // namespace wick::gpu
