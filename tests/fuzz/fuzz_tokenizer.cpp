// Fuzzes the tokenizers (include/wick/models/tokenizer.h), which are built from untrusted files and
// run on untrusted text. The fuzzer's bytes make a vocabulary: the tokenizer.ggml.* entries of a
// GGUF file (written with io::GgufWriter, then parsed as a file is), or, when the first byte says
// so, the text of a tokenizer.json up to a zero byte. Loading either succeeds or raises a
// wick::Error. A loaded tokenizer then encodes the remaining bytes as text (always an Error where
// they are not UTF-8; ids inside the vocabulary when it succeeds), decodes those ids, and streams
// them through a TextStream, whose output must be whole UTF-8; ids outside the vocabulary must be
// refused.
#include <cmath>
#include <optional>

#include "fuzz_input.h"
#include "wick/io.h"
#include "wick/models/tokenizer.h"

namespace wick::fuzz {
namespace {

using models::TextStream;
using models::Tokenizer;

// Whether s is UTF-8: no stray continuation bytes, overlong forms, surrogates or values past
// U+10FFFF (the rules the tokenizer states for its input).
bool is_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? b : b & (0x7fu >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xc0) != 0x80) return false;
      cp = cp << 6 | (c & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    i += n;
  }
  return true;
}

// A short string of the fuzzer's bytes (0 to 7 of them).
std::string short_text(Bytes& in) {
  std::string s(in.byte() % 8, '\0');
  for (char& c : s) c = static_cast<char>(in.byte());
  return s;
}

// A vocabulary entry: the kinds of text real vocabularies hold, or raw bytes.
std::string token_text(Bytes& in) {
  static const char* const kKnown[] = {"<s>",
                                       "</s>",
                                       "<unk>",
                                       "<|begin_of_text|>",
                                       "<|eot_id|>",
                                       "\xe2\x96\x81",
                                       "\xe2\x96\x81the",
                                       "\xc4\xa0",
                                       "\xc4\xa0\x61",
                                       "a",
                                       "b",
                                       "ab",
                                       " ",
                                       "\n"};
  const uint8_t sel = in.byte();
  if (sel < 64) return kKnown[sel % std::size(kKnown)];
  if (sel < 104) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", in.byte());
    return hex;
  }
  if (sel < 112) {  // a byte token's spelling around any two bytes ("<0xZZ>")
    std::string text = "<0x";
    text += static_cast<char>(in.byte());
    text += static_cast<char>(in.byte());
    return text + ">";
  }
  return short_text(in);
}

// An integer entry, usually of the type the reader expects, sometimes of another.
io::GgufValue integer(Bytes& in, int64_t small) {
  const uint8_t sel = in.byte();
  if (sel < 160) return io::GgufValue::u32(static_cast<uint32_t>(in.byte() % std::max<int64_t>(small, 1)));
  if (sel < 220) return io::GgufValue::i64(in.number());
  if (sel < 240) return io::GgufValue::f32(1.5f);
  return io::GgufValue::string(short_text(in));
}

