// Block-format weights arranged for their device's products (QTensor::arrange; on the CPU,
// cpu/quant/arranged.h): the same values and products as the blocks in GGUF's order, GGUF's bytes
// back from plain(), every row of x's product its own bits whatever the batch, and the instruction
// set lowered under an arranged weight. And the products of many rows on AMX's tiles (cpu/quant/amx.h),
// where the processor has them.
#include <cstring>
#include <string>
#include <vector>

#include "cpu/quant/amx.h"
#include "cpu/quant/qdot.h"
#include "test_util.h"

namespace wick::test {
namespace {

using quant::QTensor;
using quant::QType;
namespace qdot = cpu::qdot;

// Rows: two groups of 16 and 5 more, which stay as they were.
constexpr int64_t kRows = 37;

QTensor random_weight(QType q, int64_t rows, int64_t k, uint64_t seed) {
  manual_seed(seed);
  return quant::quantize(Tensor::rand_normal({rows, k}, 0.0, 0.1), q);
}

std::vector<uint8_t> bytes_of(const QTensor& w) { return w.bytes().reshape({w.nbytes()}).to_vector<uint8_t>(); }

std::vector<uint32_t> bits_of(const Tensor& t) {
  const std::vector<float> v = t.to_dtype(DType::F32).contiguous().reshape({t.numel()}).to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

double relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<float> g = got.reshape({got.numel()}).to_vector<float>();
  const std::vector<float> w = want.reshape({want.numel()}).to_vector<float>();
  double err = 0, norm = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    err += (static_cast<double>(g[i]) - w[i]) * (static_cast<double>(g[i]) - w[i]);
    norm += static_cast<double>(w[i]) * w[i];
  }
  return err / norm;
}

// The Q4_0 weight arranged, or a skip where this machine keeps Q4_0 as it is.
#define ARRANGED_OR_SKIP(name, plain)                                             \
  const QTensor name = (plain).arrange();                                         \
  if (!name.arranged())                                                           \
  GTEST_SKIP() << "this machine's CPU products take Q4_0 blocks as they lie (no " \
                  "AVX2): nothing is arranged"

// The instruction-set limit of the CPU's kernels for a scope.
class IsaLimit {
 public:
  explicit IsaLimit(qdot::Isa isa) : was_(qdot::set_isa_limit(isa)) {}
  ~IsaLimit() { qdot::set_isa_limit(was_); }
  IsaLimit(const IsaLimit&) = delete;
  IsaLimit& operator=(const IsaLimit&) = delete;

