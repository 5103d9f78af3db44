// `wick tokenize` (tools/wick/tokenize.cpp).
#pragma once

namespace wick::cli {

// argv: the options after the command name.
int cmd_tokenize(int argc, char** argv);

}  // namespace wick::cli
