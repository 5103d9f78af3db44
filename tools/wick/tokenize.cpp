// `wick tokenize`: the token ids of a text under a model file's tokenizer, printed as llama.cpp's
// llama-tokenize --ids prints them, so that the two can be compared.
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "tokenize.h"
#include "wick/io.h"
#include "wick/models/tokenizer.h"

namespace wick::cli {

int cmd_tokenize(int argc, char** argv) {
  std::string model, text;
  bool have_text = false, special = true, parse_special = false, pieces = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("tokenize: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") {
      model = value();
    } else if (a == "--text") {
      text = value();
      have_text = true;
    } else if (a == "--file") {
      const std::string path = value();
      std::ifstream f(path, std::ios::binary);
      if (!f) throw std::runtime_error("tokenize: cannot read " + path);
      std::ostringstream s;
      s << f.rdbuf();
      text = s.str();
      have_text = true;
    } else if (a == "--no-special") {
      special = false;
    } else if (a == "--parse-special") {
      parse_special = true;
    } else if (a == "--pieces") {
      pieces = true;
    } else {
      throw std::runtime_error("tokenize: unknown option '" + a + "'");
    }
  }
  if (model.empty() || !have_text) throw std::runtime_error("tokenize: --model and one of --text or --file are needed");
  const models::Tokenizer tok = models::Tokenizer::from_gguf(io::GgufFile::open(model));
  const std::vector<int32_t> ids = tok.encode(text, special, parse_special);
  if (pieces) {
    for (int32_t id : ids) std::cout << id << " -> '" << tok.piece(id, true) << "'\n";
    return 0;
  }
  std::cout << "[";
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
  std::cout << "]\n";
  return 0;
}

}  // namespace wick::cli
