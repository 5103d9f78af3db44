// Tokenizers of the Llama family, configured from a GGUF file's tokenizer.ggml.* metadata or a
// Hugging Face tokenizer.json:
//   - SentencePiece-style ("llama": Llama 2, Mistral): spaces become U+2581, pieces merge by
//     score, characters outside the vocabulary fall back to byte tokens <0xXX>;
//   - byte-level BPE ("gpt2": Llama 3, Qwen2): the text split by the pre-tokenizer's pattern
//     (tokenizer.ggml.pre: "llama-bpe", "qwen2", else GPT-2's), each piece's bytes mapped to
//     printable characters, then merged by rank.
// Special tokens (control and user-defined) are matched in the text only when asked
// (parse_special), longest first. The token ids are llama.cpp's for the same file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wick/io.h"

namespace wick::models {

// GGUF's token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class Tokenizer {
 public:
  enum class Kind { Spm, Bpe };

  // The tokenizer of a GGUF file (tokenizer.ggml.model "llama" or "gpt2"); a FormatError naming the
  // file and the key for a missing or broken entry, NotSupportedError for another model.
  static Tokenizer from_gguf(const io::GgufFile& file);
  // The tokenizer of a Hugging Face tokenizer.json (`path` is the file or its directory): a "BPE"
  // model, byte-level (a ByteLevel pre-tokenizer, after the Split pattern it names) or
  // SentencePiece-style (byte_fallback, U+2581 for spaces), with its added tokens (special ones
  // as control tokens). BOS and EOS come from tokenizer_config.json beside it, else from the
  // post-processor's template; generation_config.json's eos_token_id also ends generation. The
  // same ids as from_gguf on a GGUF file converted from it. FormatError naming the file and the
  // key for a broken entry, NotSupportedError for another model or pre-tokenizer step.
  static Tokenizer from_json(const std::string& path);
  // from_json for a directory or a .json file, from_gguf otherwise.
  static Tokenizer open(const std::string& path);

  // The ids of `text`, which must be valid UTF-8 (an Error naming the byte offset otherwise).
  // add_special: the BOS token first (and EOS last) where the vocabulary asks for them. The text of
  // a user-defined token always becomes that token; the text of a control token (BOS, EOS,
  // <|eot_id|>, ...) does only with parse_special, and is tokenized as text otherwise. A character
  // the vocabulary cannot spell (no token, no byte tokens, no unknown token) is an Error naming it
  // and its byte offset; no character is ever dropped.
  std::vector<int32_t> encode(std::string_view text, bool add_special = true, bool parse_special = false) const;
  // The UTF-8 text of `ids`: control tokens (BOS, EOS, ...) are left out unless `special`. An id
  // outside the vocabulary is an IndexError. `continuation`: the ids follow earlier text (a
  // prompt), so that the first keeps its leading space (as TextStream's).
  std::string decode(std::span<const int32_t> ids, bool special = false, bool continuation = false) const;
  // The bytes one token stands for (possibly part of a UTF-8 character), as decode gives them
  // token by token; `first` removes the leading space that the SentencePiece style adds.
  std::string piece(int32_t id, bool special = false, bool first = false) const;

  Kind kind() const;
  int32_t size() const;  // tokens in the vocabulary
  const std::string& token(int32_t id) const;  // the vocabulary's text of a token
  TokenType type(int32_t id) const;
  int32_t bos() const;  // -1 where there is none
  int32_t eos() const;
  // Whether generation ends at `id`: EOS, end-of-turn tokens and the others the vocabulary marks.
  bool is_end(int32_t id) const;

 private:
  struct Vocab;
  explicit Tokenizer(std::shared_ptr<const Vocab> vocab) : v_(std::move(vocab)) {}
  std::shared_ptr<const Vocab> v_;
};

// Turns a stream of token ids into text, holding back the bytes of a UTF-8 character until its
// last byte arrives, so that every piece it returns is whole UTF-8.
class TextStream {
 public:
  // continuation: the ids follow text already written (a prompt), so that the first keeps the
  // space a SentencePiece vocabulary's word-start mark stands for.
  explicit TextStream(const Tokenizer& tokenizer, bool special = false, bool continuation = false)
      : tok_(&tokenizer), special_(special), first_(!continuation) {}
  // The text that `id` completes (often its own piece; empty while a character is unfinished).
  std::string push(int32_t id);
  // What is still held (an unfinished character's bytes, each as U+FFFD), and a fresh start.
  std::string finish();

 private:
  const Tokenizer* tok_;
  bool special_;
  bool first_;
  std::string held_;
};

}  // namespace wick::models
