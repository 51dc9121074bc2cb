// GenerationJob with strict tools under tool_choice auto on a model whose chat template teaches
// calls as a bare JSON object (the Llama 3 form): the reply's first token decides between a
// call, constrained to the functions' schemas to its end, and text, in which no call is parsed.
// The model: random weights on the real Llama 3 tokenizer, with a Llama-3.x-like tool
// template (tests/chat/testdata/tool_renders.json's llama_style).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/tokenizer_vocabulary.h"
#include "model/synthetic_checkpoint.h"
#include "runtime/loaded_model.h"
#include "server/generation_job.h"
#include "server/worker_protocol.h"
#include "test_support.h"

namespace tessera::server {
namespace {

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

class StrictAutoBareJson : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    const std::string tokenizers = test::SharedDir() + "/tokenizers/Meta-Llama-3-8B";
    SyntheticModelSpec spec;
    spec.family = ModelFamily::kLlama;
    spec.hidden = 64;
    spec.intermediate = 96;
    spec.layers = 2;
    spec.heads = 4;
    spec.kv_heads = 2;
    spec.head_dim = 16;
    spec.vocab = 128256;
    spec.max_position = 512;
    ASSERT_TRUE(WriteSyntheticCheckpoint(dir_->path(), spec).ok());
    std::filesystem::copy_file(tokenizers + "/tokenizer.json", dir_->File("tokenizer.json"));
    json config = json::parse(test::ReadFile(tokenizers + "/tokenizer_config.json"));
    config["chat_template"] = kLlamaStyleTemplate;
    test::WriteFile(dir_->File("tokenizer_config.json"), config.dump());
    ModelLoadOptions o;
    o.parallel = 2;
    o.package_cache = false;
    auto m = LoadedModel::Open(dir_->path(), o);
    ASSERT_TRUE(m) << m.status().message();
    model_ = m->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  // Runs one chat job to its end on the model's scheduler.
  static Reply Run(const JobRequest& job) {
    Reply reply;
    auto vocabulary = []() -> Expected<std::shared_ptr<const TokenVocabulary>> {
      if (!vocabulary_) {
        auto v = VocabularyFromTokenizer(model_->tokenizer(), model_->stop_ids());
        if (!v) return v.status();
        vocabulary_ = *v;
      }
      return vocabulary_;
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
    auto started = GenerationJob::Start(job, *model_, vocabulary, 0, send, [](uint64_t) {});
    if (auto* failure = std::get_if<JobFailure>(&started)) {
      reply.error = failure->message;
      return reply;
    }
    std::unique_ptr<GenerationJob> running = std::move(std::get<0>(started));
    for (int steps = 0; model_->scheduler().HasWork() && steps < 1000; ++steps) {
      EXPECT_TRUE(model_->scheduler().Step().ok());
    }
    return reply;
  }

  static JobRequest WeatherJob() {
    JobRequest job;
    job.job_id = 1;
    job.kind = JobKind::kChat;
    job.model = "m";
    job.messages = {ChatMessage{"user", "What is the weather in Paris?", "", "", ""}};
    job.tools = kStrictWeather;
    job.tool_choice = "auto";
    job.max_tokens = 80;
    return job;
  }

  static test::TempDir* dir_;
  static LoadedModel* model_;
  static std::shared_ptr<const TokenVocabulary> vocabulary_;
};

test::TempDir* StrictAutoBareJson::dir_ = nullptr;
LoadedModel* StrictAutoBareJson::model_ = nullptr;
std::shared_ptr<const TokenVocabulary> StrictAutoBareJson::vocabulary_;

TEST_F(StrictAutoBareJson, ACallTheModelOpensFollowsTheSchema) {
  ASSERT_NE(model_, nullptr);
  ASSERT_EQ(model_->assembler()->config().tool_call_syntax, ToolCallSyntax::kLlama3Json);
  // Random weights never open a call by themselves: logit_bias makes "{" the first choice,
  // and from there the grammar writes the call.
  const std::optional<int32_t> brace = model_->tokenizer().TokenToId("{");
  ASSERT_TRUE(brace.has_value());
  for (int64_t seed : {1, 2, 3}) {
    JobRequest job = WeatherJob();
    job.logit_bias = {{*brace, 100.0}};
    job.sampling.temperature = 0.8;
    job.sampling.seed = seed;
    Reply r = Run(job);
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.finish, FinishReason::kToolCalls) << r.content;
    ASSERT_EQ(r.calls.size(), 1u) << r.content;
    EXPECT_EQ(r.calls[0].name, "get_weather");
    const json args = json::parse(r.calls[0].arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << r.calls[0].arguments;
    EXPECT_EQ(args.size(), 2u) << args.dump();
    ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << args.dump();
    EXPECT_LE(args["city"].get<std::string>().size(), 20u) << args.dump();
    ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << args.dump();
    EXPECT_GE(args["days"].get<int64_t>(), 1);
    EXPECT_LE(args["days"].get<int64_t>(), 7);
  }
}

TEST_F(StrictAutoBareJson, AReplyThatBeginsAsTextStaysText) {
  ASSERT_NE(model_, nullptr);
  JobRequest job = WeatherJob();
  job.max_tokens = 6;
  job.sampling.temperature = 0;
  Reply r = Run(job);
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_TRUE(r.done);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_NE(r.finish, FinishReason::kToolCalls);
  EXPECT_FALSE(r.content.empty());
}

}  // namespace
}  // namespace tessera::server
