// The tokenizers of include/wick/models/tokenizer.h. Both merge adjacent symbols through a priority
// queue over a linked list of symbols, so that a long word costs n log n, not n^2: the
// SentencePiece style merges the pair whose merged text has the highest score, byte-level BPE the
// pair of lowest merge rank; ties go to the leftmost pair.
#include "wick/models/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <queue>
#include <unordered_map>

#include "json.h"

namespace wick::models {

namespace {

[[noreturn]] void fail(const io::GgufFile& f, std::string_view key, std::string_view what) {
  throw io::FormatError(detail::str_cat("tokenizer: ", f.name(), ": ", key, ": ", what));
}

// A key as GgufValue's accessors name it in their errors: with the file.
std::string in_file(const io::GgufFile& f, std::string_view key) { return detail::str_cat(f.name(), ": ", key); }

// The length of the UTF-8 character at s[i] (1 to 4), or 0 where the bytes there are not one.
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const size_t n = b < 0x80 ? 1 : (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? b : b & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (c & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return 0;
  return n;
}

void check_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_length(s, i);
    if (n == 0) throw Error(detail::str_cat("tokenizer: encode: the text is not valid UTF-8 at byte ", i));
    i += n;
  }
}

// The byte a SentencePiece byte token stands for: "<0x0A>" is 0x0a. Other text (a token that a
// file calls a byte token but spells otherwise) is none.
std::optional<char> byte_token(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text.back() != '>') return std::nullopt;
  auto digit = [](char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  const int hi = digit(text[3]), lo = digit(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<char>(hi << 4 | lo);
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | cp >> 6);
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | cp >> 12);
    s += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

// Byte-level BPE's printable stand-ins for the 256 bytes: the printable Latin-1 bytes stand for
// themselves, the others for U+0100 onwards in byte order.
struct ByteMap {
  std::array<std::string, 256> text;
  std::unordered_map<std::string, uint8_t> byte;
  ByteMap() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      text[b] = utf8(printable ? b : next++);
      byte.emplace(text[b], static_cast<uint8_t>(b));
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// The pre-tokenizer patterns (tokenizer.json's Split regexes of each model family).
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The texts of end-of-turn tokens across chat formats, and of the fill-in-the-middle roles (the
// first text of each role that a vocabulary holds is that role's token); llama.cpp's lists.
constexpr std::string_view kEndTexts[] = {
    "<|eot_id|>", "<|eom_id|>",         "<|im_end|>", "<|end|>",  "<|return|>", "<|call|>",         "<end_of_turn>",
    "<turn|>",    "<|endoftext|>",      "<EOT>",      "_<EOT>",   "</s>",       "<|end_of_text|>",  "<end_of_utterance>",
    "<｜end▁of▁sentence｜>"};
struct FimRole {
  std::string_view texts[6];
  bool ends;  // pad, repo and separator tokens end generation
};
constexpr FimRole kFimRoles[] = {
    {{"<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<fim_prefix>", "<PRE>", "▁<PRE>"}, false},
    {{"<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<fim_suffix>", "<SUF>", "▁<SUF>"}, false},
    {{"<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<fim_middle>", "<MID>", "▁<MID>"}, false},
    {{"<|fim_pad|>", "<fim-pad>", "<PAD>"}, true},
    {{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"}, true},
    {{"<|file_sep|>", "<|fim_sep|>", "<fim-separator>", "<FILE_SEP>"}, true},
};

struct Regex {
  pcre2_code* code = nullptr;
  explicit Regex(std::string_view pattern) {
    int error = 0;
    PCRE2_SIZE at = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error, &at, nullptr);
    if (code == nullptr) throw Error(detail::str_cat("tokenizer: the pre-tokenizer pattern does not compile at ", at));
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // where PCRE2 has a JIT; the interpreter otherwise
  }
  ~Regex() { pcre2_code_free(code); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // The pieces of `s` (valid UTF-8): each match, and any text between matches as a piece too.
  std::vector<std::string_view> split(std::string_view s) const {
    std::vector<std::string_view> out;
    const std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
        pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free);
    if (md == nullptr) throw OutOfMemoryError("tokenizer: cannot allocate PCRE2 match data");
    size_t at = 0;
    while (at < s.size()) {
      const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at, PCRE2_NO_UTF_CHECK,
                                 md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        // PCRE2's match limit (a pattern that backtracks without end) or another failure: the text
        // cannot be split as the file asks.
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        throw Error(detail::str_cat("tokenizer: encode: the pre-tokenizer pattern failed at byte ", at, ": ",
                                    reinterpret_cast<const char*>(message)));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      size_t begin = ov[0], end = ov[1];
      if (begin > at) out.push_back(s.substr(at, begin - at));
      if (end == begin) end = begin + std::max<size_t>(1, utf8_length(s, begin));  // never stall on an empty match
      out.push_back(s.substr(begin, end - begin));
      at = end;
    }
    if (at < s.size()) out.push_back(s.substr(at));
    return out;
  }
};

// A symbol of the word being merged: a range of its text, linked to its neighbours.
struct Symbol {
  int prev, next;
  size_t at, n;
};

// A candidate merge of symbols left and right (adjacent when queued); `size` detects a stale entry.
struct Pair {
  int left, right;
  double priority;  // higher first
  size_t size;
  bool operator<(const Pair& o) const { return priority != o.priority ? priority < o.priority : left > o.left; }
};

// Merges the characters of `text` pairwise while `rank(left, right)` (higher first) finds a pair to
// merge; returns the final symbols' texts.
template <typename Rank>
std::vector<std::string_view> merge(std::string_view text, Rank&& rank) {
  std::vector<Symbol> sym;
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::max<size_t>(1, utf8_length(text, i));
    sym.push_back({static_cast<int>(sym.size()) - 1, static_cast<int>(sym.size()) + 1, i, std::min(n, text.size() - i)});
    i += sym.back().n;
  }
  if (!sym.empty()) sym.back().next = -1;
  std::priority_queue<Pair> queue;
  auto consider = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    if (const std::optional<double> p = rank(text.substr(sym[l].at, sym[l].n), text.substr(sym[r].at, sym[r].n)))
      queue.push({l, r, *p, sym[l].n + sym[r].n});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol &l = sym[p.left], &r = sym[p.right];
    if (l.n == 0 || r.n == 0 || l.next != p.right || l.n + r.n != p.size) continue;  // stale
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }
  std::vector<std::string_view> out;
  for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out.push_back(text.substr(sym[i].at, sym[i].n));
  return out;
}

}  // namespace

struct Tokenizer::Vocab {
  Kind kind = Kind::Spm;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> types;
  std::unordered_map<std::string, int32_t> ids;
  std::unordered_map<std::string, int32_t> merge_rank;  // "left right" -> rank
  std::vector<int32_t> specials;                        // control and user-defined tokens, longest text first
  std::vector<int32_t> ends;
  int32_t bos = -1, eos = -1, unk = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = true, ignore_merges = false;
  std::unique_ptr<Regex> regex;

