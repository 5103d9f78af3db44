// Tokenizers from GGUF metadata and tokenizer.json (include/wick/models/tokenizer.h), on small
// vocabularies written by hand: SentencePiece-style merges by score with byte fallback, byte-level BPE merges by rank
// under each pre-tokenizer, special tokens, decoding (streamed, with characters split over tokens),
// and broken metadata. The token ids of real vocabularies are checked against llama-tokenize by
// scripts outside the unit tests.
#include <cstdio>

#include "test_util.h"
#include "wick/io.h"
#include "wick/models/tokenizer.h"

namespace wick::test {
namespace {

using io::GgufArray;
using io::GgufType;
using io::GgufValue;
using io::GgufWriter;
using models::TextStream;
using models::Tokenizer;
using models::TokenType;

struct Token {
  std::string text;
  float score = 0.f;
  TokenType type = TokenType::Normal;
};

GgufValue strings(const std::vector<std::string>& v) {
  GgufArray a{GgufType::String, {}};
  for (const std::string& s : v) a.items.push_back(GgufValue::string(s));
  return GgufValue::array(a);
}

GgufWriter vocab_writer(const std::string& model, const std::vector<Token>& tokens) {
  GgufWriter w;
  w.set("tokenizer.ggml.model", GgufValue::string(model));
  GgufArray texts{GgufType::String, {}}, scores{GgufType::F32, {}}, types{GgufType::I32, {}};
  for (const Token& t : tokens) {
    texts.items.push_back(GgufValue::string(t.text));
    scores.items.push_back(GgufValue::f32(t.score));
    types.items.push_back(GgufValue::i32(static_cast<int32_t>(t.type)));
  }
  w.set("tokenizer.ggml.tokens", GgufValue::array(texts));
  w.set("tokenizer.ggml.scores", GgufValue::array(scores));
  w.set("tokenizer.ggml.token_type", GgufValue::array(types));
  return w;
}

Tokenizer load(const GgufWriter& w) { return Tokenizer::from_gguf(io::GgufFile::parse(w.bytes(), "vocab.gguf")); }

// ---- SentencePiece style ----------------------------------------------------------------------

const std::string kSp = "\xe2\x96\x81";  // U+2581

// <unk> <s> </s>, the 256 byte tokens, then pieces whose scores merge "▁hello" and "▁world".
std::vector<Token> spm_tokens() {
  std::vector<Token> t = {{"<unk>", 0, TokenType::Unknown}, {"<s>", 0, TokenType::Control}, {"</s>", 0, TokenType::Control}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    t.push_back({name, 0, TokenType::Byte});
  }
  for (const auto& [text, score] : std::vector<std::pair<std::string, float>>{
           {kSp, -1}, {"h", -1}, {"e", -1}, {"l", -1}, {"o", -1}, {"w", -1}, {"r", -1}, {"d", -1},
           {kSp + "h", -2}, {"ll", -3}, {kSp + "he", -4}, {"llo", -5}, {kSp + "hello", -6},
           {kSp + "w", -7}, {"or", -8}, {kSp + "wor", -9}, {"ld", -10}, {kSp + "world", -11}, {"<tool>", 0}})
    t.push_back({text, score, text == "<tool>" ? TokenType::UserDefined : TokenType::Normal});
  return t;
}

Tokenizer spm() {
  GgufWriter w = vocab_writer("llama", spm_tokens());
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(0));
  return load(w);
}

int32_t id_of(const Tokenizer& t, const std::string& text) {
  for (int32_t i = 0; i < t.size(); ++i)
    if (t.token(i) == text) return i;
  ADD_FAILURE() << "no token " << text;
  return -1;
}

TEST(Tokenizer, SentencePieceMergesByScore) {
  const Tokenizer t = spm();
  EXPECT_EQ(t.kind(), Tokenizer::Kind::Spm);
  const int32_t hello = id_of(t, kSp + "hello"), world = id_of(t, kSp + "world");
  EXPECT_EQ(t.encode("hello world"), (std::vector<int32_t>{1, hello, world}));
  EXPECT_EQ(t.encode("hello world", /*add_special=*/false), (std::vector<int32_t>{hello, world}));
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{1});
  EXPECT_EQ(t.decode(t.encode("hello world")), "hello world");
  EXPECT_EQ(t.decode(t.encode("hello world"), /*special=*/true), "<s>hello world");
  // Characters outside the vocabulary fall back to their bytes.
  EXPECT_EQ(t.encode("h\xc3\xa9", false), (std::vector<int32_t>{id_of(t, kSp + "h"), 3 + 0xc3, 3 + 0xa9}));
  EXPECT_EQ(t.decode(t.encode("h\xc3\xa9 world")), "h\xc3\xa9 world");
}

