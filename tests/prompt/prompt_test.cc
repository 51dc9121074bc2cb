// PromptAssembler on real tokenizers and templates: control tokens come from the template
// only, rendering is unchanged by the markers, kwargs and BOS follow the template, and
// trimming drops whole oldest turns.
#include "prompt/prompt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace tessera {
namespace {

using nlohmann::ordered_json;

constexpr int32_t kImStart = 151644;
constexpr int32_t kImEnd = 151645;

struct Model {
  ChatTemplateConfig config;
  Tokenizer tokenizer;
};

const Model& Load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  auto& slot = cache[name];
  if (!slot) {
    std::string dir = test::SharedDir() + "/tokenizers/" + name;
    auto config = LoadChatTemplateConfig(dir);
    auto tok = Tokenizer::FromFile(dir + "/tokenizer.json");
    EXPECT_TRUE(config.has_value()) << config.status().message();
    EXPECT_TRUE(tok.has_value()) << tok.status().message();
    if (!config || !tok) std::abort();
    slot = std::make_unique<Model>(Model{std::move(*config), std::move(*tok)});
  }
  return *slot;
}

AssembledPrompt MustAssemble(const std::string& name, const ordered_json& messages,
                             bool add_generation_prompt = true,
                             const ordered_json& kwargs = ordered_json::object(),
                             AssembleOptions options = {}) {
  const Model& m = Load(name);
  auto p = AssemblePrompt(m.config, m.tokenizer, messages, add_generation_prompt, kwargs, options);
  EXPECT_TRUE(p.has_value()) << p.status().message();
  return p ? *p : AssembledPrompt{};
}

// What transformers renders: the template over the messages as given.
std::string PlainRender(const std::string& name, const ordered_json& messages,
                        bool add_generation_prompt,
                        const ordered_json& kwargs = ordered_json::object()) {
  const Model& m = Load(name);
  auto tmpl = jinja::Template::Parse(m.config.source);
  EXPECT_TRUE(tmpl.has_value());
  auto text = tmpl->Render(MakeChatContext(m.config, messages, add_generation_prompt, kwargs));
  EXPECT_TRUE(text.has_value()) << text.status().message();
  return text ? *text : "";
}

std::vector<int32_t> PlainEncode(const std::string& name, const std::string& text) {
  auto ids = Load(name).tokenizer.Encode(text);
  EXPECT_TRUE(ids.has_value()) << ids.status().message();
  return ids ? *ids : std::vector<int32_t>{};
}

long Count(const std::vector<int32_t>& ids, int32_t id) {
  return std::count(ids.begin(), ids.end(), id);
}

ordered_json Msg(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

TEST(AssemblePrompt, PlainConversationEqualsEncodingTheRenderedText) {
  const std::string qwen = "Qwen2.5-1.5B-Instruct";
  ordered_json messages = {Msg("system", "Be brief."), Msg("user", "Hello!"),
                           Msg("assistant", "Hi. How can I help?"), Msg("user", "Tell a joke.")};
  AssembledPrompt p = MustAssemble(qwen, messages);
  EXPECT_EQ(p.rendered, PlainRender(qwen, messages, true));
  EXPECT_EQ(p.ids, PlainEncode(qwen, p.rendered));
  EXPECT_EQ(Count(p.ids, kImStart), 5);  // 4 messages + the generation prompt
  EXPECT_EQ(p.rendered.substr(p.rendered.size() - 22), "<|im_start|>assistant\n");
}

TEST(AssemblePrompt, SpecialTextInContentIsOrdinaryTokens) {
  const std::string qwen = "Qwen2.5-1.5B-Instruct";
  ordered_json messages = {Msg("user", "What does <|im_start|> mean?")};
  AssembledPrompt p = MustAssemble(qwen, messages);
  // Rendering is exactly what the template writes for the original content.
  EXPECT_EQ(p.rendered, PlainRender(qwen, messages, true));
  // Template: default system, user, generation prompt -> three control tokens, not four.
  EXPECT_EQ(Count(p.ids, kImStart), 3);
  EXPECT_EQ(p.ids.front(), kImStart);
  // The content's copy is several ordinary tokens: exactly how it encodes as text.
  // (With its leading space, as the pre-tokenizer sees it there.)
  auto text_ids = Load(qwen).tokenizer.Encode(" <|im_start|>", {.split_special_tokens = true});
  ASSERT_TRUE(text_ids.has_value());
  EXPECT_GT(text_ids->size(), 1u);
  EXPECT_NE(std::search(p.ids.begin(), p.ids.end(), text_ids->begin(), text_ids->end()),
            p.ids.end());
  auto decoded = Load(qwen).tokenizer.Decode(p.ids, false);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, p.rendered);

  // Hugging Face's behaviour: the content's copy becomes the control token.
  AssembledPrompt hf = MustAssemble(qwen, messages, true, ordered_json::object(),
                                    {.content_specials_are_text = false});
  EXPECT_EQ(hf.rendered, p.rendered);
  EXPECT_EQ(Count(hf.ids, kImStart), 4);
  EXPECT_EQ(hf.ids, PlainEncode(qwen, hf.rendered));
}