 private:
  qdot::Isa was_;
};

// Each instruction set of this machine whose kernels take arranged weights (AVX2 arranges Q4_0, Q8_0,
// Q4_K and Q6_K, AVX-512 VNNI Q4_0), with the formats arranged and their rows' lengths: one block
// and a few.
struct Arranging {
  qdot::Isa isa;
  QType q;
  std::vector<int64_t> ks;
};
std::vector<Arranging> arranging() {
  std::vector<Arranging> all;
  for (qdot::Isa isa : {qdot::Isa::Avx2, qdot::Isa::Avx512Vnni}) {
    if (isa > qdot::best_isa()) continue;
    all.push_back({isa, QType::Q4_0, {32, 544, 2048}});
    if (isa == qdot::Isa::Avx2) {
      all.push_back({isa, QType::Q8_0, {32, 544, 2048}});
      all.push_back({isa, QType::Q4_K, {256, 2304}});
      all.push_back({isa, QType::Q6_K, {256, 2304}});
    }
  }
  return all;
}
#define SKIP_WITHOUT_ARRANGING() \
  if (arranging().empty()) GTEST_SKIP() << "no AVX2 here: the CPU's products take every block as it lies"

std::string what(const Arranging& a, int64_t k) {
  return detail::str_cat(quant::qtype_name(a.q), " under ", qdot::isa_name(a.isa), ", k ", k);
}

TEST(QuantArranged, PlainGivesGgufBytesBack) {
  SKIP_WITHOUT_ARRANGING();
  for (const Arranging& c : arranging()) {
    const IsaLimit limit(c.isa);
    for (int64_t rows : {int64_t{16}, kRows, int64_t{64}}) {
      for (int64_t k : c.ks) {
        const QTensor w = random_weight(c.q, rows, k, static_cast<uint64_t>(rows * k));
        const QTensor a = w.arrange();
        ASSERT_TRUE(a.arranged()) << what(c, k);
        EXPECT_EQ(a.nbytes(), w.nbytes());
        EXPECT_EQ(a.qtype(), w.qtype());
        EXPECT_EQ(a.rows(), rows);
        EXPECT_EQ(a.cols(), k);
        EXPECT_NE(bytes_of(a), bytes_of(w)) << rows << " rows, " << what(c, k);  // the groups moved
        EXPECT_EQ(bytes_of(a.plain()), bytes_of(w)) << rows << " rows, " << what(c, k);
        EXPECT_FALSE(a.plain().arranged());
        EXPECT_TRUE(a.arrange().arranged());
        EXPECT_EQ(bytes_of(a.arrange()), bytes_of(a));  // arranged once only
        EXPECT_EQ(bits_of(quant::dequantize(a)), bits_of(quant::dequantize(w))) << rows << " rows, " << what(c, k);
      }
    }
  }
}

TEST(QuantArranged, OnlyWhatTheKernelsTakeIsArranged) {
  // Other formats, Q8_0, Q4_K and Q6_K where AVX-512 VNNI's kernels take them as they lie, and
  // weights of fewer rows than a group keep GGUF's order.
  for (qdot::Isa isa : {qdot::Isa::None, qdot::Isa::Avx2, qdot::Isa::Avx512Vnni}) {
    if (isa > qdot::best_isa()) continue;
    const IsaLimit limit(isa);
    for (QType q : {QType::Q4_1, QType::Q5_0, QType::Q5_K, QType::Q3_K})
      EXPECT_FALSE(random_weight(q, 32, 256, 1).arrange().arranged()) << q << " under " << qdot::isa_name(isa);
    for (QType q : {QType::Q8_0, QType::Q4_K, QType::Q6_K}) {
      EXPECT_EQ(random_weight(q, 32, 512, 2).arrange().arranged(), isa == qdot::Isa::Avx2)
          << q << " under " << qdot::isa_name(isa);
      EXPECT_FALSE(random_weight(q, 15, 256, 2).arrange().arranged());
    }
    EXPECT_EQ(random_weight(QType::Q4_0, 32, 64, 2).arrange().arranged(), isa != qdot::Isa::None)
        << qdot::isa_name(isa);
    EXPECT_FALSE(random_weight(QType::Q4_0, 15, 64, 2).arrange().arranged());
  }
  const QTensor plain = random_weight(QType::Q4_0, 16, 64, 3);
  EXPECT_EQ(bytes_of(plain.plain()), bytes_of(plain));
}

// The same integer dot products as the kernels of the blocks in GGUF's order; only the order of
// the float sums differs. Every count of rows of x up to a few tiles, the last rows of the weight
// (fewer than a group) included.
TEST(QuantArranged, ProductsMatchThoseOfThePlainBlocks) {
  SKIP_WITHOUT_ARRANGING();
  for (const Arranging& c : arranging()) {
    const IsaLimit limit(c.isa);
    for (int64_t k : c.ks) {
      const QTensor w = random_weight(c.q, kRows, k, 10 + static_cast<uint64_t>(k));
      const QTensor a = w.arrange();
      ASSERT_TRUE(a.arranged()) << what(c, k);
      const Tensor wf = quant::dequantize(w);
      for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 40, 100}) {
        manual_seed(100 + static_cast<uint64_t>(m));
        for (DType dt : {DType::F32, DType::BF16}) {
          const Tensor x = Tensor::rand_normal({m, k}, 0.0, 1.0).to_dtype(dt);
          const Tensor got = quant::qmatmul(x, a);
          EXPECT_EQ(got.dtype(), dt);
          // Many rows of x take other kernels for plain blocks (the GEMM, x rounded per super-block).
          const double plain_tolerance = m > 8 ? 1e-4 : dt == DType::F32 ? 1e-10 : 1e-4;
          EXPECT_LT(relative_error(got.to_dtype(DType::F32), quant::qmatmul(x, w).to_dtype(DType::F32)),
                    plain_tolerance)
              << what(c, k) << " m " << m << " " << dt;
          if (dt == DType::F32) {
            EXPECT_LT(relative_error(got, x.matmul(wf.t())), 1e-4) << what(c, k) << " m " << m;
          }
        }
      }
    }
  }
}

