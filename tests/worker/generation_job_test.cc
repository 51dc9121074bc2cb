// GenerationJob with strict tools under tool_choice auto on a model whose chat template teaches
// calls as a bare JSON object (the Llama 3 form): the reply's first token decides between a
// call, constrained to the functions' schemas to its end, and text, in which no call is parsed.
// The model: random weights on the real Llama 3 tokenizer, with a Llama-3.x-like tool
// template (tests/chat/testdata/tool_renders.json's llama_style).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "grammar/tokenizer_vocabulary.h"
#include "model/synthetic_checkpoint.h"
#include "runtime/loaded_model.h"
#include "test_support.h"
#include "worker/generation_job.h"
#include "worker/protocol.h"

namespace tessera::worker {
namespace {

ChatPayload& Chat(JobRequest& job) {
  return std::get<ChatPayload>(job.payload);
}

// Tools as the HTTP side sends them: each entry's definition as written, its name and strict
// flag read out (an entry of another shape keeps an empty name, for the worker to refuse).
std::vector<ToolDefinition> Tools(const std::string& text) {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(text);
  std::vector<ToolDefinition> out;
  for (const auto& t : tools) {
    ToolDefinition d;
    d.definition = t.dump();
    if (t.is_object() && t.contains("function") && t["function"].is_object()) {
      const auto& fn = t["function"];
      if (fn.contains("name") && fn["name"].is_string()) d.name = fn["name"].get<std::string>();
      d.strict = fn.value("strict", false) == true;
    }
    out.push_back(std::move(d));
  }
  return out;
}

ToolChoice Choice(const std::string& choice) {
  if (choice == "none") return {ToolChoiceMode::kNone, ""};
  if (choice == "auto") return {ToolChoiceMode::kAuto, ""};
  if (choice == "required") return {ToolChoiceMode::kRequired, ""};
  return {ToolChoiceMode::kFunction, choice};
}

using json = nlohmann::json;

constexpr const char* kLlamaStyleTemplate = R"TPL({{- bos_token }}
{%- if tools is defined and tools is not none %}
    {{- '<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\n' }}
    {{- 'Call a function by replying {"name": function name, "parameters": dictionary of argument name and its value}.\n\n' }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- '\n\n' }}
    {%- endfor %}
    {{- '<|eot_id|>' }}
{%- endif %}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' + message.content | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %})TPL";

constexpr const char* kStrictWeather = R"([{"type": "function", "function": {
  "name": "get_weather", "strict": true,
  "parameters": {"type": "object",
                 "properties": {"city": {"type": "string", "maxLength": 20},
                                "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                 "required": ["city", "days"], "additionalProperties": false}}}])";

struct Reply {
  std::string content;
  std::vector<ToolCallFragment> calls;  // merged per index
  FinishReason finish = FinishReason::kStop;
  bool done = false;
  std::string error;
};

// A small random-weights model of `spec`'s family and vocabulary with a real tokenizer from
// ../shared and `chat_template`, opened with two slots of `context` positions; null (test
// failed) on error.
LoadedModel* OpenSynthetic(const test::TempDir& dir, SyntheticModelSpec spec,
                           const std::string& tokenizer, const std::string& chat_template,
                           int64_t context = 512) {
  const std::string tokenizers = test::SharedDir() + "/tokenizers/" + tokenizer;
  spec.hidden = 64;
  spec.intermediate = 96;
  spec.layers = 2;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 16;
  spec.max_position = context;
  EXPECT_TRUE(WriteSyntheticCheckpoint(dir.path(), spec).ok());
  std::filesystem::copy_file(tokenizers + "/tokenizer.json", dir.File("tokenizer.json"));
  json config = json::parse(test::ReadFile(tokenizers + "/tokenizer_config.json"));
  config["chat_template"] = chat_template;
  test::WriteFile(dir.File("tokenizer_config.json"), config.dump());
  ModelLoadOptions o;
  o.parallel = 2;
  o.context = context;
  o.package_cache = false;
  auto m = LoadedModel::Open(dir.path(), o);
  EXPECT_TRUE(m) << m.status().message();
  return m ? m->release() : nullptr;
}

// Runs one chat job to its end on the model's scheduler (the vocabulary built once, in
// `vocabulary`).
Reply RunJob(const JobRequest& job, LoadedModel& model,
             std::shared_ptr<const TokenVocabulary>& vocabulary) {
  Reply reply;
  auto vocab = [&]() -> Expected<std::shared_ptr<const TokenVocabulary>> {
    if (!vocabulary) {
      auto v = VocabularyFromTokenizer(model.tokenizer(), model.stop_ids());
      if (!v) return v.status();
      vocabulary = *v;
    }
    return vocabulary;
  };
  auto send = [&reply](const std::string& frame) {
    auto type = PeekMessageType(frame);
    if (!type) return;
    if (*type == MessageType::kDelta) {
      auto d = Decode<DeltaMessage>(frame);
      if (!d) return;
      reply.content += d->text;
      for (const ToolCallFragment& f : d->tool_calls) {
        if (f.index >= static_cast<int32_t>(reply.calls.size())) reply.calls.resize(f.index + 1);
        ToolCallFragment& c = reply.calls[static_cast<size_t>(f.index)];
        if (!f.name.empty()) c.name = f.name;
        c.arguments += f.arguments;
      }
    } else if (*type == MessageType::kDone) {
      auto d = Decode<DoneMessage>(frame);
      if (d) reply.finish = d->finish_reason;
      reply.done = true;
    }
  };
  auto started = GenerationJob::Start(job, model, vocab, 0, send, [](uint64_t) {});
  if (auto* failure = std::get_if<JobFailure>(&started)) {
    reply.error = failure->message;
    return reply;
  }
  std::unique_ptr<GenerationJob> running = std::move(std::get<0>(started));
  for (int steps = 0; model.scheduler().HasWork() && steps < 1000; ++steps) {
    EXPECT_TRUE(model.scheduler().Step().ok());
  }
  return reply;
}

// get_weather's arguments as kStrictWeather allows them.
void ExpectWeatherArguments(const std::string& arguments) {
  const json args = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << arguments;
  EXPECT_EQ(args.size(), 2u) << args.dump();
  ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << args.dump();
  EXPECT_LE(args["city"].get<std::string>().size(), 20u) << args.dump();
  ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << args.dump();
  EXPECT_GE(args["days"].get<int64_t>(), 1);
  EXPECT_LE(args["days"].get<int64_t>(), 7);
}

// A test suite's model (opened by the suite's SetUpTestSuite into model_, files in dir_),
// shared by its tests; Tag tells the suites' statics apart.
template <typename Tag>
class SyntheticModelTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  static Reply Run(const JobRequest& job) { return RunJob(job, *model_, vocabulary_); }

  static inline test::TempDir* dir_ = nullptr;
  static inline LoadedModel* model_ = nullptr;
  static inline std::shared_ptr<const TokenVocabulary> vocabulary_;
};

class StrictAutoBareJson : public SyntheticModelTest<StrictAutoBareJson> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    SyntheticModelSpec spec;
    spec.family = ModelFamily::kLlama;
    spec.vocab = 128256;
    // A long context: the many-tools test renders 81 functions into its prompt.
    model_ = OpenSynthetic(*dir_, spec, "Meta-Llama-3-8B", kLlamaStyleTemplate, 8192);
    ASSERT_NE(model_, nullptr);
  }