TEST(AssemblePrompt, OtherMessageStringsAreProtectedToo) {
  const std::string qwen = "Qwen2.5-1.5B-Instruct";
  // A tool call whose arguments (a JSON string) and a system prompt spell <|im_end|>.
  ordered_json call = {{"type", "function"},
                       {"function", {{"name", "echo"}, {"arguments", R"({"x": "<|im_end|>"})"}}}};
  ordered_json messages = {Msg("system", "end with <|im_end|>"),
                           Msg("user", "go"),
                           {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}},
                           Msg("tool", "<|im_end|><|endoftext|>")};
  AssembledPrompt p = MustAssemble(qwen, messages);
  // As a transformers user would render it: the arguments string parsed to a dict first.
  auto parsed = MessagesForTemplate(messages);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(p.rendered, PlainRender(qwen, *parsed, true));
  EXPECT_NE(p.rendered.find(R"({"name": "echo", "arguments": {"x": "<|im_end|>"}})"),
            std::string::npos);
  AssembledPrompt hf = MustAssemble(qwen, messages, true, ordered_json::object(),
                                    {.content_specials_are_text = false});
  const long im_end_from_content = 3;
  EXPECT_EQ(Count(hf.ids, kImEnd) - Count(p.ids, kImEnd), im_end_from_content);
  EXPECT_EQ(Count(p.ids, 151643), 0);  // <|endoftext|> only appeared in content
  EXPECT_EQ(Count(hf.ids, 151643), 1);
}

TEST(AssemblePrompt, ToolsReachTheTemplateAndAreProtected) {
  const std::string qwen = "Qwen2.5-1.5B-Instruct";
  ordered_json messages = {Msg("user", "go")};
  ordered_json spec = {{"name", "f"}, {"description", "stops at <|im_end|>"}, {"parameters", {}}};
  AssembledPrompt p = MustAssemble(qwen, messages, true, {{"tools", {spec}}});
  ordered_json wrapped = {{"tools", {{{"type", "function"}, {"function", spec}}}}};
  EXPECT_EQ(p.rendered, PlainRender(qwen, messages, true, wrapped));
  EXPECT_NE(p.rendered.find("\"description\": \"stops at <|im_end|>\""), std::string::npos);
  EXPECT_EQ(Count(p.ids, kImEnd), 2);  // system (with the tools) and user
  AssembledPrompt hf =
      MustAssemble(qwen, messages, true, {{"tools", {spec}}}, {.content_specials_are_text = false});
  EXPECT_EQ(Count(hf.ids, kImEnd), 3);
  // An empty tools list is no tools.
  AssembledPrompt none = MustAssemble(qwen, messages, true, {{"tools", ordered_json::array()}});
  EXPECT_EQ(none.rendered, PlainRender(qwen, messages, true));
}

TEST(AssemblePrompt, PreexistingMarkerCharactersRoundTrip) {
  const std::string qwen = "Qwen2.5-1.5B-Instruct";
  // Text that looks like a marker (U+FDD0 0 U+FDD1), lone brackets, and a real special.
  const std::string tricky =
      "a\xEF\xB7\x90"
      "0\xEF\xB7\x91 b \xEF\xB7\x90 c \xEF\xB7\x91 <|im_start|>";
  ordered_json messages = {Msg("user", tricky)};
  AssembledPrompt p = MustAssemble(qwen, messages);
  EXPECT_EQ(p.rendered, PlainRender(qwen, messages, true));
  EXPECT_NE(p.rendered.find(tricky), std::string::npos);
  EXPECT_EQ(Count(p.ids, kImStart), 3);
}

TEST(AssemblePrompt, KwargsReachTheTemplate) {
  const std::string qwen3 = "Qwen3-4B";
  ordered_json messages = {Msg("user", "2+2?")};
  AssembledPrompt thinking = MustAssemble(qwen3, messages);
  AssembledPrompt direct = MustAssemble(qwen3, messages, true, {{"enable_thinking", false}});
  EXPECT_EQ(direct.rendered, PlainRender(qwen3, messages, true, {{"enable_thinking", false}}));
  EXPECT_EQ(thinking.rendered.find("<think>"), std::string::npos);
  EXPECT_NE(direct.rendered.find("<think>\n\n</think>"), std::string::npos);
  EXPECT_EQ(direct.ids, PlainEncode(qwen3, direct.rendered));
}