  int32_t find(std::string_view text) const {
    const auto it = ids.find(std::string(text));
    return it == ids.end() ? -1 : it->second;
  }
  void check(int32_t id) const {
    if (id < 0 || id >= static_cast<int32_t>(tokens.size()))
      throw IndexError(detail::str_cat("tokenizer: token id ", id, " is outside the vocabulary of ", tokens.size()));
  }

  // What both readers do last: the end-of-generation tokens (end_ids, where >= 0, and those of
  // kEndTexts), the chat and fill-in-the-middle tokens made control tokens, and the special tokens
  // listed longest first.
  void finish(const std::vector<int32_t>& end_ids) {
    for (int32_t id : end_ids)
      if (id >= 0 && std::find(ends.begin(), ends.end(), id) == ends.end()) ends.push_back(id);
    // Tokens of the chat and fill-in-the-middle formats that files often leave typed as text: as
    // llama.cpp does, they are control tokens (matched in text only with parse_special), and the
    // end-of-turn ones end generation.
    auto make_control = [&](int32_t id, bool end) {
      types[static_cast<size_t>(id)] = TokenType::Control;
      if (end && std::find(ends.begin(), ends.end(), id) == ends.end()) ends.push_back(id);
    };
    for (std::string_view text : kEndTexts)
      if (const int32_t id = find(text); id >= 0) make_control(id, true);
    for (const FimRole& role : kFimRoles) {
      for (std::string_view text : role.texts) {
        if (text.empty()) break;
        if (const int32_t id = find(text); id >= 0) {
          make_control(id, role.ends);
          break;  // the first of the role's texts that the vocabulary holds
        }
      }
    }
    for (int32_t i = 0; i < static_cast<int32_t>(tokens.size()); ++i) {
      const TokenType t = types[static_cast<size_t>(i)];
      if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) && !tokens[static_cast<size_t>(i)].empty())
        specials.push_back(i);
    }
    std::stable_sort(specials.begin(), specials.end(), [&](int32_t a, int32_t b) {
      return tokens[static_cast<size_t>(a)].size() > tokens[static_cast<size_t>(b)].size();
    });
  }

  void encode_spm(std::string_view fragment, bool space_first, std::vector<int32_t>& out) const {
    std::string text = space_first && add_space_prefix ? std::string(kSpace) : std::string();
    for (char c : fragment) {
      if (c == ' ')
        text += kSpace;
      else
        text += c;
    }
    // The pieces are adjacent in `text`, so their concatenation is the range they span.
    const auto pieces = merge(text, [&](std::string_view l, std::string_view r) -> std::optional<double> {
      const int32_t id = find(std::string_view(l.data(), l.size() + r.size()));
      return id < 0 ? std::nullopt : std::optional<double>(scores[id]);
    });
    for (std::string_view p : pieces) {
      if (const int32_t id = find(p); id >= 0) {
        out.push_back(id);
        continue;
      }
      for (unsigned char b : p) {  // byte fallback
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        const int32_t id = find(name);
        if (id >= 0)
          out.push_back(id);
        else if (unk >= 0)
          out.push_back(unk);
        else
          throw Error(detail::str_cat("tokenizer: encode: byte ", int{b}, " has no token and the vocabulary has no unknown token"));
      }
    }
  }

  // `at`: the fragment's offset in the text, for messages.
  // A byte-level vocabulary without the byte's symbol nor an unknown token cannot spell the text:
  // an Error naming the character of `word` (at `at` in the text) whose symbol begins at byte
  // `symbol` of `mapped` (word's bytes as symbols, one each), never a character dropped.
  [[noreturn]] static void no_token(std::string_view word, std::string_view mapped, size_t symbol, size_t at) {
    size_t k = 0;  // the byte of word that the symbol stands for
    for (size_t i = 0; i < symbol && i < mapped.size(); i += std::max<size_t>(1, utf8_length(mapped, i))) ++k;
    size_t start = k;  // the character holding that byte
    while (start > 0 && (static_cast<unsigned char>(word[start]) & 0xC0) == 0x80) --start;
    const size_t n = std::max<size_t>(1, utf8_length(word, start));
    throw Error(detail::str_cat("tokenizer: encode: \"", word.substr(start, n), "\" at byte ", at + start,
                                " has no token (the vocabulary has neither its bytes' tokens nor an unknown token)"));
  }

  void encode_bpe(std::string_view fragment, size_t at, std::vector<int32_t>& out) const {
    const ByteMap& bytes = byte_map();
    for (std::string_view word : regex->split(fragment)) {
      std::string mapped;
      for (unsigned char b : word) mapped += bytes.text[b];
      if (ignore_merges) {
        if (const int32_t id = find(mapped); id >= 0) {
          out.push_back(id);
          continue;
        }
      }
      std::string key;
      const auto merged = merge(mapped, [&](std::string_view l, std::string_view r) -> std::optional<double> {
        key.assign(l).append(" ").append(r);
        const auto it = merge_rank.find(key);
        return it == merge_rank.end() ? std::nullopt : std::optional<double>(-static_cast<double>(it->second));
      });
      for (std::string_view p : merged) {
        if (const int32_t id = find(p); id >= 0) {
          out.push_back(id);
          continue;
        }
        for (size_t i = 0; i < p.size();) {  // a symbol outside the vocabulary: its characters
          const size_t n = std::max<size_t>(1, utf8_length(p, i));
          const int32_t id = find(p.substr(i, n));
          if (id >= 0)
            out.push_back(id);
          else if (unk >= 0)
            out.push_back(unk);
          else
            no_token(word, mapped, static_cast<size_t>(p.data() - mapped.data()) + i,
                     at + static_cast<size_t>(word.data() - fragment.data()));
          i += n;
        }
      }
    }
  }
};

