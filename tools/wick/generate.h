// `wick generate` (tools/wick/generate.cpp).
#pragma once

namespace wick::cli {

// argv: the options after the command name.
int cmd_generate(int argc, char** argv);

}  // namespace wick::cli
