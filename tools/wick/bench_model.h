// `wick bench-model` (tools/wick/bench_model.cpp).
#pragma once

namespace wick::cli {

// argv: the options after the command name.
int cmd_bench_model(int argc, char** argv);

}  // namespace wick::cli