namespace {

// Reads an array of the tokenizer's metadata, each item through `item`; a FormatError where it is
// missing (and `required`), not an array, or not `count` long (count < 0: any length).
template <typename F>
void read_array(const io::GgufFile& f, std::string_view key, int64_t count, bool required, F&& item) {
  const io::GgufValue* v = f.find(key);
  if (v == nullptr) {
    if (required) fail(f, key, "missing");
    return;
  }
  if (v->type != io::GgufType::Array) fail(f, key, "not an array");
  const io::GgufArray& a = v->as_array(in_file(f, key));
  if (count >= 0 && static_cast<int64_t>(a.items.size()) != count)
    fail(f, key, detail::str_cat(a.items.size(), " items for ", count, " tokens"));
  for (size_t i = 0; i < a.items.size(); ++i) item(i, a.items[i]);
}

bool find_bool(const io::GgufFile& f, std::string_view key, bool fallback) {
  const io::GgufValue* v = f.find(key);
  return v == nullptr ? fallback : v->as_bool(in_file(f, key));
}

// The id under `key`, -1 where the file has none; a FormatError where it is not a token.
int32_t find_id(const io::GgufFile& f, std::string_view key, int64_t tokens) {
  const io::GgufValue* v = f.find(key);
  if (v == nullptr) return -1;
  const int64_t id = v->as_int(in_file(f, key));
  if (id < 0 || id >= tokens) fail(f, key, detail::str_cat("token ", id, " is outside the vocabulary of ", tokens));
  return static_cast<int32_t>(id);
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const io::GgufFile& f) {
  auto v = std::make_shared<Vocab>();
  const io::GgufValue* model = f.find("tokenizer.ggml.model");
  if (model == nullptr) fail(f, "tokenizer.ggml.model", "missing");
  const std::string& name = model->as_string(in_file(f, "tokenizer.ggml.model"));
  if (name == "llama") {
    v->kind = Kind::Spm;
  } else if (name == "gpt2") {
    v->kind = Kind::Bpe;
    v->add_space_prefix = false;
  } else {
    throw NotSupportedError(detail::str_cat("tokenizer: ", f.name(), ": tokenizer.ggml.model \"", name,
                                            "\" (wick reads \"llama\" and \"gpt2\")"));
  }

  const std::string tokens_key = in_file(f, "tokenizer.ggml.tokens");
  read_array(f, "tokenizer.ggml.tokens", -1, true,
             [&](size_t, const io::GgufValue& t) { v->tokens.push_back(t.as_string(tokens_key)); });
  const auto n = static_cast<int64_t>(v->tokens.size());
  if (n == 0 || n > (int64_t{1} << 31) - 1) fail(f, "tokenizer.ggml.tokens", detail::str_cat(n, " tokens"));
  v->scores.assign(static_cast<size_t>(n), 0.f);
  v->types.assign(static_cast<size_t>(n), TokenType::Normal);
  const std::string scores_key = in_file(f, "tokenizer.ggml.scores"),
                    types_key = in_file(f, "tokenizer.ggml.token_type");
  read_array(f, "tokenizer.ggml.scores", n, false,
             [&](size_t i, const io::GgufValue& s) { v->scores[i] = static_cast<float>(s.as_float(scores_key)); });
  read_array(f, "tokenizer.ggml.token_type", n, false, [&](size_t i, const io::GgufValue& t) {
    const int64_t type = t.as_int(types_key);
    if (type < 0 || type > 6) fail(f, "tokenizer.ggml.token_type", detail::str_cat("type ", type, " of token ", i));
    v->types[i] = static_cast<TokenType>(type);
  });
  for (int32_t i = 0; i < n; ++i) v->ids[v->tokens[static_cast<size_t>(i)]] = i;  // a repeated text: the last id
  if (v->kind == Kind::Bpe) {
    int32_t rank = 0;
    const std::string merges_key = in_file(f, "tokenizer.ggml.merges");
    read_array(f, "tokenizer.ggml.merges", -1, true,
               [&](size_t, const io::GgufValue& m) { v->merge_rank.emplace(m.as_string(merges_key), rank++); });
    const io::GgufValue* pre = f.find("tokenizer.ggml.pre");
    const std::string pre_name = pre == nullptr ? "default" : pre->as_string(in_file(f, "tokenizer.ggml.pre"));
    std::string_view pattern;
    if (pre_name == "llama-bpe" || pre_name == "llama3") {
      pattern = kLlama3Pattern;
      v->ignore_merges = true;
    } else if (pre_name == "qwen2") {
      pattern = kQwen2Pattern;
    } else if (pre_name == "default" || pre_name == "gpt2") {
      pattern = kGpt2Pattern;
    } else {
      throw NotSupportedError(detail::str_cat("tokenizer: ", f.name(), ": tokenizer.ggml.pre \"", pre_name,
                                              "\" (wick knows \"llama-bpe\", \"qwen2\" and \"gpt2\")"));
    }
    v->regex = std::make_unique<Regex>(pattern);
  }
  v->bos = find_id(f, "tokenizer.ggml.bos_token_id", n);
  v->eos = find_id(f, "tokenizer.ggml.eos_token_id", n);
  v->unk = find_id(f, "tokenizer.ggml.unknown_token_id", n);
  v->add_bos = find_bool(f, "tokenizer.ggml.add_bos_token", true) && v->bos >= 0;
  v->add_eos = find_bool(f, "tokenizer.ggml.add_eos_token", false) && v->eos >= 0;
  v->add_space_prefix = find_bool(f, "tokenizer.ggml.add_space_prefix", v->add_space_prefix);

  v->finish({v->eos, find_id(f, "tokenizer.ggml.eot_token_id", n), find_id(f, "tokenizer.ggml.eom_token_id", n)});
  return Tokenizer(std::move(v));
}

namespace {

using Json = nlohmann::json;

Json read_json(const std::string& path) { return read_json_file(path, "tokenizer"); }

[[noreturn]] void json_fail(std::string_view file, std::string_view key, std::string_view what) {
  throw io::FormatError(detail::str_cat("tokenizer: ", file, ": ", key, ": ", what));
}

// A member of a tokenizer.json object read as the type the reader wants: `fallback` where it is
// absent or null, an error naming the file and the key where it has another type or `in` is not an
// object (nlohmann's own accessors would throw its type_error, which no caller expects).
const Json* member(std::string_view file, const Json& in, const char* key) {
  if (!in.is_object()) json_fail(file, key, detail::str_cat("in ", in.dump(), ", which is not an object"));
  const auto it = in.find(key);
  return it == in.end() || it->is_null() ? nullptr : &*it;
}

std::string member_text(std::string_view file, const Json& in, const char* key, std::string_view fallback) {
  const Json* v = member(file, in, key);
  if (v == nullptr) return std::string(fallback);
  if (!v->is_string()) json_fail(file, key, detail::str_cat(v->dump(), " is not a string"));
  return v->get<std::string>();
}

bool member_flag(std::string_view file, const Json& in, const char* key, bool fallback) {
  const Json* v = member(file, in, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) json_fail(file, key, detail::str_cat(v->dump(), " is not true or false"));
  return v->get<bool>();
}

// The steps of a tokenizer.json pipeline stage ("Sequence" of steps, one step, or null).
std::vector<const Json*> steps(std::string_view file, const Json& j, const char* stage) {
  std::vector<const Json*> out;
  const auto it = j.find(stage);
  if (it == j.end() || !it->is_object()) return out;
  const auto seq = it->find(it->find("pretokenizers") != it->end() ? "pretokenizers" : "normalizers");
  if (member_text(file, *it, "type", "") == "Sequence" && seq != it->end() && seq->is_array()) {
    for (const Json& step : *seq) out.push_back(&step);
  } else {
    out.push_back(&*it);
  }
  return out;
}

// A token's text in tokenizer_config.json: "<s>", or {"content": "<s>", ...}.
std::string token_text(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return {};
}

}  // namespace

Tokenizer Tokenizer::from_json(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;  // paths that cannot be looked at are no directories and no files
  const fs::path file = fs::is_directory(path, ec) ? fs::path(path) / "tokenizer.json" : fs::path(path);
  const fs::path dir = file.parent_path();
  const std::string name = file.string();
  const Json j = read_json(name);
  auto fail = [&](std::string_view key, std::string_view what) { json_fail(name, key, what); };
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) fail("model", "missing");
  const Json& model = j["model"];
  auto text_at = [&](const Json& in, const char* key, std::string_view fallback) {
    return member_text(name, in, key, fallback);
  };
  auto flag_at = [&](const Json& in, const char* key, bool fallback) { return member_flag(name, in, key, fallback); };
  if (const std::string type = text_at(model, "type", "BPE"); type != "BPE")
    throw NotSupportedError(detail::str_cat("tokenizer: ", name, ": model type \"", type, "\" (wick reads \"BPE\")"));
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail("model.vocab", "missing");

