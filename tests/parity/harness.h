// The parity harness: every Backend op x dtype x layout variant, run on a backend and on the
// reference (src/reference), compared exactly (integers, copies, index ops) or by NaN/Inf
// positions and normalised error (float math). Used by the `wick parity` command and a ctest.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace wick::parity {

// Layout of one input over its storage.
enum class Form {
  Contiguous,
  Transposed,  // storage holds the last two dims swapped; the view swaps them back
  Narrow,      // the last dim is a window starting at 2 of a storage row 3 longer
  Stride2,     // every other element of the last dim, from element 1
  Broadcast,   // the first and last dims are stored once and broadcast (stride 0)
  Permuted,    // storage holds dims (1, .., r-1, 0); the view permutes them back with (r-1, 0, .., r-2)
};

// Value distributions of generated inputs.
enum class Values {
  Normal,    // floats in [-3, 3]; integers over a range that exercises wrap-around
  Positive,  // floats in [0.1, 4]; integers in [1, 50]
  Small,     // integers in [-8, 8] (as floats too): many ties
  Wide,      // floats in [-1000, 1000] with some far outside integer ranges; integers over the dtype's range
  Special,   // Normal with NaN, +-inf, +-0, subnormals and huge values mixed in
  Cond,      // 0 or 1 (with a few other nonzero values)
};

// A tensor the harness made on a backend.
struct Arg {
  StoragePtr storage;
  Layout layout;
  DType dtype;
  View view() const { return {*storage, layout, dtype}; }
  MutView mut() const { return {*storage, layout, dtype}; }
};

// What a case produced: a storage whose bytes are compared (a new output, or the whole storage of
// an in-place destination).
struct Output {
  StoragePtr storage;
  DType dtype;
};

enum class Compare { Exact, Float };

// Handed to a case's run function: makes inputs on the backend under test. The inputs depend only
// on the case's seed and the order of the calls, so both backends see the same data.
class Ctx {
 public:
  Ctx(Backend& backend, uint64_t seed) : backend_(backend), rng_(seed) {}
  Backend& backend() { return backend_; }
  Arg input(DType dtype, const Shape& shape, Form form = Form::Contiguous, Values values = Values::Normal);
  // Indices into a dim of `size`: a few equal to the dtype's maximum (skip) when `skips`; one
  // equal to `size` (out of range) when `out_of_range`.
  Arg indices(DType dtype, const Shape& shape, int64_t size, bool skips, bool out_of_range = false,
              Form form = Form::Contiguous);
  std::mt19937_64& rng() { return rng_; }

 private:
  Backend& backend_;
  std::mt19937_64 rng_;
};

// Sets a backend option (a GPU's "conv" or "attention" path) for one case and restores the
// default, "library", after it; backends without the option ignore it.
struct BackendOption {
  Backend& b;
  const char* key;
  BackendOption(Backend& backend, const char* k, const char* value) : b(backend), key(k) { b.set_option(key, value); }
  ~BackendOption() { b.set_option(key, "library"); }
  BackendOption(const BackendOption&) = delete;
  BackendOption& operator=(const BackendOption&) = delete;
};

struct Case {
  std::string op;      // Backend method with its variant: "unary.exp", "cast", "reduce.argmax"
  std::string dtype;   // "f32"; "f32/i64" (value/index); "f32->bf16" (cast)
  std::string shape;   // the main operand's shape, "[4, 5, 6]"
  std::string layout;  // the variant: contiguous, transposed, narrow, stride2, broadcast, size1, ...
  OpKey key;
  std::vector<DType> dtypes;  // as Backend::supports takes them
  Compare compare = Compare::Exact;
  bool expect_index_error = false;  // both backends must raise IndexError
  std::function<Output(Ctx&)> run;
  double tolerance = 0;  // the largest normalised error for Compare::Float; 0: tolerance(dtype)

  std::string name() const { return op + "/" + dtype + "/" + layout + "/" + shape; }
  // The dtype of the data (the matrix column): the value, not the condition or the indices.
  DType main_dtype() const { return key.code == OpCode::Where ? dtypes[1] : dtypes[0]; }
};

// Every case, in a fixed order. Each family appends its own.
std::vector<Case> all_cases();
void add_elementwise_cases(std::vector<Case>& cases);
void add_reduce_cases(std::vector<Case>& cases);
void add_index_cases(std::vector<Case>& cases);
void add_copy_cases(std::vector<Case>& cases);
void add_nn_cases(std::vector<Case>& cases);
void add_fused_cases(std::vector<Case>& cases);  // the nn wing, through its public functions
void add_paged_cases(std::vector<Case>& cases);  // paged attention over shuffled blocks
void add_quant_cases(std::vector<Case>& cases);  // the block formats (include/wick/quant.h)

// The largest normalised error a float dtype may show against the reference.
double tolerance(DType dtype);

enum class Status { Pass, Fail, Unsupported };

struct Record {
  const Case* c;
  std::string backend;
  Status status;
  double nmse = 0;
  double max_abs = 0;
  std::string message;
};

struct Options {
  std::string op_regex;       // empty: every op
  std::vector<DType> dtypes;  // empty: every dtype (matched against the case's first dtype)
  std::string case_name;      // non-empty: only the case of this name
  uint64_t seed = 20261122;
};

// Runs the selected cases on `backend`, comparing with `reference`. Fills `records`.
void run_cases(Backend& backend, Backend& reference, const std::vector<Case>& cases, const Options& options,
               std::vector<Record>& records);

// The per-case seed: the run's seed mixed with the case's name.
uint64_t case_seed(uint64_t seed, const std::string& name);

// The op x dtype matrix and the summary line "N passed, N failed, N unsupported".
void print_report(const std::vector<Record>& records, std::ostream& os, uint64_t seed);
std::string to_json(const std::vector<Record>& records);

}  // namespace wick::parity
