// Chat templates: the Jinja template a model ships (GGUF's tokenizer.chat_template, a checkpoint's
// tokenizer_config.json chat_template) turns a conversation into the prompt text the model was
// trained on. wick renders it with minja, written for exactly these templates, in the environment
// transformers' apply_chat_template gives jinja2 (trim_blocks, lstrip_blocks; messages,
// add_generation_prompt, bos_token, eos_token, raise_exception, strftime_now), so that the text is
// the same byte for byte (scripts/template-check compares the two on real templates).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "wick/models/model.h"

namespace wick::models {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ... as the template knows them
  std::string content;
};

class ChatTemplate {
 public:
  // Parses `source`. FormatError naming `origin` (where the template came from) and the parser's
  // message for one that does not parse.
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token, std::string origin = "chat template");
  // The template of a model's files with its tokenizer's BOS and EOS text; nullopt where the files
  // have none. FormatError as above for one that does not parse, naming the file and field.
  static std::optional<ChatTemplate> of(const ModelFile& file);
  // `source` with a tokenizer's BOS and EOS text ("" for those it lacks, or without a tokenizer).
  static ChatTemplate with_tokenizer(std::string source, const Tokenizer* tokenizer, std::string origin);

  // The prompt text of a conversation; add_generation_prompt ends it where the model's answer
  // begins. An Error naming the template's origin for a conversation the template refuses (its
  // raise_exception, e.g. roles that do not alternate) or cannot render.
  std::string render(std::span<const ChatMessage> messages, bool add_generation_prompt = true) const;
  // The same from a JSON array of message objects as the OpenAI API sends them (any members a
  // template reads: content as a string or a list of parts, name, ...). FormatError for text that
  // is not such an array.
  std::string render_json(std::string_view messages, bool add_generation_prompt = true) const;

  const std::string& source() const;
  const std::string& origin() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// The template text of a model's files ("" where there is none): GGUF tokenizer.chat_template, or
// tokenizer_config.json's chat_template in a checkpoint's directory (a string, or the entry named
// "default" of a list of {name, template}).
std::string chat_template_source(const ModelFile& file);

}  // namespace wick::models
