// gather, index_select, scatter_set, scatter_add_set, index_add.
//
// Every index op walks a space of the index tensor's shape with the data operand's stride at
// `dim` set to 0: the index value times the real stride then picks the element. gather and
// index_select are one kernel (index_select broadcasts its rank-1 ids); scatter and index_add are
// one kernel that walks whole fibers along `dim` on one thread, so colliding writes land in order.
#include <limits>

#include "backend/strided.h"
#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/loops.h"
#include "kernels/binary.h"
#include "wick/error.h"

namespace wick::cpu {

namespace {

template <typename I>
constexpr I kSkip = std::numeric_limits<I>::max();

// Raises IndexError for the first index outside [0, size) that is not the skip value.
template <typename I>
void check_indices(const char* op, const View& ids, int64_t size, int dim) {
  const I* p = static_cast<const I*>(ids.storage.data());
  StridedSpace<1> s = collapse<1>({&ids.layout});
  bool bad = false;
  int64_t bad_value = 0;
  for_each_run_serial(s, [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n && !bad; ++i) {
      I v = p[off[0] + i * st[0]];
      if (v != kSkip<I> && (static_cast<int64_t>(v) < 0 || static_cast<int64_t>(v) >= size)) {
        bad = true;
        bad_value = static_cast<int64_t>(v);
      }
    }
  });
  WICK_CHECK(!bad, IndexError, op, "index ", bad_value, " is out of range for dim ", dim, " of size ", size, " (ids ",
             ids.layout.shape(), " ", ids.dtype, ", cpu)");
}

// out[e] = x[xl'(e) + ids[e] * x_stride] over the space of `out_shape`.
template <typename T, typename I>
void gather_kernel(T* out, const Shape& out_shape, const I* ids, const Layout& ids_l, const T* x, const Layout& x_l,
                   int64_t x_stride) {
  const Layout out_l(out_shape);
  StridedSpace<3> s = collapse<3>({&out_l, &ids_l, &x_l});
  for_each_run<3>(s, kParallelGrain, [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t i = 0; i < n; ++i) {
      I v = ids[off[1] + i * st[1]];
      out[off[0] + i * st[0]] = v == kSkip<I> ? T{} : x[off[2] + i * st[2] + static_cast<int64_t>(v) * x_stride];
    }
  });
}

// For each fiber along dim of the space `shape`: dst[fiber + ids[i] * dst_stride] (+)= src[i].
template <bool kAdd, typename T, typename I>
void scatter_kernel(T* dst, const Layout& dst_l, int64_t dst_stride, const I* ids, const Layout& ids_l, const T* src,
                    const Layout& src_l, int dim) {
  const int64_t len = src_l.dim(dim);
  if (len == 0) return;
  const Layout f_dst = dst_l.narrow(dim, 0, 1), f_ids = ids_l.narrow(dim, 0, 1), f_src = src_l.narrow(dim, 0, 1);
  const int64_t is = ids_l.stride(dim), ss = src_l.stride(dim);
  StridedSpace<3> fibers = collapse<3>({&f_dst, &f_ids, &f_src});
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / len);
  for_each_run<3>(fibers, grain, [&](const int64_t* off, int64_t n, const int64_t* st) {
    for (int64_t f = 0; f < n; ++f) {
      T* d = dst + off[0] + f * st[0];
      const I* id = ids + off[1] + f * st[1];
      const T* s = src + off[2] + f * st[2];
      for (int64_t i = 0; i < len; ++i) {
        I v = id[i * is];
        if (v == kSkip<I>) continue;
        T& target = d[static_cast<int64_t>(v) * dst_stride];
        if constexpr (kAdd) {
          kernels::Binary<BinaryOp::Add> add;
          target = kernels::from_opmath<T>(add(kernels::to_opmath(target), kernels::to_opmath(s[i * ss])));
        } else {
          target = s[i * ss];
        }
      }
    }
  });
}

// Calls f.template operator()<T, I>() for the data and index dtypes.
template <typename F>
void dispatch_indexed(DType data, DType index, const F& f) {
  dispatch(index, [&]<typename I>() {
    if constexpr (std::is_integral_v<I>) {
      dispatch(data, [&]<typename T>() { f.template operator()<T, I>(); });
    }
  });
}

}  // namespace

StoragePtr CpuBackend::gather(const View& x, const View& ids, int dim) {
  const Shape& shape = ids.layout.shape();
  StoragePtr out = alloc(x.dtype, shape.numel());
  dispatch_indexed(x.dtype, ids.dtype, [&]<typename T, typename I>() {
    check_indices<I>("gather", ids, x.layout.dim(dim), dim);
    gather_kernel(out->as<T>(), shape, static_cast<const I*>(ids.storage.data()), ids.layout,
                  static_cast<const T*>(x.storage.data()), with_stride(x.layout, shape, dim, 0), x.layout.stride(dim));
  });
  return out;
}

StoragePtr CpuBackend::index_select(const View& x, const View& ids, int dim) {
  Shape shape = x.layout.shape();
  shape[dim] = ids.layout.dim(0);
  StoragePtr out = alloc(x.dtype, shape.numel());
  dispatch_indexed(x.dtype, ids.dtype, [&]<typename T, typename I>() {
    check_indices<I>("index_select", ids, x.layout.dim(dim), dim);
    gather_kernel(out->as<T>(), shape, static_cast<const I*>(ids.storage.data()), ids_along(ids.layout, shape, dim),
                  static_cast<const T*>(x.storage.data()), with_stride(x.layout, shape, dim, 0), x.layout.stride(dim));
  });
  return out;
}

void CpuBackend::scatter_set(const MutView& dst, const View& ids, const View& src, int dim) {
  dispatch_indexed(dst.dtype, ids.dtype, [&]<typename T, typename I>() {
    check_indices<I>("scatter_set", ids, dst.layout.dim(dim), dim);
    scatter_kernel<false>(static_cast<T*>(dst.storage.data()), with_stride(dst.layout, src.layout.shape(), dim, 0),
                          dst.layout.stride(dim), static_cast<const I*>(ids.storage.data()), ids.layout,
                          static_cast<const T*>(src.storage.data()), src.layout, dim);
  });
}

void CpuBackend::scatter_add_set(const MutView& dst, const View& ids, const View& src, int dim) {
  dispatch_indexed(dst.dtype, ids.dtype, [&]<typename T, typename I>() {
    check_indices<I>("scatter_add_set", ids, dst.layout.dim(dim), dim);
    scatter_kernel<true>(static_cast<T*>(dst.storage.data()), with_stride(dst.layout, src.layout.shape(), dim, 0),
                         dst.layout.stride(dim), static_cast<const I*>(ids.storage.data()), ids.layout,
                         static_cast<const T*>(src.storage.data()), src.layout, dim);
  });
}

StoragePtr CpuBackend::index_add(const View& x, const View& ids, const View& src, int dim) {
  const Layout out_l(x.layout.shape());
  StoragePtr out = alloc(x.dtype, out_l.numel());
  copy_strided(x, MutView{*out, out_l, x.dtype});
  dispatch_indexed(x.dtype, ids.dtype, [&]<typename T, typename I>() {
    check_indices<I>("index_add", ids, x.layout.dim(dim), dim);
    const Shape& shape = src.layout.shape();
    scatter_kernel<true>(out->as<T>(), with_stride(out_l, shape, dim, 0), out_l.stride(dim),
                         static_cast<const I*>(ids.storage.data()), ids_along(ids.layout, shape, dim),
                         static_cast<const T*>(src.storage.data()), src.layout, dim);
  });
  return out;
}

}  // namespace wick::cpu