  static JobRequest WeatherJob() {
    JobRequest job;
    job.job_id = 1;
    job.payload = ChatPayload{};
    job.model = "m";
    Chat(job).messages = {ChatMessage{"user", "What is the weather in Paris?", "", "", ""}};
    Chat(job).tools = Tools(kStrictWeather);
    Chat(job).tool_choice = Choice("auto");
    Chat(job).options.max_tokens = 80;
    return job;
  }

  // WeatherJob sampled with `seed`, the call opened: random weights never open one by
  // themselves, so logit_bias makes "{" the first choice and from there the grammar writes
  // the call.
  static JobRequest OpenedCallJob(int64_t seed) {
    JobRequest job = WeatherJob();
    const std::optional<int32_t> brace = model_->tokenizer().TokenToId("{");
    EXPECT_TRUE(brace.has_value());
    if (brace) Chat(job).options.logit_bias = {{*brace, 100.0}};
    Chat(job).options.sampling.temperature = 0.8;
    Chat(job).options.sampling.seed = seed;
    return job;
  }
};

TEST_F(StrictAutoBareJson, ACallTheModelOpensFollowsTheSchema) {
  ASSERT_NE(model_, nullptr);
  ASSERT_EQ(model_->tool_call_syntax().syntax, ToolCallSyntax::kLlama3Json);
  for (int64_t seed : {1, 2, 3}) {
    Reply r = Run(OpenedCallJob(seed));
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.finish, FinishReason::kToolCalls) << r.content;
    ASSERT_EQ(r.calls.size(), 1u) << r.content;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    ExpectWeatherArguments(r.calls[0].arguments);
  }
}

