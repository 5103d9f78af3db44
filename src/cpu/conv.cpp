// Convolutions: im2col + GEMM, and GEMM + col2im for the transposed forms, per image and group
// (groups are native: each is its own product, no split and concatenation). f16, bf16 and
// f8e4m3 compute in f32. The 1d ops are the 2d ones over a height of 1.
#include <cstring>
#include <optional>
#include <string>

#include "core/checked.h"
#include "core/dispatch.h"
#include "cpu/cpu_backend.h"
#include "cpu/gemm.h"
#include "cpu/loops.h"
#include "cpu/scratch.h"
#include "kernels/numeric.h"

namespace wick::cpu {

namespace {

// The type convolutions compute in: f32, or f64 for f64.
template <typename T>
using conv_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A 4-d operand as a dense row-major array of the compute type C: the tensor itself when it
// already is one, else a converted copy.
template <typename T, typename C>
struct Dense {
  std::optional<Scratch<C>> copy;
  const C* data;

  explicit Dense(const View& v) {
    if constexpr (std::is_same_v<T, C>) {
      if (v.layout.is_contiguous()) {
        data = static_cast<const C*>(v.storage.data()) + v.layout.offset();
        return;
      }
    }
    copy.emplace(v.layout.numel());
    map_elementwise([](T x) { return static_cast<C>(x); }, copy->data(), Layout(v.layout.shape()),
                    Operand<T>{static_cast<const T*>(v.storage.data()), &v.layout});
    data = copy->data();
  }
};

struct Geometry {
  int64_t n, cin, h, w;         // input
  int64_t cout, oh, ow;         // output
  int64_t kh, kw, groups;       // kernel
  int64_t cin_g, cout_g, kdim;  // per group; kdim = (channels per group of the col side) * kh * kw
};

// Rows [begin, end) of col[(c, i, j), (y, x)] = in[c, y * sh - ph + i * dh, x * sw - pw + j * dw]
// (0 outside the input) for one image and group.
template <typename C>
void im2col(const C* in, const Geometry& g, const ConvParams& p, C* col, int64_t begin, int64_t end) {
  const int64_t hw = g.oh * g.ow;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t c = r / (g.kh * g.kw), i = r / g.kw % g.kh, j = r % g.kw;
    const C* plane = in + c * g.h * g.w;
    C* dst = col + r * hw;
    for (int64_t y = 0; y < g.oh; ++y) {
      const int64_t iy = y * p.stride[0] - p.padding[0] + i * p.dilation[0];
      C* row = dst + y * g.ow;
      if (iy < 0 || iy >= g.h) {
        std::fill(row, row + g.ow, C(0));
        continue;
      }
      for (int64_t x = 0; x < g.ow; ++x) {
        const int64_t ix = x * p.stride[1] - p.padding[1] + j * p.dilation[1];
        row[x] = ix >= 0 && ix < g.w ? plane[iy * g.w + ix] : C(0);
      }
    }
  }
}

// Output planes [begin, end) of out[c, y * sh - ph + i * dh, x * sw - pw + j * dw] +=
// col[(c, i, j), (y, x)]: the adjoint of im2col, for one image and group. Each plane is written by
// one thread, in a fixed order.
template <typename C>
void col2im(const C* col, const Geometry& g, const ConvParams& p, C* out, int64_t begin, int64_t end) {
  const int64_t hw = g.h * g.w;
  for (int64_t c = begin; c < end; ++c) {
    C* plane = out + c * g.oh * g.ow;
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const C* src = col + ((c * g.kh + i) * g.kw + j) * hw;
        for (int64_t y = 0; y < g.h; ++y) {
          const int64_t oy = y * p.stride[0] - p.padding[0] + i * p.dilation[0];
          if (oy < 0 || oy >= g.oh) continue;
          for (int64_t x = 0; x < g.w; ++x) {
            const int64_t ox = x * p.stride[1] - p.padding[1] + j * p.dilation[1];
            if (ox >= 0 && ox < g.ow) plane[oy * g.ow + ox] += src[y * g.w + x];
          }
        }
      }
    }
  }
}