// A row of x gets the same bits alone as beside any others: the kernel sums each row of x by itself
// in one order for any count of rows (the last rows of the weight, through the kernels of plain
// blocks, are left out: those may change their order with the count).
TEST(QuantArranged, RowsOfXDoNotDependOnTheBatch) {
  SKIP_WITHOUT_ARRANGING();
  const int64_t groups = kRows / 16 * 16;
  for (const Arranging& c : arranging()) {
    const IsaLimit limit(c.isa);
    const int64_t k = c.ks.back();
    const QTensor w = random_weight(c.q, kRows, k, 20);
    const QTensor a = w.arrange();
    ASSERT_TRUE(a.arranged()) << what(c, k);
    manual_seed(21);
    const Tensor x = Tensor::rand_normal({40, k}, 0.0, 1.0);
    const Tensor all = quant::qmatmul(x, a).narrow(1, 0, groups);
    for (int64_t t : {0, 7, 8, 23, 39}) {
      EXPECT_EQ(bits_of(quant::qmatmul(x.narrow(0, t, 1), a).narrow(1, 0, groups)), bits_of(all.narrow(0, t, 1)))
          << "row " << t << " of 40, " << what(c, k);
      EXPECT_EQ(bits_of(quant::qmatmul(x.narrow(0, t / 8 * 8, std::min<int64_t>(8, 40 - t / 8 * 8)), a)
                            .narrow(0, t % 8, 1)
                            .narrow(1, 0, groups)),
                bits_of(all.narrow(0, t, 1)))
          << "row " << t << " in a tile of 8, " << what(c, k);
    }
  }
}

// The rows an embedding gathers, from an arranged weight (a tied head) as from its plain blocks: the
// same bytes, in the ids' order, rows of one group and of the last rows (fewer than a group) mixed,
// repeated ids, i32 ids; and the errors.
TEST(QuantArranged, IndexSelectGivesThePlainRows) {
  SKIP_WITHOUT_ARRANGING();
  const std::vector<int64_t> ids = {36, 0, 17, 3, 17, 31, 32, 15, 16, 0};
  for (const Arranging& c : arranging()) {
    const IsaLimit limit(c.isa);
    const int64_t k = c.ks.back();
    const QTensor w = random_weight(c.q, kRows, k, 40);
    const QTensor a = w.arrange();
    ASSERT_TRUE(a.arranged()) << what(c, k);
    const Tensor want = w.bytes().index_select(Tensor::from_vector(ids, {10}), 0);
    for (const QTensor& v : {w, a}) {
      for (DType dt : {DType::I64, DType::I32}) {
        const QTensor got = v.index_select(Tensor::from_vector(ids, {10}).to_dtype(dt));
        EXPECT_FALSE(got.arranged());
        EXPECT_EQ(got.rows(), 10);
        EXPECT_EQ(got.cols(), k);
        EXPECT_EQ(bytes_of(got), want.reshape({want.numel()}).to_vector<uint8_t>()) << what(c, k) << " " << dt;
      }
      EXPECT_EQ(v.index_select(Tensor::from_vector(std::vector<int64_t>{}, {0})).rows(), 0);
      const QTensor whole = QTensor(c.q, 32, k, v.plain().bytes().narrow(0, 0, 32)).arrange();  // no last rows
      EXPECT_EQ(whole.index_select(Tensor::from_vector(std::vector<int64_t>{}, {0})).rows(), 0);
      EXPECT_EQ(bytes_of(whole.index_select(Tensor::from_vector(std::vector<int64_t>{31, 0}, {2}))),
                bytes_of(QTensor(c.q, 2, k,
                                 w.bytes().index_select(Tensor::from_vector(std::vector<int64_t>{31, 0}, {2}), 0))));
      EXPECT_THROW(v.index_select(Tensor::from_vector(std::vector<int64_t>{1, kRows}, {2})), IndexError);
      EXPECT_THROW(v.index_select(Tensor::from_vector(std::vector<int64_t>{-1}, {1})), IndexError);
      EXPECT_THROW(v.index_select(Tensor::from_vector(std::vector<int64_t>{1, 2}, {1, 2})), ShapeError);
      EXPECT_THROW(v.index_select(Tensor::from_vector(std::vector<float>{1}, {1})), ShapeError);
    }
  }
}