// A token a file types as a byte but spells otherwise ("<0xZZ>") decodes as its text; a
// tokenizer.json token so spelled is an ordinary token.
TEST(Tokenizer, ByteTokensSpelledOtherwiseAreText) {
  std::vector<Token> tokens = spm_tokens();
  tokens.push_back({"<0xZZ>", -1, TokenType::Byte});
  tokens.push_back({"<0x4a>", -1, TokenType::Byte});
  const Tokenizer t = load(vocab_writer("llama", tokens));
  const auto n = static_cast<int32_t>(tokens.size());
  EXPECT_EQ(t.piece(n - 2), "<0xZZ>");
  EXPECT_EQ(t.piece(n - 1), "J");
  EXPECT_EQ(t.piece(3 + 0x41), "A");

  TempDir dir;
  dir.write("tokenizer.json",
            R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {"<0xZZ>": 0, "<0x41>": 1}}})");
  const Tokenizer j = Tokenizer::open(dir.file("tokenizer.json"));
  EXPECT_EQ(j.type(0), TokenType::Normal);
  EXPECT_EQ(j.type(1), TokenType::Byte);
  EXPECT_EQ(j.decode(std::vector<int32_t>{0, 1}), "<0xZZ>A");
}

TEST(Tokenizer, SpecialTokensOnlyWhenAsked) {
  const Tokenizer t = spm();
  const int32_t hello = id_of(t, kSp + "hello"), tool = id_of(t, "<tool>");
  // </s> is text unless parse_special: its characters, each through its bytes.
  const std::vector<int32_t> as_text = t.encode("hello</s>", false);
  EXPECT_EQ(as_text.size(), 5u);
  EXPECT_EQ(t.decode(as_text), "hello</s>");
  EXPECT_EQ(t.encode("hello</s>", false, /*parse_special=*/true), (std::vector<int32_t>{hello, 2}));
  // After a special token the SentencePiece style adds a space again.
  EXPECT_EQ(t.encode("</s>hello", false, true), (std::vector<int32_t>{2, hello}));
  // User-defined tokens are always matched.
  EXPECT_EQ(t.encode("hello<tool>", false), (std::vector<int32_t>{hello, tool}));
  EXPECT_TRUE(t.is_end(2));
  EXPECT_FALSE(t.is_end(hello));
}

TEST(Tokenizer, StreamHoldsSplitCharacters) {
  const Tokenizer t = spm();
  TextStream s(t);
  EXPECT_EQ(s.push(1), "");
  EXPECT_EQ(s.push(id_of(t, kSp + "hello")), "hello");
  EXPECT_EQ(s.push(3 + 0xc3), "");
  EXPECT_EQ(s.push(3 + 0xa9), "\xc3\xa9");
  EXPECT_EQ(s.push(id_of(t, kSp + "world")), " world");
  EXPECT_EQ(s.push(3 + 0xe2), "");
  EXPECT_EQ(s.finish(), "\xef\xbf\xbd");  // an unfinished character ends as U+FFFD
  EXPECT_EQ(s.push(3 + 0xff), "\xef\xbf\xbd");  // a byte that starts no character
  WICK_EXPECT_ERROR(t.decode(std::vector<int32_t>{t.size()}), IndexError, "token id", "outside");
  WICK_EXPECT_ERROR(t.encode("a\xc3("), Error, "not valid UTF-8 at byte 1");
}

