// `std::cout << tensor`: the values as PyTorch prints them, then dtype and device.
//
//   tensor([[ 0.1000, -2.5000],
//           [ 3.0000,  4.0000]], dtype=f32)
//
// A tensor of more than kSummariseAbove elements shows the first and last kEdge entries of each
// longer dim, with "..." between; only those entries leave the device.
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "core/checks.h"
#include "wick/ops.h"
#include "wick/tensor.h"

namespace wick {
namespace {

constexpr int64_t kSummariseAbove = 1000;
constexpr int64_t kEdge = 3;

// The tensor cut to the entries shown, and which dims were cut.
Tensor shown_part(const Tensor& t, std::vector<bool>& elided) {
  const bool summarise = t.numel() > kSummariseAbove;
  Tensor part = t;
  for (int d = 0; d < t.rank(); ++d) {
    const int64_t n = t.dim(d);
    elided.push_back(summarise && n > 2 * kEdge);
    if (elided.back()) part = cat({part.narrow(d, 0, kEdge), part.narrow(d, n - kEdge, kEdge)}, d);
  }
  return part;
}

// Each value as text, in one style for the whole tensor: integers as they are; floats as PyTorch
// does, "2." when every value is whole, fixed with four decimals, or scientific when the
// magnitudes span more than 1000x or lie outside [1e-4, 1e8).
std::vector<std::string> cells_of(const Tensor& part) {
  std::vector<std::string> cells;
  char buf[64];
  if (is_int(part.dtype())) {
    for (int64_t v : part.to_dtype(DType::I64).to_vector<int64_t>()) cells.push_back(std::to_string(v));
    return cells;
  }
  const std::vector<double> vals = part.to_dtype(DType::F64).to_vector<double>();
  bool whole = true;
  double lo = INFINITY, hi = 0;
  for (double v : vals) {
    if (!std::isfinite(v)) continue;
    whole = whole && v == std::nearbyint(v);
    const double a = std::fabs(v);
    if (a != 0) lo = std::fmin(lo, a), hi = std::fmax(hi, a);
  }
  const bool sci = hi > 0 && (hi / lo > 1000 || hi >= 1e8 || lo < 1e-4);
  for (double v : vals) {
    if (std::isnan(v))
      cells.emplace_back("nan");
    else if (std::isinf(v))
      cells.emplace_back(v > 0 ? "inf" : "-inf");
    else if (sci)
      std::snprintf(buf, sizeof buf, "%.4e", v), cells.emplace_back(buf);
    else if (whole)
      std::snprintf(buf, sizeof buf, "%.0f.", v), cells.emplace_back(buf);
    else
      std::snprintf(buf, sizeof buf, "%.4f", v), cells.emplace_back(buf);
  }
  return cells;
}

struct Printer {
  std::ostream& os;
  const std::vector<std::string>& cells;
  const Shape& shape;
  const std::vector<bool>& elided;
  size_t width;
  size_t next = 0;

  void cell() {
    const std::string& c = cells[next++];
    os << std::string(width - c.size(), ' ') << c;
  }

  // The entries along `dim` (and those within), nested brackets indented by `indent` columns.
  void dims(int dim, int indent) {
    const int rank = shape.rank();
    os << '[';
    const int64_t n = shape[dim];
    for (int64_t i = 0; i < n; ++i) {
      if (i > 0) {
        if (dim == rank - 1)
          os << ", ";
        else
          os << ',' << std::string(static_cast<size_t>(rank - dim - 1), '\n') << std::string(indent + 1, ' ');
      }
      if (elided[static_cast<size_t>(dim)] && i == kEdge) {
        if (dim == rank - 1)
          os << "..., ";
        else
          os << "...," << std::string(static_cast<size_t>(rank - dim - 1), '\n') << std::string(indent + 1, ' ');
      }
      if (dim == rank - 1)
        cell();
      else
        dims(dim + 1, indent + 1);
    }
    os << ']';
  }
};

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  std::string tail = ", dtype=" + std::string(dtype_name(t.dtype()));
  if (!t.device().is_cpu()) tail += ", device=" + t.device().to_string();
  if (t.numel() == 0) return os << "tensor([], size=" << t.shape() << tail << ')';
  std::vector<bool> elided;
  const Tensor part = shown_part(t, elided);
  const std::vector<std::string> cells = cells_of(part.to_device(Device::cpu()));
  size_t width = 0;
  for (const std::string& c : cells) width = std::max(width, c.size());
  os << "tensor(";
  if (t.rank() == 0) {
    os << cells[0];
  } else {
    Printer p{os, cells, part.shape(), elided, width};
    p.dims(0, static_cast<int>(sizeof "tensor(" - 1));
  }
  return os << tail << ')';
}

}  // namespace wick
