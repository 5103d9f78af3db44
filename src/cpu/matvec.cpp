// The few-row products of matvec.h: GCC vectors of the width of each target's registers, kLanes
// floats of partial sums per output on every target.
#include "cpu/matvec.h"

#include <array>
#include <atomic>
#include <cstring>
#include <utility>

#include "cpu/clones.h"
#include "cpu/prefetch.h"
#include "cpu/quant/qdot.h"
#include "cpu/vectors.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace wick::cpu {

namespace {

constexpr int kLanes = 16;

// kLanes partial sums per output as vectors of the target's registers' width (cpu/vectors.h): one,
// two or four vectors, the same lanes, so that every version gives the same bits.
template <int kBytes>
using Lanes = SumLanes<kBytes, kLanes>;

// M rows of a against weight rows j0..j1-1: kLanes partial sums per output, the elements past the
// last whole block of kLanes added to lane 0 in order, then the lanes folded in order.
template <int kBytes, int M, typename W>
[[gnu::always_inline]] inline void rows_by(int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const W* w,
                                           int64_t ldw, float* out, int64_t ldo) {
  using L = Lanes<kBytes>;
  for (int64_t j = j0; j < j1; ++j) {
    const W* wj = w + j * ldw;
    typename L::F acc[M][L::kCount] = {};
    int64_t l = 0;
    for (; l + kLanes <= k; l += kLanes) {
      prefetch_ahead<kLanes * sizeof(W)>(wj + l);
      for (int c = 0; c < L::kCount; ++c) {
        typename L::F wv, av;
        widen(wj + l + c * L::kWidth, wv);
        for (int i = 0; i < M; ++i) {
          load_vec(av, a + i * lda + l + c * L::kWidth);
          acc[i][c] += av * wv;
        }
      }
    }
    for (int i = 0; i < M; ++i) {
      float lanes[kLanes];
      std::memcpy(lanes, acc[i], sizeof lanes);
      for (int64_t t = l; t < k; ++t) lanes[0] += a[i * lda + t] * kernels::to_opmath(wj[t]);
      float r = lanes[0];
      for (int q = 1; q < kLanes; ++q) r += lanes[q];
      out[i * ldo + j] = r;
    }
  }
}

template <int kBytes, typename W>
[[gnu::always_inline]] inline void by_row_count(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a,
                                                int64_t lda, const W* w, int64_t ldw, float* out, int64_t ldo) {
  switch (m) {
    case 1: return rows_by<kBytes, 1>(j0, j1, k, a, lda, w, ldw, out, ldo);
    case 2: return rows_by<kBytes, 2>(j0, j1, k, a, lda, w, ldw, out, ldo);
    case 3: return rows_by<kBytes, 3>(j0, j1, k, a, lda, w, ldw, out, ldo);
    case 4: return rows_by<kBytes, 4>(j0, j1, k, a, lda, w, ldw, out, ldo);
    case 5: return rows_by<kBytes, 5>(j0, j1, k, a, lda, w, ldw, out, ldo);
    case 6: return rows_by<kBytes, 6>(j0, j1, k, a, lda, w, ldw, out, ldo);
    case 7: return rows_by<kBytes, 7>(j0, j1, k, a, lda, w, ldw, out, ldo);
    case 8: return rows_by<kBytes, 8>(j0, j1, k, a, lda, w, ldw, out, ldo);
    default: return;
  }
}
static_assert(kMatvecRows == 8, "by_row_count has a case for each row count");

// The loops for each target (cpu/clones.h), with vectors of its registers' width; the f16 one is
// the portable loop, for machines without F16C.
#define WICK_MATVEC_LOOPS(arch, bytes)                                                                                 \
  WICK_CPU_VERSION(arch)                                                                                               \
  void rows_of(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const float* w, int64_t ldw, \
               float* out, int64_t ldo) {                                                                              \
    by_row_count<bytes>(m, j0, j1, k, a, lda, w, ldw, out, ldo);                                                       \
  }                                                                                                                    \
  WICK_CPU_VERSION(arch)                                                                                               \
  void rows_of(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const bf16* w, int64_t ldw,  \
               float* out, int64_t ldo) {                                                                              \
    by_row_count<bytes>(m, j0, j1, k, a, lda, w, ldw, out, ldo);                                                       \
  }                                                                                                                    \
  WICK_CPU_VERSION(arch)                                                                                               \
  void rows_of(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const f16* w, int64_t ldw,   \
               float* out, int64_t ldo) {                                                                              \
    by_row_count<bytes>(m, j0, j1, k, a, lda, w, ldw, out, ldo);                                                       \
  }
#if WICK_CPU_VERSIONS
WICK_MATVEC_LOOPS("arch=x86-64-v4", 64)
WICK_MATVEC_LOOPS("arch=x86-64-v3", 32)
#endif
WICK_MATVEC_LOOPS("default", 16)
#undef WICK_MATVEC_LOOPS

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WICK_F16C __attribute__((target("avx2,f16c")))

// rows_by for f16 weights where the processor converts halves itself (F16C): the same lanes, the
// same products and sums in the same order (no fused multiply-add), so the same bits as rows_by,
// whose selects cost about 20 instructions per 16 weights where this costs 2.
template <int M>
WICK_F16C inline void rows_by_f16c(int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const f16* w,
                                   int64_t ldw, float* out, int64_t ldo) {
  for (int64_t j = j0; j < j1; ++j) {
    const f16* wj = w + j * ldw;
    __m256 lo[M], hi[M];
    for (int i = 0; i < M; ++i) lo[i] = hi[i] = _mm256_setzero_ps();
    int64_t l = 0;
    for (; l + kLanes <= k; l += kLanes) {
      prefetch_ahead<kLanes * sizeof(f16)>(wj + l);
      const __m256 w_lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wj + l)));
      const __m256 w_hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wj + l + 8)));
      for (int i = 0; i < M; ++i) {
        lo[i] = _mm256_add_ps(lo[i], _mm256_mul_ps(_mm256_loadu_ps(a + i * lda + l), w_lo));
        hi[i] = _mm256_add_ps(hi[i], _mm256_mul_ps(_mm256_loadu_ps(a + i * lda + l + 8), w_hi));
      }
    }
    for (int i = 0; i < M; ++i) {
      float lanes[kLanes];
      _mm256_storeu_ps(lanes, lo[i]);
      _mm256_storeu_ps(lanes + 8, hi[i]);
      for (int64_t t = l; t < k; ++t) lanes[0] += a[i * lda + t] * kernels::to_opmath(wj[t]);
      float r = lanes[0];
      for (int q = 1; q < kLanes; ++q) r += lanes[q];
      out[i * ldo + j] = r;
    }
  }
}