  auto v = std::make_shared<Vocab>();
  // Byte-level BPE maps bytes to printable characters before the merges; the SentencePiece style
  // (byte_fallback, U+2581 for spaces) does not.
  bool byte_level = false, metaspace = false;
  const Json* split = nullptr;
  for (const Json* step : steps(name, j, "pre_tokenizer")) {
    const std::string type = text_at(*step, "type", "");
    if (type == "ByteLevel") {
      byte_level = true;
      if (flag_at(*step, "add_prefix_space", false))
        fail("pre_tokenizer", "ByteLevel add_prefix_space (not supported)");
      if (split == nullptr && flag_at(*step, "use_regex", true)) split = step;
    } else if (type == "Split") {
      split = step;
    } else if (type == "Metaspace") {
      metaspace = true;
      v->add_space_prefix =
          text_at(*step, "prepend_scheme", "always") != "never" && flag_at(*step, "add_prefix_space", true);
    } else {
      throw NotSupportedError(detail::str_cat("tokenizer: ", name, ": pre_tokenizer step \"", type, "\""));
    }
  }
  v->kind = byte_level ? Kind::Bpe : Kind::Spm;
  if (!byte_level) {
    // Without a Metaspace step, a space goes before the text only where the normalizer prepends one
    // (Llama 2's does, Gemma's does not).
    if (!metaspace) v->add_space_prefix = false;
    for (const Json* step : steps(name, j, "normalizer"))
      if (text_at(*step, "type", "") == "Prepend") v->add_space_prefix = true;
  } else {
    v->add_space_prefix = false;
    std::string pattern(kGpt2Pattern);
    if (split != nullptr && text_at(*split, "type", "") == "Split") {
      const auto p = split->find("pattern");
      if (p == split->end() || !p->is_object() || !p->contains("Regex") || !(*p)["Regex"].is_string())
        fail("pre_tokenizer", "a Split step without a Regex pattern");
      pattern = (*p)["Regex"].get<std::string>();
    }
    v->regex = std::make_unique<Regex>(pattern);
    v->ignore_merges = flag_at(model, "ignore_merges", false);
  }

