// `wick tokenize`: the token ids of texts under a model file's tokenizer, each text's printed as
// llama.cpp's llama-tokenize --ids prints them (a line each), so that the two can be compared.
#include "tokenize.h"

#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "wick/io.h"
#include "wick/models/tokenizer.h"

namespace wick::cli {

int cmd_tokenize(int argc, char** argv) {
  std::string model;
  std::vector<std::string> texts;  // each --text or --file, in order
  bool special = true, parse_special = false, pieces = false;
  for (Options o("tokenize", argc, argv); o.next();) {
    if (o.is("--model")) {
      model = o.value();
    } else if (o.is("--text")) {
      texts.push_back(o.value());
    } else if (o.is("--file")) {
      const std::string path = o.value();
      std::ifstream f(path, std::ios::binary);
      if (!f) o.fail("cannot read " + path);
      std::ostringstream s;
      s << f.rdbuf();
      texts.push_back(s.str());
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
  if (model.empty() || texts.empty())
    throw std::runtime_error("tokenize: --model and at least one --text or --file are needed");
  // The tokenizer is read once for every text: a large vocabulary takes longer to read than to use.
  const models::Tokenizer tok = models::Tokenizer::open(model);
  for (size_t t = 0; t < texts.size(); ++t) {
    const std::vector<int32_t> ids = tok.encode(texts[t], special, parse_special);
    if (pieces) {
      if (t > 0) std::cout << "\n";  // an empty line between texts
      for (int32_t id : ids) std::cout << id << " -> '" << tok.piece(id, true) << "'\n";
      continue;
    }
    std::cout << "[";
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? ", " : "") << ids[i];
    std::cout << "]\n";
  }
  return 0;
}

}  // namespace wick::cli