// The worker reads a job's tools as the front end validated them, but a frame does not carry
// that guarantee: tools of any other shape are refused by name, before the schema builders
// index them (a missing "function" or a non-string name used to be read unchecked).
TEST_F(StrictAutoBareJson, ToolsOfAnotherShapeAreRefusedNotRead) {
  ASSERT_NE(model_, nullptr);
  for (const char* tools :
       {R"([{"function": {"name": "f"}}, 5])", R"([5])", R"([{"type": "function"}])",
        R"([{"function": "get_weather"}])", R"([{"function": {"parameters": {}}}])",
        R"([{"function": {"name": 7, "strict": true}}])"}) {
    for (const char* choice : {"auto", "required"}) {
      JobRequest job = WeatherJob();
      Chat(job).tools = Tools(tools);
      Chat(job).tool_choice = Choice(choice);
      Reply r = Run(job);
      EXPECT_NE(r.error.find("tools: expected an array of"), std::string::npos)
          << tools << " / " << choice << ": " << r.error;
      EXPECT_FALSE(r.done);
    }
  }
}

// A non-strict function whose schema no grammar follows ("format" is not supported) used to
// make every strict + auto request a 400; nothing promised its arguments a schema, so a call
// to it now writes any JSON object, while the strict function's calls still follow theirs.
// ("{" biased to open the call is chosen wherever the grammar allows it, so a free object's
// strings run to max_tokens: the non-strict calls are checked as far as they go.)
TEST_F(StrictAutoBareJson, ANonStrictFunctionWithAnUnsupportedSchemaStaysCallable) {
  ASSERT_NE(model_, nullptr);
  json tools = json::parse(kStrictWeather);
  tools.push_back(json::parse(R"({"type": "function", "function": {"name": "log_event",
    "parameters": {"type": "object", "properties": {
      "when": {"type": "string", "format": "date-time"}}, "required": ["when"]}}})"));
  int weather = 0, free_calls = 0;
  for (int64_t seed = 1; seed <= 8; ++seed) {
    JobRequest job = OpenedCallJob(seed);
    Chat(job).tools = Tools(tools.dump());
    Reply r = Run(job);
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.done);
    if (r.finish == FinishReason::kToolCalls) {
      ASSERT_EQ(r.calls.size(), 1u) << r.content;
      ASSERT_EQ(r.calls[0].name, "get_weather") << r.calls[0].arguments;
      ExpectWeatherArguments(r.calls[0].arguments);
      ++weather;
      continue;
    }
    // An unfinished call comes back as text: {"name": "log_event", "parameters": {"KEY...
    const size_t name = r.content.find("\"log_event\"");
    ASSERT_NE(name, std::string::npos) << r.content;
    const size_t args = r.content.find("\"parameters\":", name);
    ASSERT_NE(args, std::string::npos) << r.content;
    const std::string rest = r.content.substr(args + 13);
    const size_t open = rest.find_first_not_of(" ");
    ASSERT_EQ(rest.substr(open, 2), "{\"") << r.content;
    // Its first key is free: the schema would have made it "when".
    if (rest.compare(open + 2, 5, "when\"") != 0) ++free_calls;
  }
  // Seeds 1-8 reach both functions (the name is the grammar's choice among the two).
  EXPECT_GT(weather, 0);
  EXPECT_GT(free_calls, 0);
}

