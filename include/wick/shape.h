// Shapes and strides: a small fixed-capacity vector of 64-bit extents, held inline so that views
// never allocate. wick tensors have at most kMaxRank dims.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

namespace wick {

inline constexpr int kMaxRank = 8;

class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> dims);
  explicit Dims(std::span<const int64_t> dims);
  explicit Dims(const std::vector<int64_t>& dims) : Dims(std::span<const int64_t>(dims)) {}

  int rank() const { return rank_; }
  int size() const { return rank_; }
  bool empty() const { return rank_ == 0; }
  int64_t operator[](int i) const { return d_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return d_[static_cast<size_t>(i)]; }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + rank_; }
  const int64_t* data() const { return d_.data(); }
  int64_t back() const { return d_[static_cast<size_t>(rank_ - 1)]; }

  // Product of the extents (1 for rank 0). ShapeError when the product of the nonzero extents
  // does not fit in int64 (wick refuses such shapes even when a zero extent makes them empty).
  int64_t numel() const;
  void push_back(int64_t v);
  void insert(int pos, int64_t v);
  void erase(int pos);
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }
  std::string to_string() const;  // "[2, 3]"

  friend bool operator==(const Dims& a, const Dims& b);

 private:
  std::array<int64_t, kMaxRank> d_{};
  int rank_ = 0;
};

using Shape = Dims;
using Strides = Dims;

std::ostream& operator<<(std::ostream& os, const Dims& d);

// Row-major strides (in elements) of a dense tensor of `shape`; an empty dim counts as 1.
Strides contiguous_strides(const Shape& shape);

// Numpy broadcasting of two shapes; throws ShapeError naming `op` when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Maps a possibly negative dim index (-1 is the last) to [0, rank); throws ShapeError naming
// `op` when it is out of range.
int normalize_dim(int64_t dim, int rank, const char* op);

}  // namespace wick
