// Chat templates rendered with minja (include/wick/models/chat_template.h). The context is the one
// transformers' apply_chat_template gives jinja2, nothing more: no polyfills (a template that
// refuses a system message refuses it here too), so that the text is the model's own format.
#include "wick/models/chat_template.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <minja/minja.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json.h"
#include "model_source.h"
#include "wick/error.h"

namespace wick::models {

using OrderedJson = nlohmann::ordered_json;

struct ChatTemplate::Impl {
  std::string source, bos, eos, origin;
  std::shared_ptr<minja::TemplateNode> root;
};

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token, std::string origin) {
  auto impl = std::make_shared<Impl>();
  impl->source = std::move(source);
  impl->bos = std::move(bos_token);
  impl->eos = std::move(eos_token);
  impl->origin = std::move(origin);
  try {
    // transformers: jinja2's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).
    impl->root = minja::Parser::parse(impl->source, {/*trim_blocks=*/true, /*lstrip_blocks=*/true,
                                                     /*keep_trailing_newline=*/false});
  } catch (const std::exception& e) {
    throw io::FormatError(detail::str_cat(impl->origin, ": the template does not parse: ", e.what()));
  }
  impl_ = std::move(impl);
}

const std::string& ChatTemplate::source() const { return impl_->source; }
const std::string& ChatTemplate::origin() const { return impl_->origin; }

namespace {

std::string render_with(const ChatTemplate& t, const std::string& bos, const std::string& eos,
                        const minja::TemplateNode& root, OrderedJson messages, bool add_generation_prompt) {
  auto context = minja::Context::make(minja::Value(OrderedJson{
      {"messages", std::move(messages)},
      {"add_generation_prompt", add_generation_prompt},
      {"bos_token", bos},
      {"eos_token", eos},
  }));
  // transformers' strftime_now: the local time now, formatted as Python's strftime does.
  const auto now = std::chrono::system_clock::now();
  context->set("strftime_now",
               minja::Value::callable([now](const std::shared_ptr<minja::Context>&, minja::ArgumentsValue& args) {
                 args.expectArgs("strftime_now", {1, 1}, {0, 0});
                 const std::time_t time = std::chrono::system_clock::to_time_t(now);
                 std::tm local{};
                 localtime_r(&time, &local);
                 std::ostringstream out;
                 out << std::put_time(&local, args.args[0].get<std::string>().c_str());
                 return minja::Value(out.str());
               }));
  // jinja2's `defined` and `undefined` tests by name, as selectattr and rejectattr take them
  // (Mistral Nemo's `selectattr("tool_calls", "undefined")`): minja looks a named test up among the
  // globals, which have `equalto` but not these two. As minja's `is defined` does, an absent member
  // reads as none.
  for (const bool defined : {true, false}) {
    const char* name = defined ? "defined" : "undefined";
    context->set(name, minja::Value::callable(
                           [name, defined](const std::shared_ptr<minja::Context>&, minja::ArgumentsValue& args) {
                             args.expectArgs(name, {1, 1}, {0, 0});
                             return minja::Value(args.args[0].is_null() != defined);
                           }));
  }
  try {
    return root.render(context);
  } catch (const std::exception& e) {
    throw Error(detail::str_cat(t.origin(), ": ", e.what()));
  }
}

}  // namespace

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  OrderedJson list = OrderedJson::array();
  for (const ChatMessage& m : messages) list.push_back(OrderedJson{{"role", m.role}, {"content", m.content}});
  return render_with(*this, impl_->bos, impl_->eos, *impl_->root, std::move(list), add_generation_prompt);
}

std::string ChatTemplate::render_json(std::string_view messages, bool add_generation_prompt) const {
  OrderedJson list;
  try {
    list = OrderedJson::parse(messages, [](int depth, OrderedJson::parse_event_t, OrderedJson&) {
      if (depth > kMaxJsonDepth) throw io::FormatError(detail::str_cat("nests deeper than ", kMaxJsonDepth));
      return true;
    });
  } catch (const std::exception& e) {
    throw io::FormatError(detail::str_cat(impl_->origin, ": messages: not JSON: ", e.what()));
  }
  if (!list.is_array()) throw io::FormatError(detail::str_cat(impl_->origin, ": messages: not a JSON array"));
  for (const OrderedJson& m : list) {
    if (!m.is_object()) throw io::FormatError(detail::str_cat(impl_->origin, ": messages: an entry is not an object"));
  }
  return render_with(*this, impl_->bos, impl_->eos, *impl_->root, std::move(list), add_generation_prompt);
}

std::string chat_template_source(const ModelFile& file) {
  const ModelFile::Source& s = file.source();
  if (s.gguf) {
    const io::GgufValue* v = s.gguf->find("tokenizer.chat_template");
    return v == nullptr ? std::string() : v->as_string(detail::str_cat(s.path, ": tokenizer.chat_template"));
  }
  const std::filesystem::path config = std::filesystem::path(s.path) / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(config, ec)) return {};
  const nlohmann::json j = read_json_file(config.string(), "chat template");
  const auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return {};
  const std::string where = detail::str_cat(config.string(), ": chat_template");
  if (it->is_string()) return it->get<std::string>();
  // A list of named templates ("default", "tool_use", ...): the default one.
  if (it->is_array()) {
    for (const nlohmann::json& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    }
    throw io::FormatError(detail::str_cat(where, ": a list without an entry named \"default\""));
  }
  throw io::FormatError(detail::str_cat(where, ": neither a string nor a list of named templates"));
}

std::optional<ChatTemplate> ChatTemplate::of(const ModelFile& file) {
  std::string source = chat_template_source(file);
  if (source.empty()) return std::nullopt;
  const std::string field = file.source().gguf ? "tokenizer.chat_template" : "tokenizer_config.json: chat_template";
  return with_tokenizer(std::move(source), file.has_tokenizer() ? &file.tokenizer() : nullptr,
                        detail::str_cat(file.path(), ": ", field));
}

ChatTemplate ChatTemplate::with_tokenizer(std::string source, const Tokenizer* tokenizer, std::string origin) {
  std::string bos, eos;
  if (tokenizer != nullptr) {
    if (tokenizer->bos() >= 0) bos = tokenizer->token(tokenizer->bos());
    if (tokenizer->eos() >= 0) eos = tokenizer->token(tokenizer->eos());
  }
  return ChatTemplate(std::move(source), std::move(bos), std::move(eos), std::move(origin));
}

}  // namespace wick::models