// The 64 alternatives a grammar follows at once bound the strict functions only: non-strict
// ones past that share one alternative (any object); 65 strict functions are a 400 naming
// the limit.
TEST_F(StrictAutoBareJson, OnlyStrictFunctionsCountAgainstTheGrammarLimit) {
  ASSERT_NE(model_, nullptr);
  auto tools_with = [](int strict, int loose) {
    json tools = json::array();
    for (int i = 0; i < strict + loose; ++i) {
      json fn = {{"name", "f" + std::to_string(i)},
                 {"parameters",
                  {{"type", "object"},
                   {"properties", {{"x", {{"type", "integer"}}}}},
                   {"required", {"x"}},
                   {"additionalProperties", false}}}};
      if (i < strict) fn["strict"] = true;
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    return tools.dump();
  };
  JobRequest job = WeatherJob();
  Chat(job).options.max_tokens = 2;
  for (const auto& [strict, loose] : {std::pair{1, 80}, {63, 10}, {64, 0}}) {
    Chat(job).tools = Tools(tools_with(strict, loose));
    Reply r = Run(job);
    EXPECT_TRUE(r.error.empty()) << strict << " + " << loose << ": " << r.error;
    EXPECT_TRUE(r.done);
  }
  // 64 strict ones leave no room for the non-strict ones' alternative (the matcher would
  // drop it, and with it every call to them); 65 strict ones are too many alone.
  for (const auto& [strict, loose] : {std::pair{64, 1}, {65, 0}}) {
    Chat(job).tools = Tools(tools_with(strict, loose));
    Reply r = Run(job);
    EXPECT_NE(r.error.find("at most 64 functions"), std::string::npos)
        << strict << " + " << loose << ": " << r.error;
  }
}

// A non-strict function whose schema compiles is guided by it (here: an integer 1-3), and
// schemas with local references ($defs, as Pydantic writes them) keep them when embedded in
// the call's schema, for a strict function too.
TEST_F(StrictAutoBareJson, NonStrictSchemasThatCompileGuideTheirCalls) {
  ASSERT_NE(model_, nullptr);
  json tools = json::parse(kStrictWeather);
  tools[0]["function"]["parameters"] = json::parse(R"({"$defs": {"city": {"type": "string",
      "maxLength": 20}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "type": "object", "properties": {"city": {"$ref": "#/$defs/city"},
      "days": {"$ref": "#/$defs/days"}}, "required": ["city", "days"],
      "additionalProperties": false})");
  tools.push_back(json::parse(R"({"type": "function", "function": {"name": "pick",
    "parameters": {"$defs": {"n": {"type": "integer", "minimum": 1, "maximum": 3}},
      "type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "required": ["n"],
      "additionalProperties": false}}})"));
  std::set<std::string> called;
  for (int64_t seed = 1; seed <= 8; ++seed) {
    JobRequest job = OpenedCallJob(seed);
    Chat(job).tools = Tools(tools.dump());
    Reply r = Run(job);
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(r.finish, FinishReason::kToolCalls) << r.content;
    ASSERT_EQ(r.calls.size(), 1u) << r.content;
    called.insert(r.calls[0].name);
    if (r.calls[0].name == "get_weather") {
      ExpectWeatherArguments(r.calls[0].arguments);
    } else {
      ASSERT_EQ(r.calls[0].name, "pick");
      const json args = json::parse(r.calls[0].arguments, nullptr, false);
      ASSERT_TRUE(args.is_object() && args.size() == 1 && args.contains("n")) << args.dump();
      ASSERT_TRUE(args["n"].is_number_integer()) << args.dump();
      EXPECT_GE(args["n"].get<int64_t>(), 1);
      EXPECT_LE(args["n"].get<int64_t>(), 3);
    }
  }
  EXPECT_EQ(called, (std::set<std::string>{"get_weather", "pick"}));
  JobRequest job = OpenedCallJob(1);
  Chat(job).tools = Tools(tools.dump());
  Chat(job).tool_choice = Choice("required");
  Reply r = Run(job);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.finish, FinishReason::kToolCalls) << r.content;
}

TEST_F(StrictAutoBareJson, AReplyThatBeginsAsTextStaysText) {
  ASSERT_NE(model_, nullptr);
  JobRequest job = WeatherJob();
  Chat(job).options.max_tokens = 6;
  Chat(job).options.sampling.temperature = 0;
  Reply r = Run(job);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(r.done);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_NE(r.finish, FinishReason::kToolCalls);
  EXPECT_FALSE(r.content.empty());
}

// Qwen3.5's XML calls: forced ("required" or a named function) and strict under auto, on a
// model with Qwen3.5's own chat template (../shared) over the Qwen2.5 tokenizer (the same
// <tool_call> token). The call's name and parameters are constrained; the reply parser reads
// each parameter as its declared type, so the arguments validate.
class XmlToolCalls : public SyntheticModelTest<XmlToolCalls> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    SyntheticModelSpec spec;
    spec.family = ModelFamily::kQwen2;
    spec.vocab = 151936;
    model_ = OpenSynthetic(
        *dir_, spec, "Qwen2.5-1.5B-Instruct",
        test::ReadFile(test::SharedDir() + "/tokenizers/Qwen3.5-4B/chat_template.jinja"));
  }
  static JobRequest Job(const std::string& tool_choice, int64_t seed) {
    JobRequest job;
    job.job_id = 1;
    job.payload = ChatPayload{};
    job.model = "m";
    Chat(job).messages = {
        ChatMessage{"user", "What is the weather and the time in Paris?", "", "", ""}};
    Chat(job).tools = Tools(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object",
                     "properties": {"city": {"type": "string", "maxLength": 20},
                                    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                     "required": ["city", "days"]}}},
      {"type": "function", "function": {"name": "get_time", "strict": true,
      "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET", "1"]},
                                                      "exact": {"type": "boolean"}},
                     "required": ["zone", "exact"]}}}])");
    Chat(job).tool_choice = Choice(tool_choice);
    Chat(job).options.max_tokens = 120;
    Chat(job).options.sampling.temperature = 0.8;
    Chat(job).options.sampling.seed = seed;
    return job;
  }
  static void ExpectTimeArguments(const std::string& arguments) {
    const json args = json::parse(arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << arguments;
    EXPECT_EQ(args.size(), 2u) << args.dump();
    ASSERT_TRUE(args.contains("zone") && args["zone"].is_string()) << args.dump();
    const std::string zone = args["zone"].get<std::string>();
    EXPECT_TRUE(zone == "UTC" || zone == "CET" || zone == "1") << zone;
    EXPECT_TRUE(args.contains("exact") && args["exact"].is_boolean()) << args.dump();
  }
};

