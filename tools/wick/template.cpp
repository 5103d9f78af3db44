// `wick chat-template`: a model's chat template (or a template file) rendered over conversations
// from a JSON file, as `wick serve` and `wick generate --chat` render it; the text of one, or a JSON
// array of results for many (scripts/template-check compares them with transformers' jinja2).
#include "template.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "args.h"
#include "generate.h"
#include "wick/models/chat_template.h"

namespace wick::cli {

namespace {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("chat-template: ") + what + ": cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int cmd_chat_template(int argc, char** argv) {
  std::string model_path, template_path, messages_path, conversations_path, bos, eos;
  bool generation_prompt = true;
  for (Options o("chat-template", argc, argv); o.next();) {
    if (o.is("--model"))
      model_path = o.value();
    else if (o.is("--template"))
      template_path = o.value();
    else if (o.is("--bos"))
      bos = o.value();
    else if (o.is("--eos"))
      eos = o.value();
    else if (o.is("--messages"))
      messages_path = o.value();
    else if (o.is("--conversations"))
      conversations_path = o.value();
    else if (o.is("--no-generation-prompt"))
      generation_prompt = false;
    else
      o.unknown();
  }
  if (messages_path.empty() == conversations_path.empty())
    throw std::runtime_error("chat-template: give --messages FILE or --conversations FILE");
  if (!model_path.empty() && !template_path.empty())
    throw std::runtime_error("chat-template: --model and --template exclude each other");
  std::optional<models::ChatTemplate> tmpl;
  if (!template_path.empty()) {
    tmpl.emplace(read_file(template_path, "--template"), bos, eos, template_path);
  } else {
    if (model_path.empty()) model_path = tiny_model_path();
    tmpl = models::ChatTemplate::of(models::ModelFile::open(model_path));
    if (!tmpl) throw std::runtime_error("chat-template: " + model_path + " has no chat template");
  }
  if (!messages_path.empty()) {
    std::cout << tmpl->render_json(read_file(messages_path, "--messages"), generation_prompt);
    return 0;
  }
  // Many: [{"messages": [...], "add_generation_prompt": bool}, ...] -> [{"text": ...} or {"error": ...}].
  const nlohmann::ordered_json cases = nlohmann::ordered_json::parse(read_file(conversations_path, "--conversations"));
  if (!cases.is_array()) throw std::runtime_error("chat-template: --conversations: not a JSON array");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& c : cases) {
    if (!c.is_object() || !c.contains("messages"))
      throw std::runtime_error("chat-template: --conversations: an entry without messages");
    try {
      out.push_back({{"text", tmpl->render_json(c["messages"].dump(), c.value("add_generation_prompt", true))}});
    } catch (const std::exception& e) {
      out.push_back({{"error", e.what()}});
    }
  }
  std::cout << out.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace wick::cli