// ---- byte-level BPE ---------------------------------------------------------------------------

// The 256 byte characters, then the merges that build "hello" and "Ġworld", plus "123" and "xyz"
// without merges, and a control token.
GgufWriter bpe_writer(const std::string& pre) {
  std::vector<Token> t;
  int next = 256;  // the stand-ins of the unprintable bytes, in byte order
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    const int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xc0 | cp >> 6);
      s += static_cast<char>(0x80 | (cp & 0x3f));
    }
    t.push_back({s});
  }
  const std::vector<std::string> merges = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w", "o r", "\xc4\xa0w or", "l d", "\xc4\xa0wor ld"};
  for (const std::string& m : merges) {
    std::string joined = m;
    joined.erase(joined.find(' '), 1);
    t.push_back({joined});
  }
  t.push_back({"123"});
  t.push_back({"xyz"});
  t.push_back({"<|eot_id|>", 0, TokenType::Control});
  GgufWriter w = vocab_writer("gpt2", t);
  w.set("tokenizer.ggml.merges", strings(merges));
  w.set("tokenizer.ggml.pre", GgufValue::string(pre));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  return w;
}

TEST(Tokenizer, ByteLevelBpeMergesByRank) {
  for (const std::string pre : {"gpt2", "llama-bpe", "qwen2"}) {
    SCOPED_TRACE(pre);
    const Tokenizer t = load(bpe_writer(pre));
    EXPECT_EQ(t.kind(), Tokenizer::Kind::Bpe);
    const int32_t hello = id_of(t, "hello"), world = id_of(t, "\xc4\xa0world");
    EXPECT_EQ(t.encode("hello world"), (std::vector<int32_t>{hello, world}));
    EXPECT_EQ(t.decode(t.encode("hello world")), "hello world");
    const std::string text = "Hi \xe4\xb8\x96\xe7\x95\x8c!\n\n  tabs\tand 42 \xf0\x9f\x98\x80";
    EXPECT_EQ(t.decode(t.encode(text)), text);
    const int32_t eot = id_of(t, "<|eot_id|>");
    EXPECT_EQ(t.encode("hello<|eot_id|>", true, true), (std::vector<int32_t>{hello, eot}));
    EXPECT_NE(t.encode("hello<|eot_id|>"), (std::vector<int32_t>{hello, eot}));
    EXPECT_TRUE(t.is_end(eot));
  }
}

// Chat and fill-in-the-middle tokens that a file types as text are control tokens, as llama.cpp
// takes them: matched only with parse_special, and the end-of-turn ones end generation.
TEST(Tokenizer, ControlLookingTokensAreControl) {
  std::vector<Token> tokens = spm_tokens();
  tokens.push_back({"<|im_end|>"});
  tokens.push_back({"<|fim_prefix|>", 0, TokenType::UserDefined});
  const Tokenizer t = load(vocab_writer("llama", tokens));
  const int32_t im_end = id_of(t, "<|im_end|>"), fim = id_of(t, "<|fim_prefix|>");
  EXPECT_EQ(t.type(im_end), TokenType::Control);
  EXPECT_EQ(t.type(fim), TokenType::Control);
  EXPECT_TRUE(t.is_end(im_end));
  EXPECT_FALSE(t.is_end(fim));
  EXPECT_EQ(t.encode("<|im_end|>", false, true), std::vector<int32_t>{im_end});
  EXPECT_NE(t.encode("<|fim_prefix|>", false), std::vector<int32_t>{fim});
}

