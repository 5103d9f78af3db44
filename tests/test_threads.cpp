// The number of OpenMP threads does not change results: reductions, cumsum, argsort and the index
// ops give the same bits with 1, 2 and 3 threads, on sizes above the CPU backend's parallel grain
// (32768 elements). matmul and convolution are left out, OpenBLAS may change their last bits, but
// for products of a few rows by a weight stored as rows, which wick computes itself.
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/matvec.h"
#include "test_util.h"

namespace wick {
namespace {

// The bytes of t, read out as its own element type.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  std::vector<unsigned char> out(static_cast<size_t>(t.numel() * dtype_size(t.dtype())));
  auto copy = [&](const auto& v) { std::memcpy(out.data(), v.data(), out.size()); };
  switch (t.dtype()) {
    case DType::F32: copy(t.to_vector<float>()); break;
    case DType::F64: copy(t.to_vector<double>()); break;
    case DType::F16: copy(t.to_vector<f16>()); break;
    case DType::BF16: copy(t.to_vector<bf16>()); break;
    case DType::U32: copy(t.to_vector<uint32_t>()); break;
    case DType::I32: copy(t.to_vector<int32_t>()); break;
    case DType::I64: copy(t.to_vector<int64_t>()); break;
    default: ADD_FAILURE() << "no reader for " << t.dtype();
  }
  return out;
}

Tensor ids(int64_t n, int64_t mul, int64_t mod, const Shape& shape) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i * mul % mod;
  return Tensor::from_vector(v, shape);
}

struct Result {
  std::string what;
  std::vector<unsigned char> bytes;
};

// Every result, computed with `threads` OpenMP threads on the same inputs.
std::vector<Result> results(int threads) {
  omp_set_num_threads(threads);
  manual_seed(7);
  std::vector<Result> out;
  auto keep = [&](const std::string& what, const Tensor& t) { out.push_back({what, bytes_of(t)}); };
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    // 300 x 257: 77,100 elements, more than two parallel grains; as stored, transposed, narrowed.
    const Tensor x = Tensor::rand_normal({300, 257}, 0, 3, DType::F32).to_dtype(dt);
    const std::pair<const char*, Tensor> views[] = {{"", x}, {" t", x.t()}, {" narrow", x.narrow(1, 1, 200)}};
    for (const auto& [name, v] : views) {
      const std::string p = std::string(dtype_name(dt)) + name + " ";
      keep(p + "sum", v.sum());
      keep(p + "sum(0)", v.sum(0));
      keep(p + "sum(1)", v.sum(1));
      keep(p + "sum(0, 1)", v.sum(Dims{0, 1}, true));
      keep(p + "max", v.max());
      keep(p + "max(0)", v.max(0));
      keep(p + "min(1)", v.min(1));
      keep(p + "argmax(0)", v.argmax(0));
      keep(p + "argmin(1)", v.argmin(1));
      keep(p + "cumsum(0)", v.cumsum(0));
      keep(p + "cumsum(1)", v.cumsum(1));
      keep(p + "mean(1)", v.mean(1));
      keep(p + "argsort", v.argsort());
      keep(p + "argsort descending", v.argsort(false));
    }
  }
  // Integers: sums that wrap, and many ties for argmax and argsort.
  const Tensor i = Tensor::rand_uniform({256, 300}, -1000, 1000, DType::F64).to_dtype(DType::I64);
  keep("i64 sum(0)", i.sum(0));
  keep("i64 sum", (i * 1000000000000LL).sum());
  keep("i64 cumsum(1)", i.cumsum(1));
  keep("i32 argmax(1)", i.to_dtype(DType::I32).affine(0.01, 0).argmax(1));
  keep("i32 argsort", i.to_dtype(DType::I32).affine(0.01, 0).argsort());
  // Index ops on 65,536-element and larger outputs; the adds hit each destination many times.
  const Tensor x = Tensor::rand_normal({256, 256}, 0, 1, DType::F32);
  keep("index_select", x.narrow(1, 0, 64).index_select(ids(1024, 37, 256, {1024}), 0));
  keep("gather", x.gather(ids(65536, 31, 256, {256, 256}), 1));
  keep("scatter", Tensor::zeros({16, 256}).scatter(ids(65536, 7, 16, {256, 256}), x, 0));
  keep("scatter_add", Tensor::zeros({16, 256}).scatter_add(ids(65536, 7, 16, {256, 256}), x, 0));
  keep("index_add", Tensor::zeros({64, 256}).index_add(ids(256, 5, 64, {256}), x, 0));
  keep("embedding", embedding(x, ids(4096, 13, 256, {64, 64})));
  // A linear layer's product for 1 to 8 rows: the weight (300 x 257, past the split by columns)
  // read once by wick's own loops.
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    const Tensor w = Tensor::rand_normal({257, 300}, 0, 1, DType::F32).to_dtype(dt);
    for (int64_t rows : {1, 3, 8}) {
      const Tensor a = Tensor::rand_normal({rows, 300}, 0, 1, DType::F32).to_dtype(dt);
      keep(std::string(dtype_name(dt)) + " linear of " + std::to_string(rows) + " rows", a.matmul(w.t()));
    }
  }
  return out;
}