using RowsFn = void (*)(int64_t, int64_t, int64_t, const float*, int64_t, const f16*, int64_t, float*, int64_t);

template <int... M>
constexpr std::array<RowsFn, sizeof...(M)> f16c_kernels(std::integer_sequence<int, M...>) {
  return {&rows_by_f16c<M + 1>...};
}
// rows_by_f16c<m> at [m - 1].
constexpr auto kF16cKernels = f16c_kernels(std::make_integer_sequence<int, kMatvecRows>{});

void matvec_rows_f16c(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const f16* w,
                      int64_t ldw, float* out, int64_t ldo) {
  kF16cKernels[static_cast<size_t>(m - 1)](j0, j1, k, a, lda, w, ldw, out, ldo);
}

// F16C from CPUID leaf 1 (ECX bit 29): not every compiler's __builtin_cpu_supports knows it. AVX2
// being usable means the operating system saves the registers F16C writes.
bool has_f16c() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  }();
  return yes;
}
#else
bool has_f16c() { return false; }
void matvec_rows_f16c(int64_t, int64_t, int64_t, int64_t, const float*, int64_t, const f16*, int64_t, float*, int64_t) {}
#endif

std::atomic<bool> f16c_on{true};

}  // namespace

bool set_matvec_f16c(bool use) { return f16c_on.exchange(use); }

// The public loops call the version set of this file (GCC names its dispatcher for file-local
// functions only: cpu/clones.h).
void matvec_rows(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const float* w, int64_t ldw,
                 float* out, int64_t ldo) {
  rows_of(m, j0, j1, k, a, lda, w, ldw, out, ldo);
}

void matvec_rows(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const f16* w, int64_t ldw,
                 float* out, int64_t ldo) {
  if (has_f16c() && f16c_on.load(std::memory_order_relaxed) && qdot::active_isa() >= qdot::Isa::Avx2)
    matvec_rows_f16c(m, j0, j1, k, a, lda, w, ldw, out, ldo);
  else
    rows_of(m, j0, j1, k, a, lda, w, ldw, out, ldo);
}

void matvec_rows(int64_t m, int64_t j0, int64_t j1, int64_t k, const float* a, int64_t lda, const bf16* w, int64_t ldw,
                 float* out, int64_t ldo) {
  rows_of(m, j0, j1, k, a, lda, w, ldw, out, ldo);
}

}  // namespace wick::cpu
