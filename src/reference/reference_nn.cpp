// Reference matmul, convolutions (direct sums from the definitions, no im2col), pooling and
// upsampling, in f64.
#include <cmath>
#include <vector>

#include "reference/element.h"
#include "reference/index_iter.h"
#include "reference/reference.h"

namespace wick::reference {

namespace {

double get(const Elements& e, const Layout& l, std::initializer_list<int64_t> idx) {
  int64_t off = l.offset(), d = 0;
  for (int64_t i : idx) off += i * l.stride(static_cast<int>(d++));
  return static_cast<double>(e.get_f(off));
}

// Convolution of 4-d x and k (1d ops come with a height of 1), by its definition:
//   out[n, co, y, x] = sum over ci of the group, i, j of in[n, ci, y s - p + i d, ...] w[co, ci, i, j]
// and for the transposed form, every input element adds its products to the outputs it reaches:
//   out[n, co, y s - p + i d, x s - p + j d] += in[n, ci, y, x] w[ci, co of the group, i, j].
StoragePtr conv(Backend& b, const View& x, const View& k, const ConvParams& p, int spatial, bool transposed) {
  const Layout xl = spatial == 1 ? x.layout.unsqueeze(2) : x.layout;
  const Layout kl = spatial == 1 ? k.layout.unsqueeze(2) : k.layout;
  const ConvParams q = spatial == 1 ? conv1d_as_2d(p) : p;
  const Shape out_shape = conv_output_shape(x.layout.shape(), k.layout.shape(), p, spatial, transposed);
  const Shape o4 = spatial == 1 ? Layout(out_shape).unsqueeze(2).shape() : out_shape;
  const int64_t N = xl.dim(0), Cin = xl.dim(1), H = xl.dim(2), W = xl.dim(3);
  const int64_t Cout = o4[1], OH = o4[2], OW = o4[3], KH = kl.dim(2), KW = kl.dim(3);
  const int64_t cin_g = Cin / q.groups, cout_g = Cout / q.groups;
  std::vector<double> acc(static_cast<size_t>(o4.numel()), 0.0);
  auto at = [&](int64_t n, int64_t c, int64_t y, int64_t xx) -> double& {
    return acc[static_cast<size_t>(((n * Cout + c) * OH + y) * OW + xx)];
  };
  Elements ex(x.storage, x.dtype), ek(k.storage, k.dtype);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < q.groups; ++g) {
      for (int64_t cig = 0; cig < cin_g; ++cig) {
        const int64_t ci = g * cin_g + cig;
        for (int64_t cog = 0; cog < cout_g; ++cog) {
          const int64_t co = g * cout_g + cog;
          for (int64_t i = 0; i < KH; ++i) {
            for (int64_t j = 0; j < KW; ++j) {
              const double w = transposed ? get(ek, kl, {ci, cog, i, j}) : get(ek, kl, {co, cig, i, j});
              const int64_t ny = transposed ? H : OH, nx = transposed ? W : OW;
              for (int64_t y = 0; y < ny; ++y) {
                for (int64_t xx = 0; xx < nx; ++xx) {
                  const int64_t sy = y * q.stride[0] - q.padding[0] + i * q.dilation[0];
                  const int64_t sx = xx * q.stride[1] - q.padding[1] + j * q.dilation[1];
                  if (!transposed) {
                    if (sy >= 0 && sy < H && sx >= 0 && sx < W) at(n, co, y, xx) += get(ex, xl, {n, ci, sy, sx}) * w;
                  } else if (sy >= 0 && sy < OH && sx >= 0 && sx < OW) {
                    at(n, co, sy, sx) += get(ex, xl, {n, ci, y, xx}) * w;
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  StoragePtr out = b.alloc(x.dtype, out_shape.numel());
  Elements o(*out, x.dtype);
  for (size_t i = 0; i < acc.size(); ++i) o.set_f(static_cast<int64_t>(i), acc[i]);
  return out;
}

}  // namespace

StoragePtr ReferenceBackend::matmul(const View& a, const View& b) {
  const int r = a.layout.rank();
  const int64_t k = a.layout.dim(r - 1), n = b.layout.dim(r - 1);
  Shape out_shape = a.layout.shape();
  out_shape[r - 1] = n;
  StoragePtr out = alloc(a.dtype, out_shape.numel());
  Elements ea(a.storage, a.dtype), eb(b.storage, b.dtype), o(*out, a.dtype);
  int64_t pos = 0;
  int64_t ia[kMaxRank], ib[kMaxRank];
  for (IndexIter it(out_shape); !it.done(); it.next(), ++pos) {
    for (int d = 0; d < r; ++d) ia[d] = ib[d] = it[d];
    double sum = 0;
    for (int64_t t = 0; t < k; ++t) {
      ia[r - 1] = t;
      ib[r - 2] = t;
      sum += static_cast<double>(ea.get_f(offset_of(a.layout, ia))) *
             static_cast<double>(eb.get_f(offset_of(b.layout, ib)));
    }
    o.set_f(pos, sum);
  }
  return out;
}

StoragePtr ReferenceBackend::conv1d(const View& x, const View& k, const ConvParams& p) {
  return conv(*this, x, k, p, 1, false);
}
StoragePtr ReferenceBackend::conv_transpose1d(const View& x, const View& k, const ConvParams& p) {
  return conv(*this, x, k, p, 1, true);
}
StoragePtr ReferenceBackend::conv2d(const View& x, const View& k, const ConvParams& p) {
  return conv(*this, x, k, p, 2, false);
}
StoragePtr ReferenceBackend::conv_transpose2d(const View& x, const View& k, const ConvParams& p) {
  return conv(*this, x, k, p, 2, true);
}

namespace {

StoragePtr pool(Backend& b, const View& x, const PoolParams& p, bool max) {
  const Shape out_shape = pool_output_shape(x.layout.shape(), p);
  StoragePtr out = b.alloc(x.dtype, out_shape.numel());
  Elements in(x.storage, x.dtype), o(*out, x.dtype);
  const bool floats = is_float(x.dtype);
  int64_t pos = 0;
  for (IndexIter it(out_shape); !it.done(); it.next(), ++pos) {
    int64_t idx[4] = {it[0], it[1], 0, 0};
    double sum = 0, best = 0;
    int64_t best_i = 0;
    bool first = true, nan = false;
    for (int64_t i = 0; i < p.kernel[0]; ++i) {
      for (int64_t j = 0; j < p.kernel[1]; ++j) {
        idx[2] = it[2] * p.stride[0] + i;
        idx[3] = it[3] * p.stride[1] + j;
        const int64_t off = offset_of(x.layout, idx);
        if (!floats) {
          const int64_t v = in.get_i(off);
          if (first || v > best_i) best_i = v;
        } else {
          const double v = static_cast<double>(in.get_f(off));
          nan = nan || std::isnan(v);
          sum += v;
          if (first || v > best) best = v;
        }
        first = false;
      }
    }
    if (!floats)
      o.set_i(pos, best_i);
    else if (max)
      o.set_f(pos, nan ? NAN : best);
    else
      o.set_f(pos, sum / static_cast<double>(p.kernel[0] * p.kernel[1]));
  }
  return out;
}

}  // namespace

StoragePtr ReferenceBackend::avg_pool2d(const View& x, const PoolParams& p) { return pool(*this, x, p, false); }
StoragePtr ReferenceBackend::max_pool2d(const View& x, const PoolParams& p) { return pool(*this, x, p, true); }

StoragePtr ReferenceBackend::upsample_nearest1d(const View& x, int64_t out_l) {
  Shape out_shape = x.layout.shape();
  out_shape[2] = out_l;
  StoragePtr out = alloc(x.dtype, out_shape.numel());
  Elements in(x.storage, x.dtype), o(*out, x.dtype);
  int64_t pos = 0;
  for (IndexIter it(out_shape); !it.done(); it.next(), ++pos) {
    int64_t idx[3] = {it[0], it[1], nearest_source(x.layout.dim(2), out_l, it[2])};
    o.copy_from(pos, in, offset_of(x.layout, idx));
  }
  return out;
}

StoragePtr ReferenceBackend::upsample_nearest2d(const View& x, int64_t out_h, int64_t out_w) {
  Shape out_shape = x.layout.shape();
  out_shape[2] = out_h;
  out_shape[3] = out_w;
  StoragePtr out = alloc(x.dtype, out_shape.numel());
  Elements in(x.storage, x.dtype), o(*out, x.dtype);
  int64_t pos = 0;
  for (IndexIter it(out_shape); !it.done(); it.next(), ++pos) {
    int64_t idx[4] = {it[0], it[1], nearest_source(x.layout.dim(2), out_h, it[2]),
                      nearest_source(x.layout.dim(3), out_w, it[3])};
    o.copy_from(pos, in, offset_of(x.layout, idx));
  }
  return out;
}

StoragePtr ReferenceBackend::upsample_bilinear2d(const View& x, const BilinearParams& p) {
  Shape out_shape = x.layout.shape();
  out_shape[2] = p.out_h;
  out_shape[3] = p.out_w;
  StoragePtr out = alloc(x.dtype, out_shape.numel());
  Elements in(x.storage, x.dtype), o(*out, x.dtype);
  const int64_t H = x.layout.dim(2), W = x.layout.dim(3);
  int64_t pos = 0;
  for (IndexIter it(out_shape); !it.done(); it.next(), ++pos) {
    const double sy = bilinear_source(H, p.out_h, p.align_corners, p.scale_h, it[2]);
    const double sx = bilinear_source(W, p.out_w, p.align_corners, p.scale_w, it[3]);
    const int64_t y0 = static_cast<int64_t>(std::floor(sy)), x0 = static_cast<int64_t>(std::floor(sx));
    const int64_t y1 = std::min(y0 + 1, H - 1), x1 = std::min(x0 + 1, W - 1);
    const double fy = sy - static_cast<double>(y0), fx = sx - static_cast<double>(x0);
    auto v = [&](int64_t y, int64_t xx) {
      int64_t idx[4] = {it[0], it[1], y, xx};
      return static_cast<double>(in.get_f(offset_of(x.layout, idx)));
    };
    o.set_f(pos, (1 - fy) * ((1 - fx) * v(y0, x0) + fx * v(y0, x1)) + fy * ((1 - fx) * v(y1, x0) + fx * v(y1, x1)));
  }
  return out;
}

}  // namespace wick::reference