TEST(Tokenizer, PreTokenizersSplitAsTheirModels) {
  const Tokenizer gpt2 = load(bpe_writer("gpt2")), llama3 = load(bpe_writer("llama-bpe")), qwen2 = load(bpe_writer("qwen2"));
  const auto ids = [](const Tokenizer& t, std::initializer_list<const char*> texts) {
    std::vector<int32_t> v;
    for (const char* s : texts) v.push_back(id_of(t, s));
    return v;
  };
  // Llama 3 takes a word the vocabulary holds whole, without merges; its digits go in threes.
  EXPECT_EQ(llama3.encode("xyz"), ids(llama3, {"xyz"}));
  EXPECT_EQ(gpt2.encode("xyz"), ids(gpt2, {"x", "y", "z"}));
  EXPECT_EQ(llama3.encode("12345"), ids(llama3, {"123", "4", "5"}));
  EXPECT_EQ(qwen2.encode("12345"), ids(qwen2, {"1", "2", "3", "4", "5"}));
  // GPT-2 keeps a space with the digits that follow it; Llama 3 and Qwen2 do not.
  EXPECT_EQ(gpt2.encode(" 7").size(), 2u);
  EXPECT_EQ(llama3.encode(" 7").size(), 2u);
  EXPECT_EQ(gpt2.decode(gpt2.encode(" 7")), " 7");
}

TEST(Tokenizer, LongWordsMergeQuickly) {
  const Tokenizer t = spm();
  std::string text;
  for (int i = 0; i < 50000; ++i) text += "hello";
  const std::vector<int32_t> ids = t.encode(text, false);
  EXPECT_EQ(t.decode(ids), text);
}

