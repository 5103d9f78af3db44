// Q4_K products on the 8-bit integer matrix units (qmatmul_mmq.cuh): the launcher, for each dtype
// of x.
#include "gpu/quant/qmatmul_mmq.cuh"

namespace wick::gpu::qmm {

namespace {

template <int NT, typename T>
bool launch_mmq(GpuBackend& b, const uint8_t* w, int64_t n, int64_t k, const T* x, int64_t p, int64_t max_rows,
                const int64_t* groups, int64_t g, int64_t experts, T* out) {
  const DeviceProps& props = b.props();
  const size_t smem = MmqShape<NT>::kShared;
  if (smem > std::max(props.shared_per_block, props.shared_per_block_optin)) return false;
  const auto kernel = mmq_q4k_kernel<NT, T>;
  const int threads = kMmqWaves * props.warp_size;
  // The limit first: asked before it is raised, the runtime would count 0 blocks (1 remembered).
  if (smem > props.shared_per_block)
    WICK_GPU_CHECK(kernel_set_shared_limit(reinterpret_cast<const void*>(kernel), static_cast<int>(smem)));
  const int per_sm = b.blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem);
  const int64_t capacity = int64_t{std::max(1, per_sm)} * std::max(1, props.multiprocessors);
  const int64_t tiles = (n + kMmqN - 1) / kMmqN, steps = k / kMmqK;
  const int64_t chunks = (std::max<int64_t>(max_rows, 1) + 8 * NT - 1) / (8 * NT);
  // One group of up to 8 rows is streamed (MmqArgs::streamed) where each block then takes at least
  // kMmqStreamSteps steps; else k is split into the ranges that best fill the resident blocks. On an
  // H200, streamed products of 4 and 8 rows of x took 4-17% less time where they had that many steps
  // a block (28672x4096 and 4096x14336), and those of 16 and 32 rows 4-11% more (with three blocks a
  // multiprocessor; with four, 8 rows of 28672x4096 took 40.0 us streamed and 38.5 split, once each).
  const bool streamed = NT == 1 && groups == nullptr && chunks == 1 && tiles * steps >= kMmqStreamSteps * capacity;
  const int64_t wanted = streamed ? 1 : tile_splits(g * chunks * tiles, steps, capacity);
  const int64_t split_steps = (steps + wanted - 1) / wanted;
  const int64_t splits = (steps + split_steps - 1) / split_steps;  // each range holds a step
  if (g * chunks * tiles * splits > UINT32_MAX) return false;

  MmqArgs args{w,
               n,
               k,
               n * steps * int64_t{sizeof(kq::BlockQ4_K)},
               RoundedX{},
               groups,
               groups != nullptr ? g : 1,
               experts,
               p,
               b.device_error(),
               static_cast<uint32_t>(tiles),
               static_cast<uint32_t>(splits),
               static_cast<uint32_t>(chunks),
               split_steps,
               streamed,
               nullptr};
  // x rounded once for every item, per super-block.
  const XRounding rounded = round_x_super(b, x, p, k);
  args.rx = rounded.rx;
  StoragePtr part;
  const int64_t units = tiles * steps, blocks = streamed ? std::min(units, capacity) : 0;
  bool shared_tiles = false;  // streamed: whether some block's steps start inside a tile
  for (int64_t j = 1; j < blocks && !shared_tiles; ++j) shared_tiles = mmq_stream_first(units, blocks, j) % steps != 0;
  if (shared_tiles) {
    part = b.alloc(static_cast<size_t>(blocks * 2 * p * kMmqN) * sizeof(float));
    args.part = part->as<float>();
  } else if (splits > 1) {
    const size_t bytes = static_cast<size_t>(splits * p * n) * sizeof(float);
    part = b.alloc(bytes);
    args.part = part->as<float>();
    // Rows of x no group names are summed as zeros.
    if (groups != nullptr) WICK_GPU_CHECK(memset_async(part->data(), 0, bytes, b.stream()));
  }
  const int64_t items = g * chunks * tiles * splits;
  kernel<<<static_cast<unsigned>(streamed ? blocks : std::min(items, capacity)), threads, smem, b.stream()>>>(args,
                                                                                                              out);
  WICK_GPU_CHECK_LAUNCH();
  if (shared_tiles) {
    mmq_stream_combine_kernel<T>
        <<<static_cast<unsigned>(tiles), kMmqN, 0, b.stream()>>>(args.part, steps, blocks, p, n, out);
    WICK_GPU_CHECK_LAUNCH();
  }
  if (splits > 1) {
    tile_combine_kernel<T>
        <<<grid_for(p * n, kThreads), kThreads, 0, b.stream()>>>(args.part, static_cast<int>(splits), p * n, out);
    WICK_GPU_CHECK_LAUNCH();
  }
  return true;
}

}  // namespace

template <typename T>
bool launch_mmq_rows(GpuBackend& b, QType qtype, const uint8_t* w, int64_t n, int64_t k, const T* x, int64_t p,
                     int64_t max_rows, const int64_t* groups, int64_t g, int64_t experts, T* out) {
  if (!mmq_applies(b, qtype, w, k) || n < 1 || p < 1) return false;
  if (groups == nullptr) g = 1, experts = 1, max_rows = p;
  if (max_rows <= 8) return launch_mmq<1, T>(b, w, n, k, x, p, max_rows, groups, g, experts, out);
  if (max_rows <= 16) return launch_mmq<2, T>(b, w, n, k, x, p, max_rows, groups, g, experts, out);
  if (max_rows <= 32) return launch_mmq<4, T>(b, w, n, k, x, p, max_rows, groups, g, experts, out);
  return launch_mmq<8, T>(b, w, n, k, x, p, max_rows, groups, g, experts, out);
}

template bool launch_mmq_rows<float>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const float*, int64_t,
                                     int64_t, const int64_t*, int64_t, int64_t, float*);
template bool launch_mmq_rows<f16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const f16*, int64_t, int64_t,
                                   const int64_t*, int64_t, int64_t, f16*);
template bool launch_mmq_rows<bf16>(GpuBackend&, QType, const uint8_t*, int64_t, int64_t, const bf16*, int64_t, int64_t,
                                    const int64_t*, int64_t, int64_t, bf16*);

}  // namespace wick::gpu::qmm