  int64_t n = 0;
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31) - 1)
      fail("model.vocab", detail::str_cat("\"", text, "\" has id ", id.dump()));
    n = std::max(n, id.get<int64_t>() + 1);
  }
  const Json empty = Json::array();
  const Json& added = j.contains("added_tokens") && j["added_tokens"].is_array() ? j["added_tokens"] : empty;
  for (const Json& t : added) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") || !t["content"].is_string())
      fail("added_tokens", detail::str_cat(t.dump(), " is not {id, content}"));
    if (t["id"].get<int64_t>() < 0 || t["id"].get<int64_t>() >= (int64_t{1} << 31) - 1) fail("added_tokens", t.dump());
    n = std::max(n, t["id"].get<int64_t>() + 1);
  }
  if (n == 0) fail("model.vocab", "empty");
  // Ids that no entry takes become [PAD<id>] tokens, as llama.cpp's converter makes them. A few are
  // usual; a vocabulary mostly of holes is not one (an id of 2^31 - 2 in a file of a few bytes
  // would make 2^31 tokens).
  const auto entries = static_cast<int64_t>(model["vocab"].size() + added.size());
  if (n > 2 * entries + 1024)
    fail("model.vocab", detail::str_cat("ids up to ", n - 1, " for ", entries, " entries (more holes than tokens)"));
  v->tokens.resize(static_cast<size_t>(n));
  v->types.assign(static_cast<size_t>(n), TokenType::Unused);
  v->scores.assign(static_cast<size_t>(n), 0.f);
  for (int64_t i = 0; i < n; ++i) v->tokens[static_cast<size_t>(i)] = detail::str_cat("[PAD", i, "]");
  for (const auto& [text, id] : model["vocab"].items()) {
    const auto i = static_cast<size_t>(id.get<int64_t>());
    v->tokens[i] = text;
    const bool byte = !byte_level && byte_token(text).has_value();
    v->types[i] = byte ? TokenType::Byte : TokenType::Normal;
  }
  for (const Json& t : added) {
    const auto i = static_cast<size_t>(t["id"].get<int64_t>());
    v->tokens[i] = t["content"].get<std::string>();
    v->types[i] = flag_at(t, "special", false) ? TokenType::Control : TokenType::UserDefined;
  }
  for (int32_t i = 0; i < static_cast<int32_t>(n); ++i) v->ids[v->tokens[static_cast<size_t>(i)]] = i;
  if (const auto unk = model.find("unk_token"); unk != model.end() && unk->is_string()) {
    v->unk = v->find(unk->get<std::string>());
    if (v->unk >= 0) v->types[static_cast<size_t>(v->unk)] = TokenType::Unknown;
  }

  // Merges: "left right" strings, or [left, right] pairs (newer files). The SentencePiece style
  // merges by score: a token's score is minus the rank of the merge that makes it.
  int32_t rank = 0;
  if (const auto merges = model.find("merges"); merges != model.end() && merges->is_array()) {
    for (const Json& m : *merges) {
      std::string left, right;
      if (m.is_string()) {
        const std::string text = m.get<std::string>();
        const size_t space = text.find(' ', 1);
        if (space == std::string::npos) fail("model.merges", detail::str_cat("\"", text, "\" is not two symbols"));
        left = text.substr(0, space), right = text.substr(space + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        left = m[0].get<std::string>(), right = m[1].get<std::string>();
      } else {
        fail("model.merges", detail::str_cat(m.dump(), " is not a merge"));
      }
      if (byte_level) {
        v->merge_rank.emplace(left + " " + right, rank);
      } else if (const int32_t id = v->find(left + right); id >= 0 && v->scores[static_cast<size_t>(id)] == 0.f) {
        v->scores[static_cast<size_t>(id)] = -static_cast<float>(rank) - 1.f;
      }
      ++rank;
    }
  }

  // BOS and EOS as tokenizer_config.json names them, else as the post-processor's template adds
  // them; generation also ends at generation_config.json's eos_token_id.
  const Json config = fs::exists(dir / "tokenizer_config.json", ec)
                          ? read_json((dir / "tokenizer_config.json").string())
                          : Json::object();
  std::optional<bool> add_bos, add_eos;
  if (config.is_object()) {
    if (config.contains("bos_token")) v->bos = v->find(token_text(config["bos_token"]));
    if (config.contains("eos_token")) v->eos = v->find(token_text(config["eos_token"]));
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) add_bos = config["add_bos_token"].get<bool>();
    if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) add_eos = config["add_eos_token"].get<bool>();
  }
  if (const auto post = j.find("post_processor"); post != j.end() && post->is_object() && post->contains("single") &&
                                                  (*post)["single"].is_array() && !(*post)["single"].empty()) {
    const Json& single = (*post)["single"];
    auto special = [&](const Json& item) -> int32_t {
      return item.contains("SpecialToken") ? v->find(text_at(item["SpecialToken"], "id", "")) : -1;
    };
    const int32_t first = special(single.front()), last = special(single.back());
    if (v->bos < 0) v->bos = first;
    if (!add_bos) add_bos = first >= 0;
    if (!add_eos) add_eos = last >= 0 && single.size() > 1;
  }
  v->add_bos = add_bos.value_or(v->bos >= 0) && v->bos >= 0;
  v->add_eos = add_eos.value_or(false) && v->eos >= 0;
  std::vector<int32_t> ends{v->eos};
  if (fs::exists(dir / "generation_config.json", ec)) {
    const Json gen = read_json((dir / "generation_config.json").string());
    if (gen.is_object() && gen.contains("eos_token_id")) {
      const Json& e = gen["eos_token_id"];
      for (const Json& id : e.is_array() ? e : Json::array({e}))
        if (id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < n) ends.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  v->finish(ends);
  return Tokenizer(std::move(v));
}

Tokenizer Tokenizer::open(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec) || path.ends_with(".json")) return from_json(path);
  return from_gguf(io::GgufFile::open(path));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  check_utf8(text);
  // The text split at special tokens: each fragment raw text (token -1) or one token.
  struct Fragment {
    std::string_view text;
    int32_t token;
  };
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({text, -1});
  for (int32_t id : v_->specials) {
    const TokenType t = v_->types[static_cast<size_t>(id)];
    if (!parse_special && t != TokenType::UserDefined) continue;
    const std::string& s = v_->tokens[static_cast<size_t>(id)];
    std::vector<Fragment> next;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t at = 0;
      for (size_t hit; (hit = f.text.find(s, at)) != std::string_view::npos; at = hit + s.size()) {
        if (hit > at) next.push_back({f.text.substr(at, hit - at), -1});
        next.push_back({{}, id});
      }
      if (at < f.text.size()) next.push_back({f.text.substr(at), -1});
    }
    frags = std::move(next);
  }

  std::vector<int32_t> out;
  if (add_special && v_->add_bos) out.push_back(v_->bos);
  bool after_special = true;  // SentencePiece style: a space before the text and after each special token
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else if (v_->kind == Kind::Spm) {
      v_->encode_spm(f.text, after_special, out);
      after_special = false;
    } else {
      v_->encode_bpe(f.text, static_cast<size_t>(f.text.data() - text.data()), out);
    }
  }
  if (add_special && v_->add_eos) out.push_back(v_->eos);
  return out;
}

