// Chat templates (include/wick/models/chat_template.h): a model's own Jinja template rendered as
// transformers renders it (trim_blocks, lstrip_blocks; bos_token, eos_token, raise_exception,
// add_generation_prompt), read from a GGUF file, refused clearly where it does not parse or refuses
// a conversation. scripts/template-check compares real templates with jinja2 itself.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

#include "wick/error.h"
#include "wick/io.h"
#include "wick/models/chat_template.h"

namespace wick::test {
namespace {

using models::ChatMessage;
using models::ChatTemplate;

std::string tiny_path() { return std::string(WICK_SOURCE_DIR) + "/models/tiny.gguf"; }

TEST(ChatTemplate, TheTinyModelsTemplateRendersAConversation) {
  const models::ModelFile file = models::ModelFile::open(tiny_path());
  const std::optional<ChatTemplate> t = ChatTemplate::of(file);
  ASSERT_TRUE(t.has_value());
  EXPECT_NE(t->origin().find("tokenizer.chat_template"), std::string::npos) << t->origin();
  const std::vector<ChatMessage> chat = {{"system", " Be brief. "},
                                         {"user", "What is free software?"},
                                         {"assistant", "Software users may run, study, share and change."},
                                         {"user", "Thanks"}};
  EXPECT_EQ(t->render(chat, true),
            "<s>Be brief.\n\nQ: What is free software?\nA: Software users may run, study, share and change.</s>\nQ: "
            "Thanks\nA:");
  EXPECT_EQ(t->render({chat.data(), 2}, false), "<s>Be brief.\n\nQ: What is free software?\n");
  // The JSON form keeps what a template may read beyond role and content.
  EXPECT_EQ(t->render_json(R"([{"role": "user", "content": "hi", "name": "ann"}])", true), "<s>Q: hi\nA:");
}

TEST(ChatTemplate, TrimsBlocksAndStripsTheirIndentAsJinjaInTransformers) {
  const ChatTemplate t(
      "{% for m in messages %}\n"
      "    {% if m.role == 'user' %}\n"
      "[{{ m.content }}]\n"
      "    {% endif %}\n"
      "{% endfor %}\n"
      "{{ bos_token ~ '|' ~ eos_token }}",
      "<B>", "<E>");
  const std::vector<ChatMessage> chat = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
  EXPECT_EQ(t.render(chat), "[a]\n[c]\n<B>|<E>");
}

TEST(ChatTemplate, SelectattrTakesTheDefinedAndUndefinedTestsByName) {
  // Mistral Nemo's template filters its messages with selectattr("tool_calls", "undefined").
  const ChatTemplate t(
      "{% for m in messages | selectattr('tool_calls', 'undefined') %}{{ m.content }};{% endfor %}|"
      "{% for m in messages | selectattr('name', 'defined') %}{{ m.name }};{% endfor %}|"
      "{% for m in messages | rejectattr('name', 'undefined') %}{{ m.content }};{% endfor %}",
      "", "");
  EXPECT_EQ(t.render_json(R"([{"role": "user", "content": "a", "name": "ann"},
                              {"role": "assistant", "content": "b", "tool_calls": [{"id": "x"}]},
                              {"role": "user", "content": "c"}])"),
            "a;c;|ann;|a;");
}

TEST(ChatTemplate, ATemplateThatRefusesAConversationIsAnErrorNamingIt) {
  const models::ModelFile file = models::ModelFile::open(tiny_path());
  const ChatTemplate t = *ChatTemplate::of(file);
  const std::vector<ChatMessage> chat = {{"tool", "42"}};
  try {
    (void)t.render(chat);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tiny.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find("not tool"), std::string::npos) << m;
  }
}

TEST(ChatTemplate, ATemplateThatDoesNotParseIsAFormatErrorNamingItsOrigin) {
  try {
    ChatTemplate("{% for m in messages %}{{ m.content }", "", "", "my-template.jinja");
    FAIL() << "no error";
  } catch (const io::FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("my-template.jinja"), std::string::npos) << m;
    EXPECT_NE(m.find("does not parse"), std::string::npos) << m;
  }
}

TEST(ChatTemplate, MessagesThatAreNotAJsonArrayOfObjectsAreRefused) {
  const ChatTemplate t("{{ messages | length }}", "", "");
  EXPECT_EQ(t.render_json("[]", true), "0");
  for (const char* bad : {"{", "{}", "[1]", "\"x\"", "[[]]"})
    EXPECT_THROW(t.render_json(bad, true), io::FormatError) << bad;
  // Deeply nested input is refused before it is walked.
  EXPECT_THROW(t.render_json(std::string(100000, '['), true), io::FormatError);
}

TEST(ChatTemplate, ACheckpointsTokenizerConfigGivesItsTemplate) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "wick_chat_template_test";
  std::filesystem::create_directories(dir);
  const auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
  write("tokenizer_config.json",
        R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  // chat_template_source reads the directory's config without loading the model.
  write("config.json", R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"]})");
  const models::ModelFile file = models::ModelFile::open(dir.string());
  EXPECT_EQ(models::chat_template_source(file), "D");
  write("tokenizer_config.json", R"({"chat_template": 7})");
  EXPECT_THROW(models::chat_template_source(file), io::FormatError);
  write("tokenizer_config.json", R"({"bos_token": "<s>"})");
  EXPECT_EQ(models::chat_template_source(file), "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wick::test