// A Hugging Face tokenizer.json (SentencePiece style: Prepend and Replace normalizers, merges by
// rank, byte fallback) with tokenizer_config.json and generation_config.json beside it; Gemma's
// without Prepend.
TEST(Tokenizer, FromTokenizerJson) {
  TempDir dir;
  dir.write("tokenizer.json", R"({
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
                     {"id": 2, "content": "</s>", "special": true}, {"id": 10, "content": "<|end|>", "special": true},
                     {"id": 11, "content": "<tool>", "special": false}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                       {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                {"Sequence": {"id": "A", "type_id": 0}}]},
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
              "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "b": 5, "\u2581a": 6, "ab": 7, "\u2581ab": 8,
                        "<0x21>": 9},
              "merges": ["\u2581 a", "a b", "\u2581a b"]}})");
  dir.write("generation_config.json", R"({"eos_token_id": [2, 10]})");
  const Tokenizer tok = Tokenizer::open(dir.path());
  EXPECT_EQ(tok.kind(), Tokenizer::Kind::Spm);
  EXPECT_EQ(tok.size(), 12);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.encode("ab a"), (std::vector<int32_t>{1, 8, 6}));
  EXPECT_EQ(tok.encode("a!", false), (std::vector<int32_t>{6, 9}));  // ! through its byte token
  // A control token's text is text unless asked: here its characters have no tokens, not even bytes.
  EXPECT_EQ(tok.encode("a<|end|>", false), (std::vector<int32_t>{6, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(tok.encode("a<|end|>", false, true), (std::vector<int32_t>{6, 10}));
  EXPECT_EQ(tok.encode("a<tool>", false), (std::vector<int32_t>{6, 11}));
  EXPECT_EQ(tok.type(9), TokenType::Byte);
  EXPECT_TRUE(tok.is_end(10));
  EXPECT_EQ(tok.decode(tok.encode("ab a!")), "ab a!");

  dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "add_bos_token": false})");
  const Tokenizer configured = Tokenizer::open(dir.file("tokenizer.json"));
  EXPECT_EQ(configured.eos(), 2);
  EXPECT_EQ(configured.encode("ab"), (std::vector<int32_t>{8}));

  // Gemma's: the same without Prepend (and a Split on spaces that the Replace leaves nothing to
  // split): no space before the text.
  dir.write("gemma.json", R"({
    "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
    "model": {"type": "BPE", "byte_fallback": true,
              "vocab": {"\u2581": 0, "a": 1, "b": 2, "\u2581a": 3, "ab": 4, "\u2581ab": 5},
              "merges": ["\u2581 a", "a b", "\u2581a b"]}})");
  EXPECT_EQ(Tokenizer::open(dir.file("gemma.json")).encode("ab a", false), (std::vector<int32_t>{4, 3}));

  dir.write("unigram.json", R"({"model": {"type": "Unigram", "vocab": []}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("unigram.json")), NotSupportedError, "unigram.json", "Unigram");
  dir.write("novocab.json", R"({"model": {"type": "BPE"}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("novocab.json")), io::FormatError, "novocab.json", "model.vocab");
  dir.write("badid.json", R"({"model": {"type": "BPE", "vocab": {"a": -4}}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("badid.json")), io::FormatError, "model.vocab", "-4");
  // A few bytes naming id 2^31 - 2 would make that many tokens: refused.
  dir.write("sparse.json", R"({"model": {"type": "BPE", "vocab": {"a": 2147483645, "b": 0}}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("sparse.json")), io::FormatError, "model.vocab", "2147483645", "holes");
  dir.write("badmerge.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("badmerge.json")), io::FormatError, "model.merges", "7");
  dir.write("step.json", R"({"pre_tokenizer": {"type": "BertPreTokenizer"}, "model": {"type": "BPE", "vocab": {"a": 0}}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("step.json")), NotSupportedError, "BertPreTokenizer");
  // Members of another type than the reader's are named, whichever member it is.
  dir.write("modeltype.json", R"({"model": {"type": [["a", "b"]], "vocab": {"a": 0}}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("modeltype.json")), io::FormatError, "modeltype.json", "type",
                    "not a string");
  dir.write(
      "stepflag.json",
      R"({"pre_tokenizer": {"type": "ByteLevel", "use_regex": "no"}, "model": {"type": "BPE", "vocab": {"a": 0}}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("stepflag.json")), io::FormatError, "use_regex", "\"no\"",
                    "not true or false");
  dir.write(
      "stepitem.json",
      R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [3]}, "model": {"type": "BPE", "vocab": {"a": 0}}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("stepitem.json")), io::FormatError, "type", "in 3", "not an object");
  dir.write(
      "special.json",
      R"({"added_tokens": [{"id": 1, "content": "<s>", "special": 1}], "model": {"type": "BPE", "vocab": {"a": 0}}})");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("special.json")), io::FormatError, "special", "not true or false");
  WICK_EXPECT_ERROR(Tokenizer::open(std::string(5000, 'a')), Error, "cannot open");
  WICK_EXPECT_ERROR(Tokenizer::open(std::string(5000, 'a') + ".json"), io::FormatError, "cannot be read");
  // An id nested 100000 deep, which the error message would print by recursion: refused while read.
  dir.write("deep.json", R"({"model": {"type": "BPE", "vocab": {"a": )" + std::string(100000, '[') +
                             std::string(100000, ']') + "}}}");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("deep.json")), io::FormatError, "deep.json", "nest deeper than 32");
  // A pattern that backtracks without end stops at PCRE2's match limit, an Error, not silence.
  dir.write(
      "backtrack.json",
      R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(a+)+$"}},)"
      R"( {"type": "ByteLevel", "use_regex": false}]}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}})");
  const Tokenizer backtracking = Tokenizer::open(dir.file("backtrack.json"));
  EXPECT_EQ(backtracking.encode("aab", false), (std::vector<int32_t>{0, 0, 1}));
  WICK_EXPECT_ERROR(backtracking.encode(std::string(40, 'a') + "b"), Error, "pre-tokenizer pattern failed at byte 0",
                    "limit");
  dir.write("broken.json", "{");
  WICK_EXPECT_ERROR(Tokenizer::open(dir.file("broken.json")), io::FormatError, "broken.json", "not JSON");
}