std::string Tokenizer::piece(int32_t id, bool special, bool first) const {
  v_->check(id);
  const std::string& text = v_->tokens[static_cast<size_t>(id)];
  switch (v_->types[static_cast<size_t>(id)]) {
    case TokenType::Control: return special ? text : std::string();
    case TokenType::UserDefined: return text;
    case TokenType::Unknown: return v_->kind == Kind::Spm ? std::string("\xe2\x96\x85") : text;
    case TokenType::Byte:
      if (const std::optional<char> b = byte_token(text); v_->kind == Kind::Spm && b) return std::string(1, *b);
      break;
    default: break;
  }
  std::string out;
  if (v_->kind == Kind::Spm) {
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpace.size(), kSpace) == 0) {
        out += ' ';
        i += kSpace.size();
      } else {
        out += text[i++];
      }
    }
    if (first && v_->add_space_prefix && out.starts_with(' ')) out.erase(0, 1);
    return out;
  }
  const ByteMap& bytes = byte_map();
  for (size_t i = 0; i < text.size();) {
    const size_t n = std::max<size_t>(1, utf8_length(text, i));
    const auto it = bytes.byte.find(text.substr(i, n));
    if (it != bytes.byte.end())
      out += static_cast<char>(it->second);
    else
      out.append(text, i, n);
    i += n;
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool special, bool continuation) const {
  TextStream stream(*this, special, continuation);
  std::string out;
  for (int32_t id : ids) out += stream.push(id);
  return out + stream.finish();
}