// Scratch memory from the backend (its block cache: no page faults on every call).
template <typename C>
struct Scratch {
  StoragePtr block;
  C* data = nullptr;
  void reserve(Backend& b, int64_t n, const char* op) {
    const int64_t bytes = checked::mul(n, int64_t(sizeof(C)), op, " (convolution scratch)");
    if (!block || block->nbytes() < static_cast<size_t>(bytes)) {
      block = b.alloc(static_cast<size_t>(bytes));
      data = block->as<C>();
    }
  }
};

template <typename T>
void conv_impl(Backend& b, const char* op, const View& x, const View& k, const ConvParams& p, bool transposed,
               T* out_t, const Shape& out_shape) {
  using C = conv_t<T>;
  const Shape& xs = x.layout.shape();
  const Shape& ks = k.layout.shape();
  Geometry g;
  g.n = xs[0], g.cin = xs[1], g.h = xs[2], g.w = xs[3];
  g.cout = out_shape[1], g.oh = out_shape[2], g.ow = out_shape[3];
  g.kh = ks[2], g.kw = ks[3], g.groups = p.groups;
  g.cin_g = g.cin / g.groups, g.cout_g = g.cout / g.groups;
  g.kdim = (transposed ? g.cout_g : g.cin_g) * g.kh * g.kw;
  const int64_t in_hw = g.h * g.w, out_hw = g.oh * g.ow;

  Dense<T, C> xin(x), kin(k);
  Scratch<C> out_c;
  C* out;
  if constexpr (std::is_same_v<T, C>) {
    out = out_t;
  } else {
    out_c.reserve(b, out_shape.numel(), op);
    out = out_c.data;
  }
  if (transposed) std::fill(out, out + out_shape.numel(), C(0));

  // Many small products: one image and group per thread. Large ones: one after another, with
  // OpenBLAS's threads inside each product.
  // The products' sizes multiply dims of different tensors: count in double (a heuristic) and
  // size the scratch with checked arithmetic.
  const double work = static_cast<double>(transposed ? g.kdim * g.cin_g : g.cout_g * g.kdim) *
                      static_cast<double>(transposed ? in_hw : out_hw);
  const bool per_thread = work <= static_cast<double>(kSingleThreadedGemm) && g.n * g.groups > 1;
  const bool direct = !transposed && g.kh == 1 && g.kw == 1 && p.stride[0] == 1 && p.stride[1] == 1 &&
                      p.padding[0] == 0 && p.padding[1] == 0;
  const int64_t col_size =
      transposed ? checked::mul(g.kdim, in_hw, op, " (im2col rows x columns)")
                 : (direct ? 0 : checked::mul(g.kdim, out_hw, op, " (im2col rows x columns)"));

  // Each task is one image and group, in three steps: im2col (forward), the product, col2im
  // (transposed). `col` is the task's scratch block of col_size elements.
  auto in_of = [&](int64_t t) { return xin.data + (t / g.groups * g.cin + t % g.groups * g.cin_g) * in_hw; };
  auto out_of = [&](int64_t t) { return out + (t / g.groups * g.cout + t % g.groups * g.cout_g) * out_hw; };
  const int64_t prep_rows = transposed || direct ? 0 : g.kdim, finish_rows = transposed ? g.cout_g : 0;
  auto prepare = [&](int64_t t, C* col, int64_t begin, int64_t end) { im2col(in_of(t), g, p, col, begin, end); };
  auto product = [&](int64_t t, C* col) {
    const int64_t grp = t % g.groups;
    if (!transposed) {
      gemm(g.cout_g, out_hw, g.kdim, kin.data + grp * g.cout_g * g.kdim,
           BlasMatrix{false, std::max<int64_t>(g.kdim, 1)}, direct ? in_of(t) : col,
           BlasMatrix{false, std::max<int64_t>(out_hw, 1)}, out_of(t), std::max<int64_t>(out_hw, 1));
    } else {  // col (kdim x in_hw) = W_g^T (kdim x cin_g) . x_g (cin_g x in_hw)
      gemm(g.kdim, in_hw, g.cin_g, kin.data + grp * g.cin_g * g.kdim, BlasMatrix{true, std::max<int64_t>(g.kdim, 1)},
           in_of(t), BlasMatrix{false, std::max<int64_t>(in_hw, 1)}, col, std::max<int64_t>(in_hw, 1));
    }
  };
  auto finish = [&](int64_t t, C* col, int64_t begin, int64_t end) { col2im(col, g, p, out_of(t), begin, end); };

  const int64_t tasks = g.n * g.groups;
  if (per_thread) {
    parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
      Scratch<C> col;
      col.reserve(b, col_size, op);
      for (int64_t t = begin; t < end; ++t) {
        prepare(t, col.data, 0, prep_rows);
        product(t, col.data);
        finish(t, col.data, 0, finish_rows);
      }
    });
  } else {
    Scratch<C> col;
    col.reserve(b, col_size, op);
    for (int64_t t = 0; t < tasks; ++t) {
      parallel_for(prep_rows, 1, [&](int64_t begin, int64_t end) { prepare(t, col.data, begin, end); });
      product(t, col.data);
      parallel_for(finish_rows, 1, [&](int64_t begin, int64_t end) { finish(t, col.data, begin, end); });
    }
  }
  if constexpr (!std::is_same_v<T, C>) {
    parallel_for(out_shape.numel(), kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out_t[i] = T(out[i]);
    });
  }
}