TEST(Tokenizer, BrokenMetadataIsNamed) {
  WICK_EXPECT_ERROR(load(GgufWriter()), io::FormatError, "vocab.gguf", "tokenizer.ggml.model", "missing");
  WICK_EXPECT_ERROR(load(vocab_writer("bert", spm_tokens())), NotSupportedError, "bert");
  {
    GgufWriter w;
    w.set("tokenizer.ggml.model", GgufValue::string("llama"));
    WICK_EXPECT_ERROR(load(w), io::FormatError, "tokenizer.ggml.tokens", "missing");
    w.set("tokenizer.ggml.tokens", GgufValue::u32(3));
    WICK_EXPECT_ERROR(load(w), io::FormatError, "tokenizer.ggml.tokens", "not an array");
  }
  {
    GgufWriter w = vocab_writer("llama", spm_tokens());
    w.set("tokenizer.ggml.scores", GgufValue::array({GgufType::F32, {GgufValue::f32(1.f)}}));
    WICK_EXPECT_ERROR(load(w), io::FormatError, "tokenizer.ggml.scores", "1 items for 278 tokens");
  }
  {
    GgufWriter w = vocab_writer("llama", spm_tokens());
    w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(5000));
    WICK_EXPECT_ERROR(load(w), io::FormatError, "tokenizer.ggml.bos_token_id", "5000");
  }
  {
    GgufWriter w = bpe_writer("gpt2");
    w.set("tokenizer.ggml.pre", GgufValue::string("nosuch"));
    WICK_EXPECT_ERROR(load(w), NotSupportedError, "tokenizer.ggml.pre", "nosuch");
  }
  {
    GgufWriter w = vocab_writer("gpt2", spm_tokens());
    WICK_EXPECT_ERROR(load(w), io::FormatError, "tokenizer.ggml.merges", "missing");
  }
}

// A byte-level vocabulary without the byte tokens cannot spell every text: without an unknown
// token that is an Error naming the character and its offset, never a character dropped.
TEST(Tokenizer, CharactersNoTokenSpellsAreNamed) {
  GgufWriter w = vocab_writer("gpt2", {{"a"}, {"b"}, {"c"}, {"<unk>", 0, TokenType::Unknown}});
  w.set("tokenizer.ggml.merges", strings({}));
  w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  const Tokenizer plain = load(w);
  EXPECT_EQ(plain.encode("abc"), (std::vector<int32_t>{0, 1, 2}));
  WICK_EXPECT_ERROR(plain.encode("ab\xc3\xa9"
                                 "c"),
                    Error, "\"\xc3\xa9\" at byte 2", "has no token");
  WICK_EXPECT_ERROR(plain.encode("cab x"), Error, "\" \" at byte 3");
  w.set("tokenizer.ggml.unknown_token_id", GgufValue::u32(3));
  const Tokenizer with_unk = load(w);
  EXPECT_EQ(with_unk.encode("ab\xc3\xa9"
                            "c"),
            (std::vector<int32_t>{0, 1, 3, 3, 2}));
}

// Wrong-typed metadata is named with its file and key.
TEST(Tokenizer, WrongTypesNameTheFile) {
  GgufWriter w = vocab_writer("llama", spm_tokens());
  w.set("tokenizer.ggml.model", GgufValue::u32(1));
  WICK_EXPECT_ERROR(load(w), io::FormatError, "vocab.gguf", "tokenizer.ggml.model", "string");
  w = vocab_writer("llama", spm_tokens());
  w.set("tokenizer.ggml.bos_token_id", GgufValue::string("1"));
  WICK_EXPECT_ERROR(load(w), io::FormatError, "vocab.gguf", "tokenizer.ggml.bos_token_id", "integer");
}

}  // namespace
}  // namespace wick::test
