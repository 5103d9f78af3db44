#pragma once

namespace wick::cli {

// `wick bench-dist --devices LIST | --launched [--dtype T] [--max BYTES] [--iters N] [--in-place] [--csv FILE]`
// (tools/wick/bench_dist.cpp); the arguments after "bench-dist".
int cmd_bench_dist(int argc, char** argv);

}  // namespace wick::cli
