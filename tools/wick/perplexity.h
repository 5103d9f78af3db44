// `wick perplexity` (tools/wick/perplexity.cpp).
#pragma once

namespace wick::cli {

// argv: the options after the command name.
int cmd_perplexity(int argc, char** argv);

}  // namespace wick::cli
