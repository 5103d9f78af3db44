// Convolution entry points: 1d as 2d over a height of 1, f8e4m3 through f32, then the vendor
// library or wick's own path (the "conv" option, or WICK_CONV=gemm in the environment, forces
// wick's own; set_option("conv", "library") restores the default).
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gpu/conv.h"
#include "gpu/gpu_backend.h"

namespace wick::gpu {

namespace {

bool own_path_from_env() {
  const char* v = std::getenv("WICK_CONV");
  return v && std::strcmp(v, "gemm") == 0;
}

}  // namespace

bool conv_log_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("WICK_CONV_LOG");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void conv_log(const char* format, ...) {
  if (!conv_log_enabled()) return;
  // One write per line, so that lines of several threads do not interleave.
  char line[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  std::fprintf(stderr, "wick conv: %s\n", line);
}

void conv_log_declined(const ConvCall& c, const char* why) {
  if (conv_log_enabled()) conv_log("%s: %s; wick's own im2col + GEMM path serves it", describe(c).c_str(), why);
}

std::string describe(const ConvCall& c) {
  const ConvParams& p = c.p;
  return detail::str_cat(c.op, ": input ", c.x.layout.to_string(), " ", c.x.dtype, ", kernel ", c.k.layout.to_string(),
                         ", padding (", p.padding[0], ", ", p.padding[1], "), stride (", p.stride[0], ", ", p.stride[1],
                         "), dilation (", p.dilation[0], ", ", p.dilation[1], "), output_padding (",
                         p.output_padding[0], ", ", p.output_padding[1], "), groups ", p.groups);
}

StoragePtr GpuBackend::conv(const View& x, const View& k, const ConvParams& p, int spatial, bool transposed) {
  activate();
  const Shape out_shape = conv_output_shape(x.layout.shape(), k.layout.shape(), p, spatial, transposed);
  if (out_shape.numel() == 0) return alloc(x.dtype, 0);
  if (x.dtype == DType::F8E4M3) {
    StoragePtr xf = cast(x, DType::F32), kf = cast(k, DType::F32);
    const Layout xl(x.layout.shape()), kl(k.layout.shape());
    StoragePtr of = conv(View{*xf, xl, DType::F32}, View{*kf, kl, DType::F32}, p, spatial, transposed);
    return cast(View{*of, Layout(out_shape), DType::F32}, x.dtype);
  }
  const Layout x4 = spatial == 1 ? x.layout.unsqueeze(2) : x.layout;
  const Layout k4 = spatial == 1 ? k.layout.unsqueeze(2) : k.layout;
  const ConvParams p4 = spatial == 1 ? conv1d_as_2d(p) : p;
  const Shape out4 = spatial == 1 ? Layout(out_shape).unsqueeze(2).shape() : out_shape;
  const View xv{x.storage, x4, x.dtype}, kv{k.storage, k4, k.dtype};
  static const bool env_own = own_path_from_env();
  if (!conv_own_path_ && !env_own && conv_library_supports(xv, kv, p4, transposed)) {
    const char* op =
        transposed ? (spatial == 1 ? "conv_transpose1d" : "conv_transpose2d") : (spatial == 1 ? "conv1d" : "conv2d");
    if (StoragePtr out = conv_library(*this, ConvCall{op, xv, kv, p4}, transposed, out4)) return out;
  }
  return conv_gemm(*this, xv, kv, p4, transposed, out4);
}

StoragePtr GpuBackend::conv1d(const View& x, const View& k, const ConvParams& p) { return conv(x, k, p, 1, false); }
StoragePtr GpuBackend::conv_transpose1d(const View& x, const View& k, const ConvParams& p) {
  return conv(x, k, p, 1, true);
}
StoragePtr GpuBackend::conv2d(const View& x, const View& k, const ConvParams& p) { return conv(x, k, p, 2, false); }
StoragePtr GpuBackend::conv_transpose2d(const View& x, const View& k, const ConvParams& p) {
  return conv(x, k, p, 2, true);
}

}  // namespace wick::gpu
