// `wick bench-serve` (tools/wick/bench_serve.cpp).
#pragma once

namespace wick::cli {

// argv: the options after the command name.
int cmd_bench_serve(int argc, char** argv);

}  // namespace wick::cli