Tokenizer::Kind Tokenizer::kind() const { return v_->kind; }
int32_t Tokenizer::size() const { return static_cast<int32_t>(v_->tokens.size()); }
const std::string& Tokenizer::token(int32_t id) const {
  v_->check(id);
  return v_->tokens[static_cast<size_t>(id)];
}
TokenType Tokenizer::type(int32_t id) const {
  v_->check(id);
  return v_->types[static_cast<size_t>(id)];
}
int32_t Tokenizer::bos() const { return v_->bos; }
int32_t Tokenizer::eos() const { return v_->eos; }
bool Tokenizer::is_end(int32_t id) const { return std::find(v_->ends.begin(), v_->ends.end(), id) != v_->ends.end(); }

// ---- streaming ----------------------------------------------------------------------------------

namespace {

constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD

// The bytes of s that form whole UTF-8 (an invalid byte as U+FFFD); an unfinished character at the
// end is left in `rest`.
std::string whole_utf8(std::string_view s, std::string& rest) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (const size_t n = utf8_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    // Not a character here: the start of one that the next bytes may finish, or an invalid byte.
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t want = (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 0;
    bool unfinished = want > 0 && i + want > s.size();
    for (size_t k = i + 1; unfinished && k < s.size(); ++k) unfinished = (static_cast<unsigned char>(s[k]) & 0xc0) == 0x80;
    if (unfinished) break;
    out += kReplacement;
    ++i;
  }
  rest.assign(s.substr(i));
  return out;
}

}  // namespace

std::string TextStream::push(int32_t id) {
  const bool control = tok_->type(id) == TokenType::Control;
  const std::string p = tok_->piece(id, special_, first_ && !control);
  if (!control) first_ = false;
  const std::string all = held_ + p;
  return whole_utf8(all, held_);
}

std::string TextStream::finish() {
  std::string out = held_.empty() ? std::string() : std::string(kReplacement);
  held_.clear();
  first_ = true;
  return out;
}

}  // namespace wick::models
