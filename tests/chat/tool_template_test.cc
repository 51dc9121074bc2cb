// Tools and tool calls through real chat templates: the renders of testdata/tool_renders.json
// (made by @huggingface/jinja@0.5.11, see its "about"), the tool-call syntax each template
// implies and how a declared one overrules it, and the OpenAI-to-transformers normalization of
// tools and messages.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "chat/tool_call_syntax.h"
#include "test_support.h"

namespace tessera {
namespace {

using nlohmann::ordered_json;

ordered_json ReadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.has_value()) << path;
  if (!text) return {};
  return ordered_json::parse(*text, nullptr, false);
}

ChatTemplateConfig SharedConfig(const std::string& folder) {
  auto config = LoadChatTemplateConfig(test::SharedDir() + "/tokenizers/" + folder);
  EXPECT_TRUE(config.has_value()) << folder << ": " << config.status().message();
  return config ? *config : ChatTemplateConfig{};
}

std::string Render(const ChatTemplateConfig& config, const ordered_json& messages,
                   const ordered_json& tools, bool add_generation_prompt = true,
                   const ordered_json& kwargs = ordered_json::object()) {
  auto ctx = MakeToolChatContext(config, messages, add_generation_prompt, tools, kwargs);
  EXPECT_TRUE(ctx.has_value()) << ctx.status().message();
  if (!ctx) return {};
  auto tmpl = jinja::Template::Parse(config.source);
  EXPECT_TRUE(tmpl.has_value()) << tmpl.status().message();
  if (!tmpl) return {};
  auto out = tmpl->Render(*ctx);
  EXPECT_TRUE(out.has_value()) << out.status().message();
  return out ? *out : std::string();
}

TEST(ToolTemplateTest, RendersLikeHuggingFaceJinja) {
  ordered_json doc = ReadJson(TOOL_RENDERS_JSON);
  ASSERT_TRUE(doc.is_object());
  ASSERT_GE(doc["cases"].size(), 16u);
  for (const ordered_json& c : doc["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    const std::string tmpl = c["template"].get<std::string>();
    ChatTemplateConfig config;
    if (doc["templates"].contains(tmpl)) {
      config.source = doc["templates"][tmpl].get<std::string>();
    } else {
      config = SharedConfig(tmpl);
    }
    config.special_tokens = c["special_tokens"];
    EXPECT_EQ(Render(config, c["messages"], c["tools"], c["add_generation_prompt"].get<bool>(),
                     c["kwargs"]),
              c["expected"].get<std::string>());
  }
}

TEST(ToolTemplateTest, SyntaxIsDecidedFromTheTemplate) {
  struct Case {
    const char* folder;
    ToolCallSyntax syntax;
    bool renders_tools;
  };
  for (const Case& c : {Case{"Qwen2.5-1.5B-Instruct", ToolCallSyntax::kHermes, true},
                        Case{"Qwen3-4B", ToolCallSyntax::kHermes, true},
                        Case{"MiniCPM-V-4_5", ToolCallSyntax::kHermes, true},
                        Case{"Qwen3.5-4B", ToolCallSyntax::kQwen3Xml, true},
                        Case{"gemma-3-1b-it", ToolCallSyntax::kGemmaJson, false},
                        Case{"Meta-Llama-3-8B", ToolCallSyntax::kLlama3Json, false}}) {
    ChatTemplateConfig config = SharedConfig(c.folder);
    EXPECT_EQ(DetectToolCallSyntax(config.source), c.syntax) << c.folder;
    EXPECT_EQ(config.renders_tools, c.renders_tools) << c.folder;
  }
  EXPECT_EQ(DetectToolCallSyntax("{{ messages }}"), ToolCallSyntax::kNone);
  EXPECT_EQ(DetectToolCallSyntax("{{ '<|python_tag|>' }}"), ToolCallSyntax::kLlama3Json);
}

constexpr ToolCallSyntax kEverySyntax[] = {ToolCallSyntax::kNone, ToolCallSyntax::kHermes,
                                           ToolCallSyntax::kLlama3Json, ToolCallSyntax::kGemmaJson,
                                           ToolCallSyntax::kQwen3Xml};

TEST(ToolTemplateTest, SyntaxNamesRoundTripAndAnUnknownNameListsThem) {
  for (ToolCallSyntax s : kEverySyntax) {
    auto back = ToolCallSyntaxFromName(ToolCallSyntaxName(s));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, s);
  }
  for (const char* bad : {"mistral", "", "Hermes", "hermes "}) {
    auto unknown = ToolCallSyntaxFromName(bad, "--tool-call-syntax");
    ASSERT_FALSE(unknown.has_value()) << bad;
    EXPECT_EQ(unknown.status().code(), ErrorCode::kInvalidArgument);
    const std::string message = unknown.status().message();
    EXPECT_TRUE(message.starts_with("--tool-call-syntax")) << message;
    for (ToolCallSyntax s : kEverySyntax) {
      EXPECT_NE(message.find(ToolCallSyntaxName(s)), std::string::npos) << message;
    }
  }
}