// Where the instruction set changes under an arranged weight to one that does not arrange it, its
// product is that of its plain blocks under the new limit, bit for bit. Q4_0, which AVX2 and
// AVX-512 VNNI arrange alike, gets the same bits from either kernel for its groups of rows (the same
// integer sums, the same float arithmetic after them); its last rows, fewer than a group, lie as
// they were and take the row kernels of the limit in force.
TEST(QuantArranged, ChangedInstructionSetsTakeThePlainBlocksOrTheSameBits) {
  SKIP_WITHOUT_ARRANGING();
  const int64_t k = 512, groups = kRows / 16 * 16;
  for (const Arranging& c : arranging()) {
    const QTensor w = random_weight(c.q, kRows, k, 30);
    QTensor a;
    {
      const IsaLimit limit(c.isa);
      a = w.arrange();
    }
    ASSERT_TRUE(a.arranged()) << what(c, k);
    for (qdot::Isa isa : {qdot::Isa::None, qdot::Isa::Avx2, qdot::Isa::Avx512Vnni}) {
      if (isa > qdot::best_isa() || isa == c.isa) continue;
      for (int64_t m : {1, 6, 20}) {
        manual_seed(31 + static_cast<uint64_t>(m));
        const Tensor x = Tensor::rand_normal({m, k}, 0.0, 1.0);
        Tensor got, want;
        bool alike = false;
        {
          const IsaLimit limit(isa);
          got = quant::qmatmul(x, a);
          alike = w.arrange().arranged();
          if (!alike) want = quant::qmatmul(x, w);
        }
        if (alike) {
          const IsaLimit limit(c.isa);
          got = got.narrow(1, 0, groups);
          want = quant::qmatmul(x, a).narrow(1, 0, groups);
        }
        EXPECT_EQ(bits_of(got), bits_of(want)) << what(c, k) << ", then " << qdot::isa_name(isa) << ", m " << m;
      }
    }
  }
}

// Where the processor has AMX, many rows of x take the tiles: each row's bits are those of the vector
// kernel, for tiles of 16 rows and a last one of fewer, blocks in pairs and a last one alone (k 544:
// 17 blocks a row), and the last rows of the weight (fewer than a group) beside them.
TEST(QuantArranged, TilesGiveTheVectorKernelsBits) {
  if (!cpu::amx::active()) GTEST_SKIP() << "no AMX here (or Linux does not allow it)";
  for (int64_t k : {544, 2048}) {
    const QTensor w = random_weight(QType::Q4_0, kRows, k, 50 + static_cast<uint64_t>(k));
    ARRANGED_OR_SKIP(a, w);
    for (int64_t m : {32, 33, 47, 100}) {
      manual_seed(60 + static_cast<uint64_t>(m));
      const Tensor x = Tensor::rand_normal({m, k}, 0.0, 1.0);
      const std::vector<uint32_t> tiles = bits_of(quant::qmatmul(x, a));
      const bool was = cpu::amx::set_allowed(false);
      const std::vector<uint32_t> vectors = bits_of(quant::qmatmul(x, a));
      cpu::amx::set_allowed(was);
      EXPECT_EQ(tiles, vectors) << "k " << k << " m " << m;
    }
  }
}

// Plain Q8_0 weights take the tiles for many rows of x too (gathered 16 rows at a time), with the
// integer sums and the float arithmetic of the vector kernels' panels: the same bits. Groups of 16
// rows and 5 more (through the vector kernels), tiles of 16 rows of x and a last one of fewer,
// blocks in pairs and a last one alone.
TEST(QuantArranged, Q8_0OnTheTilesGivesThePanelsBits) {
  if (!cpu::amx::active()) GTEST_SKIP() << "no AMX here (or Linux does not allow it)";
  for (int64_t k : {544, 2048}) {
    const QTensor w = random_weight(QType::Q8_0, kRows, k, 70 + static_cast<uint64_t>(k));
    const Tensor wf = quant::dequantize(w);
    for (int64_t m : {32, 33, 47, 100}) {
      manual_seed(80 + static_cast<uint64_t>(m));
      const Tensor x = Tensor::rand_normal({m, k}, 0.0, 1.0);
      const Tensor tiles = quant::qmatmul(x, w);
      const bool was = cpu::amx::set_allowed(false);
      const Tensor vectors = quant::qmatmul(x, w);
      cpu::amx::set_allowed(was);
      EXPECT_EQ(bits_of(tiles), bits_of(vectors)) << "k " << k << " m " << m;
      EXPECT_LT(relative_error(tiles, x.matmul(wf.t())), 1e-4) << "k " << k << " m " << m;
    }
  }
}

// An arranged weight leaves its device, is written to a file and read by the C API in GGUF's order.
TEST(QuantArranged, EverythingElseSeesGgufOrder) {
  const QTensor w = random_weight(QType::Q4_0, 32, 64, 40);
  ARRANGED_OR_SKIP(a, w);
  io::GgufWriter writer;
  writer.add("w", a);
  TempDir dir;
  writer.write(dir.file("w.gguf"));
  const io::GgufFile f = io::GgufFile::open(dir.file("w.gguf"));
  EXPECT_EQ(bytes_of(f.qtensor(*f.find_tensor("w"), Device::cpu())), bytes_of(w));
  EXPECT_FALSE(a.to_device(Device::cpu()).plain().arranged());
}

}  // namespace
}  // namespace wick::test