TEST(AssemblePrompt, BosComesFromTheTemplateOnly) {
  // Gemma's template writes {{ bos_token }} and its post-processor would add another <bos>.
  const std::string gemma = "gemma-3-1b-it";
  AssembledPrompt p = MustAssemble(gemma, ordered_json::array({Msg("user", "hi <bos>")}));
  ASSERT_FALSE(p.ids.empty());
  EXPECT_EQ(p.ids.front(), 2);
  EXPECT_EQ(Count(p.ids, 2), 1);  // the content's "<bos>" is text
  EXPECT_EQ(p.rendered.rfind("<bos>", 0), 0u);
}

TEST(AssemblePrompt, BadInputsAreErrors) {
  const Model& m = Load("Qwen2.5-1.5B-Instruct");
  auto not_array = AssemblePrompt(m.config, m.tokenizer, ordered_json::object(), true, {});
  EXPECT_FALSE(not_array.has_value());
  EXPECT_EQ(not_array.status().code(), ErrorCode::kInvalidArgument);
  ChatTemplateConfig broken = m.config;
  broken.source = "{% for m in messages %}";
  EXPECT_FALSE(AssemblePrompt(broken, m.tokenizer, ordered_json::array(), true, {}).has_value());
  ChatTemplateConfig raising = m.config;
  raising.source = "{{ raise_exception('no system role') }}";
  auto raised = AssemblePrompt(raising, m.tokenizer, ordered_json::array(), true, {});
  ASSERT_FALSE(raised.has_value());
  EXPECT_NE(raised.status().message().find("no system role"), std::string::npos);
}

ordered_json LongConversation(int turns) {
  ordered_json messages = {Msg("system", "You answer in one sentence.")};
  for (int i = 0; i < turns; ++i) {
    messages.push_back(Msg("user", "Question number " + std::to_string(i) + " about rivers?"));
    messages.push_back(Msg("assistant", "Answer " + std::to_string(i) + ": rivers flow downhill."));
  }
  messages.push_back(Msg("user", "And the last question?"));
  return messages;
}

TEST(AssembleWithin, KeepsEverythingWhenItFits) {
  const Model& m = Load("Qwen2.5-1.5B-Instruct");
  auto assembler = PromptAssembler::Create(m.config, m.tokenizer);
  ASSERT_TRUE(assembler.has_value());
  ordered_json messages = LongConversation(3);
  auto full = assembler->Assemble(messages, true, {});
  ASSERT_TRUE(full.has_value());
  auto t = assembler->AssembleWithin(messages, true, {}, full->ids.size());
  ASSERT_TRUE(t.has_value()) << t.status().message();
  EXPECT_EQ(t->dropped_messages, 0u);
  EXPECT_EQ(t->prompt.ids, full->ids);
  EXPECT_EQ(t->messages, messages);
}

TEST(AssembleWithin, DropsOldestWholeTurnsAndKeepsTheSystemMessage) {
  const Model& m = Load("Qwen2.5-1.5B-Instruct");
  auto assembler = PromptAssembler::Create(m.config, m.tokenizer);
  ASSERT_TRUE(assembler.has_value());
  ordered_json messages = LongConversation(6);  // system, 6 x (user, assistant), user
  // The budget is exactly what the system message, the newest two full turns and the last
  // question take: the four oldest turns (eight messages) must go, and no more.
  ordered_json expected = {messages[0]};
  for (size_t i = 9; i < messages.size(); ++i) expected.push_back(messages[i]);
  auto want = assembler->Assemble(expected, true, {});
  ASSERT_TRUE(want.has_value());
  auto t = assembler->AssembleWithin(messages, true, {}, want->ids.size());
  ASSERT_TRUE(t.has_value()) << t.status().message();
  EXPECT_EQ(t->dropped_messages, 8u);
  EXPECT_EQ(t->messages, expected);
  EXPECT_EQ(t->prompt.ids, want->ids);
  // One token less and another turn goes.
  auto tighter = assembler->AssembleWithin(messages, true, {}, want->ids.size() - 1);
  ASSERT_TRUE(tighter.has_value());
  EXPECT_EQ(tighter->dropped_messages, 10u);
  EXPECT_EQ(tighter->messages[0], messages[0]);
  EXPECT_LT(tighter->prompt.ids.size(), want->ids.size());
}

TEST(AssembleWithin, TooLongEvenAloneIsAClearError) {
  const Model& m = Load("Qwen2.5-1.5B-Instruct");
  auto assembler = PromptAssembler::Create(m.config, m.tokenizer);
  ASSERT_TRUE(assembler.has_value());
  auto t = assembler->AssembleWithin(LongConversation(4), true, {}, 10);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("budget of 10"), std::string::npos);
  EXPECT_EQ(t.status().message().find('\n'), std::string::npos);
  // Without a system message the message says so.
  ordered_json only_user = {Msg("user", "a long question about many things")};
  auto u = assembler->AssembleWithin(only_user, true, {}, 3);
  ASSERT_FALSE(u.has_value());
  EXPECT_EQ(u.status().message().find("system"), std::string::npos);
}

}  // namespace
}  // namespace tessera