// Lines ChooseToolCallSyntax logged.
struct Logged {
  std::vector<std::string> lines;
  std::function<void(const std::string&)> fn() {
    return [this](const std::string& line) { lines.push_back(line); };
  }
};

// A syntax other than `a` and `b`, so that each source's answer is told apart.
ToolCallSyntax Other(ToolCallSyntax a, ToolCallSyntax b) {
  for (ToolCallSyntax s : kEverySyntax) {
    if (s != a && s != b && s != ToolCallSyntax::kNone) return s;
  }
  return ToolCallSyntax::kNone;
}

TEST(ToolCallSyntaxChoice, TheOptionBeatsTheCatalogWhichBeatsTheTemplate) {
  for (const char* folder : {"Qwen3-4B", "Qwen3.5-4B", "MiniCPM-V-4_5"}) {
    SCOPED_TRACE(folder);
    const ChatTemplateConfig config = SharedConfig(folder);
    ASSERT_TRUE(config.renders_tools);
    const ToolCallSyntax guessed = DetectToolCallSyntax(config.source);
    ASSERT_NE(guessed, ToolCallSyntax::kNone);
    const ToolCallSyntax catalog = Other(guessed, ToolCallSyntax::kNone);
    const ToolCallSyntax option = Other(guessed, catalog);

    Logged log;
    ToolCallSyntaxChoice c = ChooseToolCallSyntax(option, catalog, &config, log.fn());
    EXPECT_EQ(c.syntax, option);
    EXPECT_EQ(c.source, ToolCallSyntaxSource::kOption);
    c = ChooseToolCallSyntax(std::nullopt, catalog, &config, log.fn());
    EXPECT_EQ(c.syntax, catalog);
    EXPECT_EQ(c.source, ToolCallSyntaxSource::kCatalog);
    // Both declarations contradict the template's markers: each is kept, and said.
    EXPECT_EQ(log.lines.size(), 2u);
    for (const std::string& line : log.lines) {
      EXPECT_NE(line.find(ToolCallSyntaxName(guessed)), std::string::npos) << line;
    }

    log.lines.clear();
    c = ChooseToolCallSyntax(std::nullopt, std::nullopt, &config, log.fn());
    EXPECT_EQ(c.syntax, guessed);
    EXPECT_EQ(c.source, ToolCallSyntaxSource::kTemplate);
    ASSERT_EQ(log.lines.size(), 1u);  // one line: guessed, and how to declare it
    EXPECT_NE(log.lines[0].find("guessed from the chat template"), std::string::npos);
    EXPECT_NE(log.lines[0].find("--tool-call-syntax"), std::string::npos) << log.lines[0];

    // A declaration that agrees with the markers needs no word.
    log.lines.clear();
    c = ChooseToolCallSyntax(std::nullopt, guessed, &config, log.fn());
    EXPECT_EQ(c.source, ToolCallSyntaxSource::kCatalog);
    EXPECT_TRUE(log.lines.empty()) << log.lines[0];
  }
}

TEST(ToolCallSyntaxChoice, AModelWithoutAChatTemplateSaysSoInsteadOfGuessing) {
  // A completion model (stories260k) has no template to guess from: its log line says why
  // there are no tool calls rather than "guessed from the chat template".
  const ToolCallSyntaxChoice c = ChooseToolCallSyntax(std::nullopt, std::nullopt, nullptr, {});
  EXPECT_EQ(c.syntax, ToolCallSyntax::kNone);
  EXPECT_EQ(c.source, ToolCallSyntaxSource::kNoTemplate);
  EXPECT_EQ(c.Describe(), "none (no chat template)");
}

TEST(ToolCallSyntaxChoice, ADeclarationOverATemplateWithoutToolsIsLogged) {
  // Gemma 3's template renders no tools: a declared syntax cannot work, so loading says so
  // (requests with tools are refused); a guess there stays quiet, as nothing can use it.
  const ChatTemplateConfig gemma = SharedConfig("gemma-3-1b-it");
  ASSERT_FALSE(gemma.renders_tools);
  Logged log;
  ToolCallSyntaxChoice c =
      ChooseToolCallSyntax(std::nullopt, ToolCallSyntax::kHermes, &gemma, log.fn());
  EXPECT_EQ(c.syntax, ToolCallSyntax::kHermes);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find("renders no tools"), std::string::npos) << log.lines[0];
  log.lines.clear();
  c = ChooseToolCallSyntax(std::nullopt, std::nullopt, &gemma, log.fn());
  EXPECT_EQ(c.source, ToolCallSyntaxSource::kTemplate);
  EXPECT_TRUE(log.lines.empty());
  // No template at all: nothing to guess from.
  c = ChooseToolCallSyntax(std::nullopt, std::nullopt, nullptr, log.fn());
  EXPECT_EQ(c.syntax, ToolCallSyntax::kNone);
  EXPECT_TRUE(log.lines.empty());
  EXPECT_EQ(ChooseToolCallSyntax(ToolCallSyntax::kQwen3Xml, std::nullopt, nullptr, {}).source,
            ToolCallSyntaxSource::kOption);
}

