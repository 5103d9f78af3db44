// Fuzzes the shape arithmetic and the parsers: Dims from bytes, numel, contiguous_strides,
// broadcast_shapes, normalize_dim, and Device::parse and parse_dtype on the bytes as text. A result
// returned must be exact (a count or stride past int64 must be refused, not wrapped); an error must
// name its op; the parsers accept only what they print, without wrapping a number.
#include <algorithm>
#include <optional>

#include "fuzz_input.h"

namespace wick::fuzz {
namespace {

using i128 = __int128;
constexpr i128 kI64Max = std::numeric_limits<int64_t>::max();

// The product of the dims (of the nonzero ones only when `nonzero`), saturated past int64;
// nullopt when a dim is negative.
std::optional<i128> true_numel(const std::vector<int64_t>& dims, bool nonzero = false) {
  i128 n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d != 0 || !nonzero) n = std::min(n * d, kI64Max + 1);
  }
  return n;
}

void shapes(Bytes& in) {
  const std::vector<int64_t> a = in.numbers(in.byte() % 11), b = in.numbers(in.byte() % 11);
  std::optional<Dims> da, db;
  step([&] { da = Dims(a); });
  step([&] { db = Dims(b); });
  require(da.has_value() == (a.size() <= kMaxRank), "Dims of rank " + std::to_string(a.size()));
  if (!da) return;
  // With every size >= 0: the exact count while the product of the nonzero sizes (what the strides
  // span) fits int64; past that a refusal, or 0 for an empty shape.
  const std::optional<i128> n = true_numel(a), spanned = true_numel(a, true);
  std::optional<int64_t> count;
  step([&] { count = da->numel(); });
  if (n && *spanned <= kI64Max) require(count == static_cast<int64_t>(*n), "numel of " + da->to_string() + " is wrong");
  if (n && *spanned > kI64Max && count && !(*n == 0 && *count == 0))
    finding("numel of " + da->to_string() + " wrapped to " + std::to_string(*count));
  std::optional<Strides> strides;
  step([&] { strides = contiguous_strides(*da); });
  const bool no_zero = std::find(a.begin(), a.end(), 0) == a.end();
  if (n && no_zero && *n <= kI64Max) {
    require(strides.has_value(), "contiguous_strides refused " + da->to_string());
    i128 acc = 1;
    for (int i = da->rank() - 1; i >= 0; --i) {
      require((*strides)[i] == acc, "contiguous_strides of " + da->to_string() + " gave " + strides->to_string());
      acc *= (*da)[i];
    }
  }
  if (n && no_zero && *n > kI64Max && strides)
    finding("contiguous_strides of " + da->to_string() + " wrapped to " + strides->to_string());
  if (db) {
    step([&] {
      const Shape r = broadcast_shapes(*da, *db, "fuzz");
      require(true_numel(a) && true_numel(b),
              "broadcast_shapes accepted a negative size: " + da->to_string() + " and " + db->to_string());
      require(r.rank() == std::max(da->rank(), db->rank()), "broadcast_shapes rank");
      for (int i = 0; i < r.rank(); ++i) {
        const int ia = i - (r.rank() - da->rank()), ib = i - (r.rank() - db->rank());
        const int64_t x = ia >= 0 ? (*da)[ia] : 1, y = ib >= 0 ? (*db)[ib] : 1;
        require((x == y || x == 1 || y == 1) && r[i] == (x == 1 ? y : x),
                "broadcast_shapes of " + da->to_string() + " and " + db->to_string() + " gave " + r.to_string());
      }
    });
  }
  const int64_t dim = in.number();
  const int rank = static_cast<int>(static_cast<int32_t>(in.number()));
  step([&] {
    const int d = normalize_dim(dim, rank, "fuzz");
    require(d >= 0 && d < rank && (d == dim || d == static_cast<i128>(dim) + rank),
            "normalize_dim(" + std::to_string(dim) + ", " + std::to_string(rank) + ") gave " + std::to_string(d));
  });
}

// The digits of a decimal number without its leading zeros ("" for none).
std::string canonical(const std::string& digits) {
  const size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? "0" : digits.substr(first);
}

void parsers(const std::string& text) {
  Device d = Device::rocm(77);
  if (Device::parse(text, &d)) {
    require(d.index() >= 0, "Device::parse(\"" + text + "\") gave a negative index");
    const size_t colon = text.find(':');
    const std::string kind = text.substr(0, colon);
    require(kind == "cpu" || kind == "cuda" || kind == "rocm", "Device::parse accepted \"" + text + "\"");
    if (colon != std::string::npos) {
      const std::string digits = text.substr(colon + 1);
      require(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
                  canonical(digits) == std::to_string(d.index()),
              "Device::parse(\"" + text + "\") gave " + d.to_string());
    }
    Device back = Device::rocm(77);
    require(Device::parse(d.to_string(), &back) && back == d, "Device::parse does not read back " + d.to_string());
  }
  DType dt = DType::U8;
  if (parse_dtype(text, &dt)) require(dtype_name(dt) == text, "parse_dtype accepted \"" + text + "\"");
}

}  // namespace
}  // namespace wick::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wick::fuzz::Bytes in(data, size);
  if (in.byte() % 2 == 0) {
    wick::fuzz::parsers(in.rest());
  } else {
    wick::fuzz::shapes(in);
  }
  return 0;
}