// The tokenizer.ggml.* entries of a GGUF file, from the fuzzer's bytes.
std::vector<uint8_t> gguf_vocabulary(Bytes& in) {
  io::GgufWriter w;
  static const char* const kModels[] = {"llama", "gpt2", "gpt2", "bert"};
  static const char* const kPre[] = {nullptr, "gpt2", "llama-bpe", "qwen2", "default", "other"};
  const uint8_t flags = in.byte();
  if (flags & 1) w.set("tokenizer.ggml.model", io::GgufValue::string(kModels[in.byte() % 4]));
  const int64_t n = in.byte() % 48;
  io::GgufArray tokens{io::GgufType::String, {}};
  for (int64_t i = 0; i < n; ++i) tokens.items.push_back(io::GgufValue::string(token_text(in)));
  if (flags & 2) w.set("tokenizer.ggml.tokens", io::GgufValue::array(tokens));
  if (flags & 4) {  // scores, one per token unless the byte says otherwise
    io::GgufArray scores{io::GgufType::F32, {}};
    const int64_t count = in.byte() < 240 ? n : in.byte() % 48;
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t s = in.byte();
      scores.items.push_back(io::GgufValue::f32(s == 255 ? NAN : s == 254 ? INFINITY : -static_cast<float>(s) / 8.f));
    }
    w.set("tokenizer.ggml.scores", io::GgufValue::array(scores));
  }
  if (flags & 8) {  // types: mostly Normal, Control, UserDefined and Byte; now and then outside 0..6
    io::GgufArray types{io::GgufType::I32, {}};
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t t = in.byte();
      types.items.push_back(
          io::GgufValue::i32(t < 250 ? static_cast<int32_t>(t % 7) : static_cast<int32_t>(in.number())));
    }
    w.set("tokenizer.ggml.token_type", io::GgufValue::array(types));
  }
  if (flags & 16) {  // merges: pairs of the vocabulary's texts, or anything
    io::GgufArray merges{io::GgufType::String, {}};
    const int64_t count = in.byte() % 32;
    for (int64_t i = 0; i < count && n > 0; ++i) {
      const auto& a = std::get<std::string>(tokens.items[in.byte() % n].value);
      const auto& b = std::get<std::string>(tokens.items[in.byte() % n].value);
      merges.items.push_back(io::GgufValue::string(in.byte() < 200 ? a + " " + b : short_text(in)));
    }
    w.set("tokenizer.ggml.merges", io::GgufValue::array(merges));
  }
  if (const char* pre = kPre[in.byte() % std::size(kPre)]) w.set("tokenizer.ggml.pre", io::GgufValue::string(pre));
  static const char* const kIds[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                     "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eot_token_id"};
  for (const char* key : kIds)
    if (in.byte() & 1) w.set(key, integer(in, n + 1));
  static const char* const kFlags[] = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                       "tokenizer.ggml.add_space_prefix"};
  for (const char* key : kFlags)
    if (const uint8_t b = in.byte(); b & 1) w.set(key, b & 2 ? io::GgufValue::boolean(b & 4) : io::GgufValue::u32(b));
  return w.bytes();
}

// A tokenizer.json of the bytes up to a zero byte.
std::optional<Tokenizer> json_vocabulary(Bytes& in) {
  const std::filesystem::path file = scratch_file("tokenizer.json", in.until_zero());
  std::optional<Tokenizer> tok;
  step([&] { tok = Tokenizer::from_json(file.string()); });
  return tok;
}

// What a loaded tokenizer must do with any text and any ids.
void use(const Tokenizer& tok, const std::string& text) {
  const int32_t size = tok.size();
  require(size > 0, "a tokenizer of no tokens was made");
  for (int32_t id : {tok.bos(), tok.eos()}) require(id >= -1 && id < size, "BOS or EOS outside the vocabulary");
  std::vector<int32_t> ids;
  bool encoded = false;
  step([&] {
    ids = tok.encode(text, text.size() % 2 == 0, text.size() % 3 == 0);
    encoded = true;
  });
  // (UTF-8 may be refused too: a character with no token in a vocabulary without an unknown one.)
  require(!encoded || is_utf8(text), "text that is not UTF-8 was encoded");
  for (int32_t id : ids) require(id >= 0 && id < size, "encode gave id " + std::to_string(id));
  for (bool special : {false, true}) {
    (void)tok.decode(ids, special);
    TextStream stream(tok, special);
    std::string out;
    for (int32_t id : ids) out += stream.push(id);
    out += stream.finish();
    require(is_utf8(out), "TextStream gave text that is not UTF-8");
  }
  // Ids just outside the vocabulary are refused (an IndexError), never read.
  for (int32_t bad : {-1, size, std::numeric_limits<int32_t>::max()}) {
    bool refused = false;
    try {
      (void)tok.decode(std::vector<int32_t>{bad});
    } catch (const IndexError&) {
      refused = true;
    }
    require(refused, "decode took id " + std::to_string(bad));
  }
}

void run(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  std::optional<Tokenizer> tok;
  if (in.byte() % 4 == 3) {
    tok = json_vocabulary(in);
  } else {
    const std::vector<uint8_t> file = gguf_vocabulary(in);
    step([&] { tok = Tokenizer::from_gguf(io::GgufFile::parse(file, "fuzz.gguf")); });
  }
  if (tok) use(*tok, in.rest());
}

}  // namespace
}  // namespace wick::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wick::fuzz::run(data, size);
  return 0;
}