// The CPU's products run on OpenBLAS's kernels for the vector units it has: where OpenBLAS took
// its generic (Prescott) kernels on a CPU with AVX2 and FMA that it did not know, wick asked it for
// the kernels of the CPU's features (src/cpu/gemm.cpp). describe_device names the kernels.
TEST(Threads, BlasTakesTheKernelsOfTheCpusVectorUnits) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) GTEST_SKIP() << "OPENBLAS_CORETYPE chooses the kernels";
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "no AVX2 and FMA";
  const std::string line = describe_device(Device::cpu());
  EXPECT_EQ(line.find("Prescott"), std::string::npos) << line;
  // And a product on them is right: f32 against f64 sums.
  const int64_t n = 67;
  std::vector<float> a(n * n), b(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>((i * 7919) % 61) / 61.f - 0.5f;
    b[static_cast<size_t>(i)] = static_cast<float>((i * 104729) % 53) / 53.f - 0.5f;
  }
  const std::vector<float> c = Tensor::from_vector(a, {n, n})
                                   .matmul(Tensor::from_vector(b, {n, n}))
                                   .contiguous()
                                   .reshape({n * n})
                                   .to_vector<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t l = 0; l < n; ++l)
        want += double{a[static_cast<size_t>(i * n + l)]} * b[static_cast<size_t>(l * n + j)];
      ASSERT_NEAR(c[static_cast<size_t>(i * n + j)], want, 1e-4) << i << ", " << j;
    }
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

// Products in tiles (OpenBLAS's pthreads build: src/cpu/gemm.cpp) cover c once, about two tiles
// a thread where the product has them, in whole multiples of the tile's rows and columns.
TEST(Threads, GemmTilesCoverTheProductAndShareIt) {
  for (int threads : {1, 2, 3, 16, 64})
    for (int64_t m : {1, 15, 16, 17, 512, 4097})
      for (int64_t n : {1, 63, 64, 200, 2048, 128256}) {
        const cpu::GemmTiles t = cpu::plan_gemm_tiles(m, n, threads);
        SCOPED_TRACE(::testing::Message()
                     << m << " x " << n << ", " << threads << " threads: tiles of " << t.rows << " x " << t.cols);
        ASSERT_GE(t.rows, 1);
        ASSERT_GE(t.cols, 1);
        ASSERT_LE(t.rows, m);
        ASSERT_LE(t.cols, n);
        EXPECT_TRUE(t.rows == m || t.rows % cpu::kTileRows == 0);
        EXPECT_TRUE(t.cols == n || t.cols % cpu::kTileColumns == 0);
        const int64_t tiles = ((m + t.rows - 1) / t.rows) * ((n + t.cols - 1) / t.cols);
        const int64_t most =
            ((m + cpu::kTileRows - 1) / cpu::kTileRows) * ((n + cpu::kTileColumns - 1) / cpu::kTileColumns);
        EXPECT_GE(tiles, std::min<int64_t>(2 * threads, most));
        EXPECT_LE(tiles, std::max<int64_t>(8 * threads, 1));
      }
}

