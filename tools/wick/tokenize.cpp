// `wick tokenize`: the token ids of a text under a model file's tokenizer, printed as llama.cpp's
// llama-tokenize --ids prints them, so that the two can be compared.
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "args.h"
#include "tokenize.h"
#include "wick/io.h"
#include "wick/models/tokenizer.h"

namespace wick::cli {

int cmd_tokenize(int argc, char** argv) {
  std::string model, text;
  bool have_text = false, special = true, parse_special = false, pieces = false;
  for (Options o("tokenize", argc, argv); o.next();) {
    if (o.is("--model")) {
      model = o.value();
    } else if (o.is("--text")) {
      text = o.value();
      have_text = true;
    } else if (o.is("--file")) {
      const std::string path = o.value();
      std::ifstream f(path, std::ios::binary);
      if (!f) o.fail("cannot read " + path);
      std::ostringstream s;
      s << f.rdbuf();
      text = s.str();
      have_text = true;
    } else if (o.is("--no-special")) {
      special = false;
    } else if (o.is("--parse-special")) {
      parse_special = true;
    } else if (o.is("--pieces")) {
      pieces = true;
    } else {
      o.unknown();
    }
  }
  if (model.empty() || !have_text) throw std::runtime_error("tokenize: --model and one of --text or --file are needed");
  const models::Tokenizer tok = models::Tokenizer::open(model);
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
