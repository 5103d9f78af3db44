// The random loop's vocabulary: a generator of dtypes, shapes and hostile numbers, inputs described
// as recipes (data, then a view) so that the same input can be made on the device under test and on
// the reference, and calls that take those inputs and return what to compare.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "adversarial.h"

namespace wick::adversarial {

// A real allocation made by the loop or accepted from the library holds at most this many bytes.
inline constexpr int64_t kMaxBytes = int64_t{1} << 26;
// A hostile size is refusable when its byte count overflows or is at least this: past any device,
// and past the 2^47-byte user address space, so that not even an overcommitting host can hand it out.
inline constexpr int64_t kHugeBytes = int64_t{1} << 57;

enum class Form { Contiguous, Transposed, Narrowed, Stride2, Broadcast };
enum class Values { Normal, Positive, Small, Special, Cond, Index };

// An input: its logical shape and dtype, the view it is seen through, and how its data is drawn.
struct Input {
  DType dtype;
  Shape shape;
  Form form = Form::Contiguous;
  Values values = Values::Normal;
  int64_t bound = 0;  // Index: valid values are [0, bound)
  uint64_t seed = 0;  // of its data
  bool huge = false;  // a broadcast view of one element, of any shape (no data)
};

// Makes the input on a device: the data on the CPU first, then moved, so both devices see the
// same bits.
Tensor make(const Input& in, Device device);

enum class Compare { Exact, Close };

struct Call {
  std::string desc;
  std::vector<Input> inputs;
  // Runs the op on the made inputs (creation ops: on the device); returns what to compare (an
  // in-place op: its destination and the whole storage under it).
  std::function<std::vector<Tensor>(std::vector<Tensor>&, Device)> run;
  Compare compare = Compare::Exact;
  bool hostile = false;  // hostile numbers: checked for refusal or a sane result, not compared
  uint64_t seed = 0;     // manual_seed before the call (random ops)
};

class Gen {
 public:
  Gen(uint64_t seed, bool hostile) : rng_(seed), hostile_(hostile) {}
  // Whether this call may take hostile parameters (WICK_ADV_HOSTILE=0: never).
  bool maybe_hostile(double p) { return hostile_ && chance(p); }
  std::mt19937_64& rng() { return rng_; }
  int64_t range(int64_t lo, int64_t hi);  // inclusive
  bool chance(double p);
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(range(0, static_cast<int64_t>(v.size()) - 1))];
  }
  DType any_dtype();
  DType float_dtype();
  DType index_dtype();
  // A shape of rank in [lo, hi], dims in [0, max_dim] (0 rarely).
  Shape shape(int lo, int hi, int64_t max_dim = 5);
  // Near 0, 2^31, 2^32, 2^62, 2^63 and their negatives.
  int64_t hostile();
  // A shape whose elements of `dtype` cannot be allocated: a negative size, an element or byte
  // count past int64, or at least kHugeBytes (or no element at all).
  Shape hostile_shape(DType dtype);
  // A shape whose bytes of `dtype` fit int64 but are at least kHugeBytes (a view, never memory).
  Shape huge_view_shape(DType dtype);
  Input input(DType dtype, const Shape& shape, Values values = Values::Normal, bool writable = false);
  Input index_input(DType dtype, const Shape& shape, int64_t bound);
  Input huge_input(DType dtype, const Shape& shape);

 private:
  std::mt19937_64 rng_;
  bool hostile_;
};

// A kind of call the loop makes; `weight` is how often, relative to the others.
struct Maker {
  const char* name;
  int weight;
  std::function<Call(Gen&)> make;
};
std::vector<Maker> ordinary_makers();  // small inputs, compared with the reference
std::vector<Maker> hostile_makers();   // hostile sizes and parameters: refused, or a small result

// "f32 [2, 3] transposed"
std::string describe(const Input& in);

// Bytes of `shape` of `dtype`, or -1 when a size is negative or the count overflows int64.
int64_t checked_bytes(const Shape& shape, DType dtype);

}  // namespace wick::adversarial
