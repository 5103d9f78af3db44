// `wick bench`: times Backend ops at benchmark sizes and reports each against the device's own
// ceilings (copy bandwidth for memory-bound ops, the GEMM peak of the dtype for matmul and
// convolution), as a table and as CSV. Cases call the Backend methods directly, as the parity
// harness does, and carry its op names so that --op selects the same way.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "parity/harness.h"

namespace wick::bench {

// The sizes of a run: a GPU's (inputs far larger than its L2), the CPU's (a run of about a
// minute on a few cores) or tiny ones (--quick, for tests).
enum class Scale { Gpu, Cpu, Quick };

// How an input is laid out over its storage (the harness's forms, plus a broadcast of dim 0).
enum class Form {
  Contiguous,
  Transposed,  // storage holds the last two dims swapped (parity::Form::Transposed)
  Permuted,    // storage holds dims (1, .., r-1, 0) (parity::Form::Permuted)
  Broadcast0,  // dim 0 stored once and broadcast (stride 0)
};

// Makes a case's inputs on the backend under test. Floats come from the backend's own Philox
// generator (fast at a GPU's sizes), indices from the harness's Ctx; both are seeded per case.
class Inputs {
 public:
  Inputs(Backend& backend, uint64_t seed);
  Backend& backend() { return ctx_.backend(); }
  // Uniform in [lo, hi).
  parity::Arg floats(DType dtype, const Shape& shape, Form form = Form::Contiguous, double lo = -3, double hi = 3);
  // 0 or 1, about half each.
  parity::Arg cond(DType dtype, const Shape& shape);
  // Indices in [0, size), no skips.
  parity::Arg indices(DType dtype, const Shape& shape, int64_t size);

 private:
  parity::Ctx ctx_;
};

// The work a case times: one Backend call; the result is released after the clock stops.
using Run = std::function<StoragePtr()>;

struct Case {
  std::string op;                   // the harness's names: "unary.exp", "binary.add", "copy_strided", "matmul"
  std::string dtype;                // "f32"; "f32->bf16" (cast); "f32/u8" (where: value/cond); "bf16/u32" (index)
  std::string shape;                // "16384x16384"; "8192x16384 over 1"; "8192x8192 @ 8192x8192"; conv: "x * k pad p"
  std::string layout;               // contiguous, transposed, permuted+broadcast, ids-broadcast, tf32
  DType main_dtype = DType::F32;    // what --dtype matches (the value dtype)
  OpKey key = OpCode::CopyStrided;  // with `dtypes`, what Backend::supports is asked
  std::vector<DType> dtypes = {};
  double bytes = 0;          // each input read once (distinct elements) + the output written once
  double flops = 0;          // matmul and convolution: 2 * multiply-adds; 0 for memory-bound ops
  bool tf32 = false;         // run with set_allow_tf32(true)
  std::string defines = {};  // the ceiling this case measures ("copy", "gemm f32"), or empty
  // Makes the inputs once and returns the call to time.
  std::function<Run(Inputs&)> prepare = {};

  bool compute_bound() const { return flops > 0; }
  // The ceiling this case is compared with.
  std::string ceiling() const {
    return compute_bound() ? "gemm " + std::string(dtype_name(main_dtype)) + (tf32 ? " tf32" : "") : "copy";
  }
  std::string name() const { return op + "/" + dtype + "/" + layout + "/" + shape; }
};

// Every case of a scale, ceilings first, in a fixed order.
std::vector<Case> bench_cases(Scale scale);
// The block formats' cases (bench_quant.cpp), appended last.
void add_quant_cases(std::vector<Case>& cases, Scale scale);

// "16384x16384"
std::string dims_label(const Shape& shape);

struct Options {
  std::string op_regex;       // empty: every op
  std::vector<DType> dtypes;  // empty: every dtype
  int reps = 20;              // timed runs of a fast case; slow cases take fewer, at least 3
  bool quick = false;         // tiny sizes (tests)
  std::string csv;            // non-empty: write the results there
  uint64_t seed = 20261122;
};

// `wick bench ARGS...` (after the command word); returns the exit status.
int cmd_bench(int argc, char** argv);

// wick's git revision at build time ("4a4fca7", "4a4fca7-dirty" or "unknown"); generated.
const char* git_revision();

}  // namespace wick::bench