// Under OpenBLAS's pthreads build (ctest's threads_pthreads_blas runs this program on it) wick runs
// products in tiles over its own threads: every layout BLAS takes as it is (either operand
// transposed, a batch of matrices, f32 and f64) gives the product, against sums in f64.
TEST(Threads, ProductsInTilesAreTheProducts) {
  const std::string line = describe_device(Device::cpu());
  if (!cpu::blas_in_tiles()) GTEST_SKIP() << "OpenBLAS takes each product whole here: " << line;
  EXPECT_NE(line.find("tiles"), std::string::npos) << line;
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  const int64_t m = 70, k = 90, n = 200;
  for (DType dtype : {DType::F32, DType::F64})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype << (ta ? ", a transposed" : "") << (tb ? ", b transposed" : ""));
        // Two matrices of each, stored as the product reads them.
        const Tensor a = ta ? Tensor::rand_normal({2, k, m}, 0, 1, dtype).transpose(1, 2)
                            : Tensor::rand_normal({2, m, k}, 0, 1, dtype);
        const Tensor b = tb ? Tensor::rand_normal({2, n, k}, 0, 1, dtype).transpose(1, 2)
                            : Tensor::rand_normal({2, k, n}, 0, 1, dtype);
        const std::vector<double> got = a.matmul(b).contiguous().to_dtype(DType::F64).to_vector<double>();
        const std::vector<double> av = a.contiguous().to_dtype(DType::F64).to_vector<double>();
        const std::vector<double> bv = b.contiguous().to_dtype(DType::F64).to_vector<double>();
        for (int64_t z = 0; z < 2; ++z)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double want = 0;
              for (int64_t l = 0; l < k; ++l)
                want += av[static_cast<size_t>((z * m + i) * k + l)] * bv[static_cast<size_t>((z * k + l) * n + j)];
              ASSERT_NEAR(got[static_cast<size_t>((z * m + i) * n + j)], want, 1e-3)
                  << "matrix " << z << ", (" << i << ", " << j << ")";
            }
      }
  omp_set_num_threads(before);
}

// f16 weights take the processor's F16C conversion where it has one; the portable loop gives the
// same f32 sums, bit for bit (subnormal, infinite and NaN weights included).
TEST(Threads, HalfWeightsGiveTheSameBitsWithAndWithoutF16C) {
  constexpr int64_t kRows = 8, kCols = 37, kK = 1000;
  const std::vector<float> a = Tensor::rand_normal({kRows, kK}, 0, 1, DType::F32).to_vector<float>();
  std::vector<f16> w = Tensor::rand_normal({kCols, kK}, 0, 1, DType::F32).to_dtype(DType::F16).to_vector<f16>();
  for (size_t i = 0; i < 64; ++i) w[i * 97].bits = static_cast<uint16_t>(i * 0x0401u);  // subnormals and a spread
  w[5].bits = 0x7c00;  // +inf in the first column
  w[kK + 7].bits = 0x7e01;  // NaN in the second
  for (int64_t m = 1; m <= cpu::kMatvecRows; ++m) {
    std::vector<float> fast(static_cast<size_t>(m * kCols)), portable(fast.size());
    cpu::matvec_rows(m, 0, kCols, kK, a.data(), kK, w.data(), kK, fast.data(), kCols);
    const bool was = cpu::set_matvec_f16c(false);
    cpu::matvec_rows(m, 0, kCols, kK, a.data(), kK, w.data(), kK, portable.data(), kCols);
    cpu::set_matvec_f16c(was);
    for (size_t i = 0; i < fast.size(); ++i)
      ASSERT_TRUE(std::memcmp(&fast[i], &portable[i], sizeof(float)) == 0 || (fast[i] != fast[i] && portable[i] != portable[i]))
          << m << " rows, output " << i << ": " << fast[i] << " and " << portable[i];
  }
}

TEST(Threads, ResultsDoNotDependOnTheThreadCount) {
  const int before = omp_get_max_threads();
  const std::vector<Result> one = results(1);
  for (int threads : {2, 3}) {
    const std::vector<Result> many = results(threads);
    ASSERT_EQ(many.size(), one.size());
    for (size_t k = 0; k < one.size(); ++k)
      EXPECT_TRUE(many[k].bytes == one[k].bytes) << one[k].what << " differs between 1 and " << threads << " threads";
  }
  omp_set_num_threads(before);
}

// The process's threads, as Linux lists them.
int process_threads() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) n += entry.is_directory();
  return n;
}

// release_host_threads ends the calling thread's team: its 3 other threads exit (libgomp's
// teams; the clang builds' runtime keeps its threads), and the next op starts a team again.
TEST(Threads, ReleaseHostThreadsEndsTheCallersTeam) {
#if defined(__clang__) || !defined(__linux__)
  GTEST_SKIP() << "libgomp on Linux only";
#else
  const int before = omp_get_max_threads();
  omp_set_num_threads(4);
  const Tensor x = Tensor::rand_normal({1000, 257}, 0, 1, DType::F32);
  const float sum = x.sum().item<float>();
  const int with_team = process_threads();
  release_host_threads();
  int now = process_threads();
  for (int i = 0; i < 200 && now > with_team - 3; ++i) {  // they exit as they wake
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    now = process_threads();
  }
  EXPECT_EQ(now, with_team - 3);
  EXPECT_EQ(x.sum().item<float>(), sum);  // a team again, the same bits
  EXPECT_EQ(process_threads(), with_team);
  omp_set_num_threads(before);
#endif
}

}  // namespace
}  // namespace wick