// Arguments that are not a JSON object stay a string; Qwen3's template prints a string as it
// is ('arguments is string' branch), so the text below follows from the template source.
TEST(ToolTemplateTest, NonJsonStringArgumentsStayVerbatim) {
  ChatTemplateConfig config = SharedConfig("Qwen3-4B");
  ordered_json messages = ordered_json::parse(R"([
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": null,
     "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "not json"}}]}
  ])");
  EXPECT_EQ(Render(config, messages, nullptr, false),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
            "<tool_call>\n{\"name\": \"f\", \"arguments\": not json}\n</tool_call><|im_end|>\n");
}

TEST(ToolTemplateTest, EmptyToolsAreNoTools) {
  ChatTemplateConfig config = SharedConfig("Qwen2.5-1.5B-Instruct");
  ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  const std::string plain =
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(Render(config, messages, ordered_json::array()), plain);
  EXPECT_EQ(Render(config, messages, nullptr), plain);
  auto ctx =
      MakeToolChatContext(config, messages, true, ordered_json::array(), ordered_json::object());
  ASSERT_TRUE(ctx.has_value());
  EXPECT_FALSE(ctx->contains("tools"));
}

TEST(ToolTemplateTest, ToolsFromKwargsAreNormalizedToo) {
  ChatTemplateConfig config = SharedConfig("Qwen2.5-1.5B-Instruct");
  ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  ordered_json spec = ordered_json::parse(R"({"name": "f", "parameters": {}})");
  ordered_json kwargs = {{"tools", ordered_json::array({spec})}};
  auto ctx = MakeToolChatContext(config, messages, true, nullptr, kwargs);
  ASSERT_TRUE(ctx.has_value()) << ctx.status().message();
  EXPECT_EQ((*ctx)["tools"].dump(),
            R"([{"type":"function","function":{"name":"f","parameters":{}}}])");
  auto twice = MakeToolChatContext(config, messages, true, kwargs["tools"], kwargs);
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.status().code(), ErrorCode::kInvalidArgument);
}

TEST(ToolTemplateTest, BadToolsAreInvalidArgument) {
  for (const char* bad : {R"({"name": "f"})", R"([1])", R"([{"description": "no name"}])",
                          R"([{"type": "function", "function": "f"}])"}) {
    auto out = ToolsForTemplate(ordered_json::parse(bad));
    ASSERT_FALSE(out.has_value()) << bad;
    EXPECT_EQ(out.status().code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(MessagesForTemplate(ordered_json::object()).has_value());
}

TEST(ToolTemplateTest, MessagesNormalization) {
  ordered_json in = ordered_json::parse(R"([
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"x\": [1, 2]}"}},
      {"id": "b", "type": "function", "function": {"name": "g", "arguments": "[1]"}},
      {"name": "h", "arguments": "{\"y\": true}"}]},
    {"role": "assistant", "content": null},
    {"role": "tool", "tool_call_id": "a", "name": "f", "content": "ok"}
  ])");
  auto out = MessagesForTemplate(in);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->dump(),
            R"([{"role":"assistant","content":"","tool_calls":[)"
            R"({"id":"a","type":"function","function":{"name":"f","arguments":{"x":[1,2]}}},)"
            R"({"id":"b","type":"function","function":{"name":"g","arguments":"[1]"}},)"
            R"({"name":"h","arguments":{"y":true}}]},)"
            R"({"role":"assistant","content":null},)"
            R"({"role":"tool","tool_call_id":"a","name":"f","content":"ok"}])");
}

// Arguments nested far deeper than any template needs stay a string: parsed, the copy into
// the template context would recurse once per level and overflow the stack.
TEST(ToolTemplateTest, DeeplyNestedArgumentsStayAString) {
  const size_t depth = 200000;
  const std::string deep = "{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
  ordered_json in = ordered_json::array(
      {{{"role", "assistant"},
        {"content", ""},
        {"tool_calls",
         ordered_json::array({{{"id", "a"},
                               {"type", "function"},
                               {"function", {{"name", "f"}, {"arguments", deep}}}}})}},
       {{"role", "user"}, {"content", "hi"}}});
  auto out = MessagesForTemplate(in);
  ASSERT_TRUE(out.has_value());
  const ordered_json& args = (*out)[0]["tool_calls"][0]["function"]["arguments"];
  ASSERT_TRUE(args.is_string());
  EXPECT_EQ(args.get<std::string>().size(), deep.size());
  ChatTemplateConfig config;
  const ordered_json ctx = MakeChatContext(config, *out, true, ordered_json());
  EXPECT_TRUE(ctx["messages"][0]["tool_calls"][0]["function"]["arguments"].is_string());
  // At the limit it is still parsed.
  const size_t ok = kMaxToolArgumentsDepth - 1;
  in[0]["tool_calls"][0]["function"]["arguments"] =
      "{\"a\":" + std::string(ok - 1, '[') + std::string(ok - 1, ']') + "}";
  out = MessagesForTemplate(in);
  ASSERT_TRUE(out.has_value());
  EXPECT_TRUE((*out)[0]["tool_calls"][0]["function"]["arguments"].is_object());
}

}  // namespace
}  // namespace tessera
