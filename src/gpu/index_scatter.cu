// scatter_set on the GPU (index.cuh).
#include "gpu/index.cuh"

namespace wick::gpu {

using namespace indexed;

void GpuBackend::scatter_set(const MutView& dst, const View& ids, const View& src, int dim) {
  activate();
  dispatch_indexed(dst.dtype, ids.dtype, [&]<typename T, typename Ix>() {
    scatter<false, T, Ix>(*this, static_cast<T*>(dst.storage.data()), dst.layout, ids, ids.layout, src, dim,
                          OpCode::ScatterSet);
  });
}

}  // namespace wick::gpu