TEST_F(XmlToolCalls, RequiredAndNamedCallsFollowTheSchemas) {
  ASSERT_NE(model_, nullptr);
  ASSERT_EQ(model_->tool_call_syntax().syntax, ToolCallSyntax::kQwen3Xml);
  std::set<std::string> names;
  for (const std::string choice : {"required", "get_weather", "get_time"}) {
    for (int64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(choice + " seed " + std::to_string(seed));
      Reply r = Run(Job(choice, seed));
      ASSERT_TRUE(r.error.empty()) << r.error;
      ASSERT_TRUE(r.done);
      EXPECT_EQ(r.finish, FinishReason::kToolCalls) << r.content;
      EXPECT_EQ(r.content, "");
      ASSERT_EQ(r.calls.size(), 1u) << r.content;
      if (choice != "required") {
        EXPECT_EQ(r.calls[0].name, choice);
      }
      names.insert(r.calls[0].name);
      if (r.calls[0].name == "get_weather") {
        ExpectWeatherArguments(r.calls[0].arguments);
      } else {
        ASSERT_EQ(r.calls[0].name, "get_time");
        ExpectTimeArguments(r.calls[0].arguments);
      }
    }
  }
  EXPECT_EQ(names.size(), 2u);
}

TEST_F(XmlToolCalls, AStrictCallTheModelOpensFollowsTheSchemas) {
  ASSERT_NE(model_, nullptr);
  const std::optional<int32_t> open = model_->tokenizer().TokenToId("<tool_call>");
  ASSERT_TRUE(open.has_value());
  for (int64_t seed : {1, 2}) {
    JobRequest job = Job("auto", seed);
    Chat(job).options.logit_bias = {{*open, 100.0}};
    Reply r = Run(job);
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.finish, FinishReason::kToolCalls) << r.content;
    ASSERT_EQ(r.calls.size(), 1u) << r.content;
    if (r.calls[0].name == "get_weather") {
      ExpectWeatherArguments(r.calls[0].arguments);
    } else {
      ASSERT_EQ(r.calls[0].name, "get_time");
      ExpectTimeArguments(r.calls[0].arguments);
    }
  }
}

TEST_F(XmlToolCalls, ParametersTheFormatCannotWriteAreA400NamingThem) {
  ASSERT_NE(model_, nullptr);
  JobRequest job = Job("required", 1);
  Chat(job).tools =
      Tools(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"x": {"type": ["string", "integer"]}}}}}])");
  Reply r = Run(job);
  EXPECT_NE(r.error.find("parameter 'x'"), std::string::npos) << r.error;
  EXPECT_FALSE(r.done);
  // Under auto only the strict function's schema must be followed: the non-strict one whose
  // parameter the format cannot write takes its parameters as text, and the job runs.
  job = Job("auto", 1);
  json tools = json::array();
  for (const ToolDefinition& t : Chat(job).tools) tools.push_back(json::parse(t.definition));
  tools[0]["function"]["parameters"]["properties"]["days"] = {
      {"type", json::array({"string", "integer"})}};
  Chat(job).tools = Tools(tools.dump());
  Chat(job).options.max_tokens = 4;
  r = Run(job);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_TRUE(r.done);
  tools[1]["function"]["parameters"]["properties"]["zone"] = {
      {"type", json::array({"string", "integer"})}};
  Chat(job).tools = Tools(tools.dump());
  r = Run(job);  // the strict one's cannot be relaxed
  EXPECT_NE(r.error.find("parameter 'zone'"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace tessera::worker