// x and k as 4-d views (1d: a height of 1 inserted at dim 2), then conv_impl.
StoragePtr conv(Backend& b, const View& x, const View& k, const ConvParams& p, int spatial, bool transposed,
                OpCode code) {
  const Shape out_shape = conv_output_shape(x.layout.shape(), k.layout.shape(), p, spatial, transposed);
  StoragePtr out = b.alloc(x.dtype, out_shape.numel());
  if (out_shape.numel() == 0) return out;
  const Layout x4 = spatial == 1 ? x.layout.unsqueeze(2) : x.layout;
  const Layout k4 = spatial == 1 ? k.layout.unsqueeze(2) : k.layout;
  const ConvParams p4 = spatial == 1 ? conv1d_as_2d(p) : p;
  const Shape out4 = spatial == 1 ? Layout(out_shape).unsqueeze(2).shape() : out_shape;
  dispatch(x.dtype, [&]<typename T>() {
    if constexpr (kernels::is_float_v<T>) {
      conv_impl<T>(b, std::string(op_name(code)).c_str(), View{x.storage, x4, x.dtype}, View{k.storage, k4, k.dtype}, p4, transposed, out->as<T>(), out4);
    } else {
      throw_not_supported(b, code, x.dtype);
    }
  });
  return out;
}

}  // namespace

StoragePtr CpuBackend::conv1d(const View& x, const View& k, const ConvParams& p) {
  return conv(*this, x, k, p, 1, false, OpCode::Conv1d);
}
StoragePtr CpuBackend::conv_transpose1d(const View& x, const View& k, const ConvParams& p) {
  return conv(*this, x, k, p, 1, true, OpCode::ConvTranspose1d);
}
StoragePtr CpuBackend::conv2d(const View& x, const View& k, const ConvParams& p) {
  return conv(*this, x, k, p, 2, false, OpCode::Conv2d);
}
StoragePtr CpuBackend::conv_transpose2d(const View& x, const View& k, const ConvParams& p) {
  return conv(*this, x, k, p, 2, true, OpCode::ConvTranspose2d);
}

}  // namespace wick::cpu
