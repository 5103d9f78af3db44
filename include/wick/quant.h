// Quantized weights in the block formats of GGUF files (ggml's types), held byte for byte as a
// GGUF file stores them, and the product of activations by them (a model's linear layer).
//
// A block format packs a run of values (32 for the legacy types, 256 for the K-quants) into
// small integers with f16 scales: Q4_0 keeps 4 bits per value and one scale per 32 values, Q4_K
// 4 bits with 6-bit scales and minimums per 32 values under two f16 super-block scales, and so
// on. They are not dtypes: no element has a C++ type of its own, so they live here, beside the
// tensor API rather than inside it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "wick/tensor.h"

namespace wick::quant {

// The block formats, in ggml's order of type numbers. Q8_1 and Q8_K are the formats ggml
// quantizes activations to for its integer dot products; they can be held and dequantized too.
// Every function below that takes a QType refuses another value (an integer cast to QType) with a
// DTypeError naming the function and the number.
#define WICK_FORALL_QTYPES(X) \
  X(Q4_0, "q4_0", 2)          \
  X(Q4_1, "q4_1", 3)          \
  X(Q5_0, "q5_0", 6)          \
  X(Q5_1, "q5_1", 7)          \
  X(Q8_0, "q8_0", 8)          \
  X(Q8_1, "q8_1", 9)          \
  X(Q2_K, "q2_k", 10)         \
  X(Q3_K, "q3_k", 11)         \
  X(Q4_K, "q4_k", 12)         \
  X(Q5_K, "q5_k", 13)         \
  X(Q6_K, "q6_k", 14)         \
  X(Q8_K, "q8_k", 15)

enum class QType : uint8_t {
#define WICK_X(e, name, ggml) e,
  WICK_FORALL_QTYPES(WICK_X)
#undef WICK_X
};

inline constexpr QType kAllQTypes[] = {
#define WICK_X(e, name, ggml) QType::e,
    WICK_FORALL_QTYPES(WICK_X)
#undef WICK_X
};

// "q4_k"; parse_qtype takes these names in either case ("Q4_K") and gives nullopt otherwise.
std::string_view qtype_name(QType qtype);
std::optional<QType> parse_qtype(std::string_view name);
// ggml's type number (GGUF's tensor type field): Q4_0 is 2, Q6_K is 14; from_ggml_type gives
// nullopt for a number that is not one of the types above.
int ggml_type(QType qtype);
std::optional<QType> from_ggml_type(int type);
// Values per block (32 or 256) and bytes per block (18 for Q4_0, 210 for Q6_K).
int64_t block_values(QType qtype);
int64_t block_bytes(QType qtype);
// Bytes of one row of `cols` values: cols / block_values * block_bytes. ShapeError unless cols is
// a positive multiple of the block size and the byte count fits in int64.
int64_t row_bytes(QType qtype, int64_t cols);

std::ostream& operator<<(std::ostream& os, QType qtype);

// A 2-D weight of `rows` x `cols` values in one block format on one device. Its storage is a U8
// tensor (rows, row_bytes(qtype, cols)) holding the blocks of each row in order, byte-identical
// to a GGUF tensor's data (GGUF's dims are (cols, rows): ne0 is the row length). A QTensor is a
// handle, as Tensor is: copies share the bytes.
class QTensor {
 public:
  QTensor() = default;  // undefined: every call on it throws
  // Takes `bytes`, a U8 tensor of `rows * row_bytes(qtype, cols)` elements (any shape, any device;
  // made contiguous), as the blocks. ShapeError when the counts do not match or cols is not a
  // multiple of the block size; DTypeError when bytes is not U8.
  QTensor(QType qtype, int64_t rows, int64_t cols, const Tensor& bytes);
  // Copies `nbytes` bytes of blocks from host memory (a GGUF file's tensor data) to `device`.
  static QTensor from_blocks(QType qtype, int64_t rows, int64_t cols, const void* data, int64_t nbytes,
                             Device device = Device::cpu());

