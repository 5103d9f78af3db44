// `wick generate` (tools/wick/generate.cpp).
#pragma once

#include <string>

namespace wick::cli {

// wick's tiny model: installed beside the program (<prefix>/share/wick/tiny.gguf for
// <prefix>/bin/wick), else in the source tree this program was built from.
std::string tiny_model_path();

// argv: the options after the command name.
int cmd_generate(int argc, char** argv);

}  // namespace wick::cli