  bool defined() const { return bytes_.defined(); }
  QType qtype() const { return qtype_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  Device device() const { return bytes_.device(); }
  // The blocks: a contiguous U8 tensor (rows, row_bytes), in GGUF's order unless arranged().
  const Tensor& bytes() const { return bytes_; }
  int64_t nbytes() const { return bytes_.numel(); }
  // The same blocks on another device (this QTensor when already there), in GGUF's order.
  QTensor to_device(Device device) const;

  // The same weight with its blocks rearranged as its device's products read them fastest, in as
  // many bytes (a copy): on the CPU with AVX2 or AVX-512 VNNI, Q4_0's blocks 16 rows at a time (and
  // Q8_0's, Q4_K's and Q6_K's where AVX2's kernels are the best), so that a product streams the weight once,
  // each row in its own vector lane, instead of regrouping its rows on every call
  // (docs/quantization.md). This QTensor where the device keeps the format as it is, or when it is
  // arranged already. qmatmul and dequantize take either, and give an arranged weight's product
  // the same bits for each row of x whatever the other rows; bytes() are then no GGUF tensor's:
  // plain() gives those back.
  QTensor arrange() const;
  bool arranged() const { return arranged_; }
  // The rows arrange() takes together where it rearranges (a last group of fewer stays as it was),
  // so that weights of a multiple of it stacked and then arranged are each arranged.
  static constexpr int64_t kArrangedRows = 16;
  // The blocks in GGUF's order: a copy where arranged(), else this QTensor.
  QTensor plain() const;
  // The rows ids names (one i64 or i32 dimension, on any device), in that order, as a new weight of
  // as many rows in GGUF's order, arranged() or not: what an embedding gathers per token. Only the
  // groups of an arranged weight that hold the rows are made plain. ShapeError for other ids;
  // IndexError naming the first id outside [0, rows).
  QTensor index_select(const Tensor& ids) const;

 private:
  QType qtype_ = QType::Q4_0;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  Tensor bytes_;
  bool arranged_ = false;
};

// Quantizes w (rows, cols) to `qtype` on the CPU, as ggml's reference quantizer does (the one
// llama-quantize uses without an importance matrix), and puts the blocks on w's device. w is f32
// (f16 and bf16 are widened to f32 first, exactly), any layout, finite. Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q8_1 and Q8_K give ggml's bytes bit for bit; the K-quants (Q2_K..Q6_K) follow llama.cpp's
// reference quantizer (docs/quantization.md states how closely). ShapeError unless w has rank 2
// and cols is a multiple of the block size; an Error naming the element and its block for NaN,
// infinities and magnitudes that reach the format's limit, past which its scales overflow f16
// (docs/quantization.md lists the limits: 65520 for Q4_1, 8321040 for Q8_0).
QTensor quantize(const Tensor& w, QType qtype);
// The magnitude below which quantize takes values in `qtype`: every block of values below it keeps
// finite scales (524160 for Q4_0, 65520 for Q4_1, 8321040 for Q8_0, FLT_MAX for Q8_K).
float max_magnitude(QType qtype);

// The values of w as a (rows, cols) tensor of `dtype` (f32, f16 or bf16) on w's device: ggml's
// dequantization bit for bit (computed in f32, then rounded to the dtype), on every backend.
Tensor dequantize(const QTensor& w, DType dtype = DType::F32);

// x (..., cols) times w transposed: (..., rows), x's dtype (f32, f16 or bf16) and device, as a
// linear layer y = x W^T. x may be any view. The product is computed in f32 from w's exact values.
// Backends with a fused kernel may round x first as ggml does (docs/quantization.md lists where and
// by how much); elsewhere the product is dequantize then matmul. ShapeError for a last dim other
// than cols; DeviceError when x and w are on different devices; DTypeError for another x dtype.
Tensor qmatmul(const Tensor& x, const QTensor& w);

// The products of many weights of one shape stacked in `w` ((experts * rows, cols): expert e's
// weight is rows e * rows .. (e + 1) * rows - 1), each over its own rows of x (p, cols): for each
// [expert, first, end) of `groups` (g, 3) i64 on x's device (nn::MoeRouting::groups), rows first ..
// end - 1 of x times that expert's weight transposed; rows of x no group names give zeros. Result
// (p, rows), x's dtype, each group's rows as qmatmul(those rows, expert's weight) computes them on
// that device (on the CPU bit for bit, in one parallel region for all the groups). x may be any
// view; one row expanded over all p (`broadcast_as`, a single token's pairs) is read in place.
// `max_rows`: at most this many rows in any group (the tokens of a routing, n): on a GPU it picks
// the kernel without reading the groups (at most 64: no wait for the host), and a group past it is
// still computed whole. Errors as qmatmul's, and ShapeError for groups not (g, 3) or w's rows not
// a multiple of `experts`; an IndexError for an expert outside [0, experts) or rows outside
// [0, p) (at the next wait, on a GPU, those groups left out).
Tensor qmatmul_grouped(const Tensor& x, const QTensor& w, int64_t experts, const Tensor& groups, int64_t max_rows);

}  // namespace wick::quant
