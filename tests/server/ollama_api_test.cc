// Ollama's /api/* parsers and wire: options mapped onto tessera's sampling, every refusal
// naming its field, and the NDJSON lines (one object per line, the last with done: true and
// the durations in nanoseconds).
#include "server/ollama_api.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;
using nlohmann::json;

// Served: "chat" (a chat model), "story" (a completion model), "emb" (an embedding model).
std::optional<ModelKind> Kinds(const std::string& name) {
  if (name == "chat") return ModelKind::kChat;
  if (name == "story") return ModelKind::kCompletion;
  if (name == "emb") return ModelKind::kEmbed;
  return std::nullopt;
}

const GenerationDefaults kDefaults{"chat", "chat"};

std::variant<ParsedGeneration, ApiError> Chat(const ojson& body) {
  return ParseOllamaChat(body, kDefaults, Kinds);
}
std::variant<ParsedGeneration, ApiError> Generate(const ojson& body) {
  return ParseOllamaGenerate(body, kDefaults, Kinds);
}

ojson Hello() {
  return {{"model", "chat"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
}

// The error's param, or "" when the body was accepted.
template <class T>
std::string Refused(const std::variant<T, ApiError>& r) {
  const ApiError* e = std::get_if<ApiError>(&r);
  if (e == nullptr) return "";
  EXPECT_EQ(e->status, 400);
  EXPECT_GT(e->message.size(), 20u) << e->message;
  return e->param;
}

TEST(OllamaApi, ChatMapsOptionsOntoSampling) {
  ojson body = Hello();
  body["options"] = {{"temperature", 0.4},
                     {"top_p", 0.9},
                     {"top_k", 7},
                     {"min_p", 0.05},
                     {"seed", 42},
                     {"num_predict", 12},
                     {"stop", {"END"}},
                     {"repeat_penalty", 1.1},
                     {"presence_penalty", 0.5},
                     {"frequency_penalty", 0.25}};
  auto r = Chat(body);
  ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r)) << std::get<ApiError>(r).message;
  const ParsedGeneration& p = std::get<ParsedGeneration>(r);
  EXPECT_TRUE(p.request.stream);  // Ollama streams by default
  const worker::GenerationOptions& o = p.request.options();
  EXPECT_EQ(o.sampling.temperature, 0.4);
  EXPECT_EQ(o.sampling.top_p, 0.9);
  EXPECT_EQ(o.sampling.top_k, 7);
  EXPECT_EQ(o.sampling.min_p, 0.05);
  EXPECT_EQ(o.sampling.seed, 42);
  EXPECT_EQ(o.sampling.repetition_penalty, 1.1);
  EXPECT_EQ(o.sampling.presence_penalty, 0.5);
  EXPECT_EQ(o.sampling.frequency_penalty, 0.25);
  EXPECT_EQ(o.max_tokens, 12);
  EXPECT_EQ(o.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(p.wire->stream_content_type(), "application/x-ndjson");
}

TEST(OllamaApi, NumPredictMinusOneAndTwoMeanNoLimit) {
  for (int n : {-1, -2}) {
    ojson body = Hello();
    body["options"] = {{"num_predict", n}};
    auto r = Chat(body);
    ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r));
    EXPECT_EQ(std::get<ParsedGeneration>(r).request.options().max_tokens, -1);
  }
  for (int n : {0, -3}) {
    ojson body = Hello();
    body["options"] = {{"num_predict", n}};
    EXPECT_EQ(Refused(Chat(body)), "options.num_predict");
  }
}

TEST(OllamaApi, UnknownAndUnsupportedOptionsAreRefusedByName) {
  for (const char* option : {"num_ctx", "num_thread", "mirostat", "typical_p", "repeat_last_n",
                             "penalize_newline", "no_such_option"}) {
    ojson body = Hello();
    body["options"] = {{option, 1}};
    auto r = Chat(body);
    EXPECT_EQ(Refused(r), std::string("options.") + option);
    EXPECT_NE(std::get<ApiError>(r).message.find(option), std::string::npos);
  }
  ojson body = Hello();
  body["options"] = {{"num_ctx", 4096}};
  EXPECT_NE(std::get<ApiError>(Chat(body)).message.find("--context"), std::string::npos);
}

TEST(OllamaApi, OutOfRangeSamplingNamesOllamasOption) {
  ojson body = Hello();
  body["options"] = {{"repeat_penalty", -1}};
  EXPECT_EQ(Refused(Chat(body)), "options.repeat_penalty");
  body["options"] = {{"top_p", 0}};
  EXPECT_EQ(Refused(Chat(body)), "options.top_p");
  body["options"] = {{"temperature", "hot"}};
  EXPECT_EQ(Refused(Chat(body)), "options.temperature");
  body["options"] = {{"stop", {1}}};
  EXPECT_EQ(Refused(Chat(body)), "options.stop");
}

TEST(OllamaApi, ThinkIsTheChatTemplatesThinkingSwitch) {
  for (bool think : {true, false}) {
    ojson body = Hello();
    body["think"] = think;
    auto r = Chat(body);
    ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r)) << std::get<ApiError>(r).message;
    const auto& chat =
        std::get<worker::ChatPayload>(std::get<ParsedGeneration>(r).request.job.payload);
    EXPECT_EQ(chat.enable_thinking, std::optional<bool>(think));
    auto g = Generate({{"model", "chat"}, {"prompt", "Hi"}, {"think", think}});
    ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(g)) << std::get<ApiError>(g).message;
    EXPECT_EQ(std::get<worker::ChatPayload>(std::get<ParsedGeneration>(g).request.job.payload)
                  .enable_thinking,
              std::optional<bool>(think));
  }
  EXPECT_FALSE(
      std::get<worker::ChatPayload>(std::get<ParsedGeneration>(Chat(Hello())).request.job.payload)
          .enable_thinking.has_value());
  // Without the chat template there is no switch to set.
  EXPECT_EQ(
      Refused(Generate({{"model", "chat"}, {"prompt", "Hi"}, {"raw", true}, {"think", true}})),
      "think");
  EXPECT_EQ(Refused(Generate({{"model", "story"}, {"prompt", "Hi"}, {"think", false}})), "think");
}

TEST(OllamaApi, UnsupportedFieldsAreRefusedByName) {
  struct Case {
    const char* field;
    ojson value;
  };
  for (const Case& c : {Case{"think", "high"}, Case{"truncate", true}, Case{"shift", true},
                        Case{"keep_alive", ojson::array()}, Case{"format", "yaml"},
                        Case{"stream", "yes"}, Case{"n", 2}, Case{"tool_choice", "required"}}) {
    ojson body = Hello();
    body[c.field] = c.value;
    EXPECT_EQ(Refused(Chat(body)), c.field) << c.field;
  }
  // keep_alive is accepted (models stay loaded), as a duration or seconds.
  for (ojson keep : {ojson("5m"), ojson(-1), ojson(0)}) {
    ojson body = Hello();
    body["keep_alive"] = keep;
    EXPECT_EQ(Refused(Chat(body)), "");
  }
}

TEST(OllamaApi, MessagesToolCallsImagesAndTools) {
  ojson body = {
      {"model", "chat:latest"},
      {"stream", false},
      {"messages",
       {{{"role", "USER"}, {"content", "weather?"}},
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls",
          {{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Oslo"}}}}}}}}},
        {{"role", "tool"}, {"content", "cold"}, {"tool_name", "get_weather"}}}},
      {"tools",
       {{{"type", "function"},
         {"function",
          {{"name", "get_weather"},
           {"description", "Weather"},
           {"parameters",
            {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}}}};
  auto r = Chat(body);
  ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r)) << std::get<ApiError>(r).message;
  const ParsedGeneration& p = std::get<ParsedGeneration>(r);
  EXPECT_EQ(p.request.job.model, "chat");  // ":latest" is the served name
  EXPECT_FALSE(p.request.stream);
  const auto& chat = std::get<worker::ChatPayload>(p.request.job.payload);
  ASSERT_EQ(chat.messages.size(), 3u);
  EXPECT_EQ(chat.messages[0].role, "user");
  const json calls = json::parse(chat.messages[1].tool_calls);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"]["city"], "Oslo");  // an object, as Ollama's
  EXPECT_EQ(chat.messages[2].name, "get_weather");
  ASSERT_EQ(chat.tools.size(), 1u);
  EXPECT_EQ(chat.tool_choice.mode, worker::ToolChoiceMode::kAuto);

  ojson image = Hello();
  image["messages"][0]["images"] = {"aGVsbG8="};
  EXPECT_EQ(Refused(Chat(image)), "messages[0].images");
  ojson thinking = Hello();
  thinking["messages"][0]["thinking"] = "hmm";
  EXPECT_EQ(Refused(Chat(thinking)), "messages[0].thinking");
  ojson role = Hello();
  role["messages"][0]["role"] = "robot";
  EXPECT_EQ(Refused(Chat(role)), "messages[0].role");
  ojson args = Hello();
  args["messages"][0] = {{"role", "assistant"},
                         {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{}"}}}}}}};
  EXPECT_EQ(Refused(Chat(args)), "messages[0].tool_calls[0]");
  ojson empty = Hello();
  empty["messages"] = ojson::array();
  EXPECT_EQ(Refused(Chat(empty)), "messages");
  ojson both = body;
  both["format"] = "json";
  EXPECT_EQ(Refused(Chat(both)), "format");
}

TEST(OllamaApi, FormatJsonAndSchema) {
  ojson body = Hello();
  body["format"] = "json";
  auto r = Chat(body);
  ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r));
  EXPECT_EQ(std::get<ParsedGeneration>(r).request.options().response_format.kind,
            worker::ResponseFormatKind::kJsonObject);
  body["format"] = {
      {"type", "object"}, {"properties", {{"age", {{"type", "integer"}}}}}, {"required", {"age"}}};
  r = Chat(body);
  ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r)) << std::get<ApiError>(r).message;
  EXPECT_EQ(std::get<ParsedGeneration>(r).request.options().response_format.kind,
            worker::ResponseFormatKind::kJsonSchema);
  body["format"] = {{"type", "string"}, {"format", "email"}};  // a keyword tessera cannot enforce
  EXPECT_EQ(Refused(Chat(body)), "format");
}

TEST(OllamaApi, GenerateUsesTheTemplateUnlessRawOrACompletionModel) {
  auto r = Generate({{"model", "chat"}, {"prompt", "Hi"}, {"system", "Be brief"}});
  ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r)) << std::get<ApiError>(r).message;
  const auto& chat =
      std::get<worker::ChatPayload>(std::get<ParsedGeneration>(r).request.job.payload);
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[1].content, "Hi");

  r = Generate({{"model", "chat"}, {"prompt", "Once"}, {"raw", true}, {"options", {{"seed", 1}}}});
  ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r));
  const auto& raw =
      std::get<worker::CompletionPayload>(std::get<ParsedGeneration>(r).request.job.payload);
  EXPECT_EQ(raw.prompt, "Once");
  EXPECT_EQ(raw.options.sampling.seed, 1);

  r = Generate({{"model", "story"}, {"prompt", "Once"}});
  ASSERT_TRUE(std::holds_alternative<ParsedGeneration>(r));
  EXPECT_TRUE(std::holds_alternative<worker::CompletionPayload>(
      std::get<ParsedGeneration>(r).request.job.payload));

  EXPECT_EQ(Refused(Generate({{"model", "story"}, {"prompt", "a"}, {"system", "s"}})), "system");
  EXPECT_EQ(Refused(Generate({{"model", "chat"}, {"prompt", "a"}, {"raw", true}, {"system", "s"}})),
            "system");
  EXPECT_EQ(Refused(Generate({{"model", "chat"}})), "prompt");
  for (const char* field : {"template", "suffix", "context", "images"}) {
    ojson body = {{"model", "chat"}, {"prompt", "a"}};
    body[field] = std::string(field) == "context" || std::string(field) == "images"
                      ? ojson::array({1})
                      : ojson("x");
    EXPECT_EQ(Refused(Generate(body)), field);
  }
  // Go's omitempty: empty values are absent.
  EXPECT_EQ(Refused(Generate({{"model", "chat"},
                              {"prompt", "a"},
                              {"template", ""},
                              {"context", ojson::array()},
                              {"images", ojson::array()}})),
            "");
  // A field /api/generate does not have is refused even when empty.
  EXPECT_EQ(Refused(Generate({{"model", "chat"}, {"prompt", "a"}, {"tools", ojson::array()}})),
            "tools");
}

TEST(OllamaApi, EmbedBodies) {
  auto r =
      ParseOllamaEmbed({{"model", "emb"}, {"input", {"a", "b"}}, {"dimensions", 32}}, false, Kinds);
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(r)) << std::get<ApiError>(r).message;
  const auto& embed = std::get<worker::EmbedPayload>(std::get<TaskRequest>(r).job.payload);
  EXPECT_EQ(embed.inputs.texts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(embed.dimensions, 32);
  r = ParseOllamaEmbed({{"model", "emb:latest"}, {"prompt", "a"}}, true, Kinds);
  ASSERT_TRUE(std::holds_alternative<TaskRequest>(r));
  EXPECT_EQ(std::get<TaskRequest>(r).job.model, "emb");
  EXPECT_EQ(Refused(ParseOllamaEmbed({{"input", {1, 2}}}, false, Kinds)), "input");
  EXPECT_EQ(Refused(ParseOllamaEmbed({{"input", "a"}, {"truncate", true}}, false, Kinds)),
            "truncate");
  EXPECT_EQ(
      Refused(ParseOllamaEmbed({{"input", "a"}, {"options", {{"num_ctx", 8}}}}, false, Kinds)),
      "options.num_ctx");
  EXPECT_EQ(Refused(ParseOllamaEmbed({{"input", "a"}}, true, Kinds)),
            "input");  // not a field there
  EXPECT_EQ(Refused(ParseOllamaEmbed({{"prompt", 3}}, true, Kinds)), "prompt");

  worker::TaskResultMessage result;
  for (const std::vector<float>& values : {std::vector<float>{0.5f, 0.25f}, {1.0f, 0.0f}}) {
    worker::TaskItem item;
    item.index = static_cast<int32_t>(result.items.size());
    item.values = values;
    result.items.push_back(std::move(item));
  }
  result.prompt_tokens = 7;
  result.run_ms = 2;
  result.load_ms = 1;
  TaskRequest request;
  request.job.model = "emb";
  const ojson body = OllamaEmbedBody(request, result, false, 1.5);
  EXPECT_EQ(body["model"], "emb");
  EXPECT_EQ(body["embeddings"].size(), 2u);
  EXPECT_EQ(body["embeddings"][0][1], 0.25);
  EXPECT_EQ(body["prompt_eval_count"], 7);
  EXPECT_EQ(body["total_duration"], 4500000);
  EXPECT_EQ(body["load_duration"], 1000000);
  EXPECT_EQ(OllamaEmbedBody(request, result, true, 0).dump(), R"({"embedding":[0.5,0.25]})");
}

std::vector<json> Lines(const std::string& ndjson) {
  std::vector<json> out;
  EXPECT_TRUE(ndjson.empty() || ndjson.back() == '\n') << ndjson;
  std::istringstream in(ndjson);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

JobOutcome Finished(int64_t prompt, int64_t completion, worker::FinishReason reason) {
  JobOutcome outcome;
  outcome.started = worker::StartedMessage{};
  worker::DoneMessage done;
  done.prompt_tokens = prompt;
  done.completion_tokens = completion;
  done.finish_reason = reason;
  done.choice_finish_reasons = {reason};
  done.load_ms = 3;
  done.prefill_ms = 1.25;
  done.decode_ms = 10;
  outcome.done = done;
  outcome.elapsed_ms_seen = 12;
  return outcome;
}

TEST(OllamaWire, ChatStreamIsOneObjectPerLineEndingDone) {
  auto wire = MakeOllamaWire(true);
  ResponseMeta meta;
  meta.model = "chat";
  meta.queue_ms = 0.5;
  JobOutcome outcome = Finished(5, 2, worker::FinishReason::kLength);
  std::string stream = wire->StreamBegin(meta, outcome);
  worker::DeltaMessage a;
  a.text = "Hel";
  stream += wire->StreamDelta(meta, a);
  worker::DeltaMessage empty;
  stream += wire->StreamDelta(meta, empty);  // nothing to say: no line
  a.text = "lo\n";
  stream += wire->StreamDelta(meta, a);
  stream += wire->StreamEnd(meta, outcome, {{"k", 1}});
  const std::vector<json> lines = Lines(stream);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["message"]["content"], "Hel");
  EXPECT_EQ(lines[0]["message"]["role"], "assistant");
  EXPECT_EQ(lines[0]["done"], false);
  EXPECT_EQ(lines[0]["model"], "chat");
  EXPECT_EQ(lines[1]["message"]["content"], "lo\n");  // a newline in text stays escaped
  const json& last = lines[2];
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["done_reason"], "length");
  EXPECT_EQ(last["message"]["content"], "");
  EXPECT_EQ(last["prompt_eval_count"], 5);
  EXPECT_EQ(last["eval_count"], 2);
  EXPECT_EQ(last["load_duration"], 3000000);
  EXPECT_EQ(last["prompt_eval_duration"], 1250000);
  EXPECT_EQ(last["eval_duration"], 10000000);
  EXPECT_EQ(last["total_duration"], 12500000);
  EXPECT_EQ(last["x_tessera_stats"]["k"], 1);
  const std::string created = last["created_at"];
  EXPECT_EQ(created.size(), 27u) << created;  // 2026-12-07T19:22:45.499127Z
  EXPECT_EQ(created.back(), 'Z');
}

TEST(OllamaWire, ToolCallsArriveWholeWithObjectArguments) {
  auto wire = MakeOllamaWire(true);
  ResponseMeta meta;
  meta.model = "chat";
  worker::DeltaMessage first;
  first.tool_calls = {{.index = 0, .id = "call_1", .name = "get_weather", .arguments = "{\"ci"}};
  worker::DeltaMessage rest;
  rest.tool_calls = {{.index = 0, .id = "", .name = "", .arguments = "ty\":\"Oslo\"}"}};
  std::string stream = wire->StreamDelta(meta, first);
  stream += wire->StreamDelta(meta, rest);
  EXPECT_EQ(stream, "");  // fragments wait for the whole call
  JobOutcome outcome = Finished(5, 9, worker::FinishReason::kToolCalls);
  stream += wire->StreamEnd(meta, outcome, json::object());
  const std::vector<json> lines = Lines(stream);
  ASSERT_EQ(lines.size(), 2u);
  const json& call = lines[0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["id"], "call_1");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], json({{"city", "Oslo"}}));
  EXPECT_EQ(lines[1]["done_reason"], "stop");

  // The whole answer (stream: false) carries them too.
  outcome.choices[0].Add(first);
  outcome.choices[0].Add(rest);
  const json body = MakeOllamaWire(true)->Body(meta, outcome, json::object());
  EXPECT_EQ(body["message"]["tool_calls"][0]["function"]["arguments"]["city"], "Oslo");
  EXPECT_EQ(body["done"], true);
}

TEST(OllamaWire, GenerateShapeAndErrorLine) {
  auto wire = MakeOllamaWire(false);
  ResponseMeta meta;
  meta.model = "story";
  worker::DeltaMessage d;
  d.text = "Once";
  const std::vector<json> lines = Lines(wire->StreamDelta(meta, d));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["response"], "Once");
  EXPECT_FALSE(lines[0].contains("message"));
  const json body = wire->Body(meta, Finished(3, 1, worker::FinishReason::kStop), json::object());
  EXPECT_EQ(body["response"], "");
  EXPECT_EQ(body["done_reason"], "stop");
  const std::vector<json> error =
      Lines(wire->StreamError({{"error", "worker lost"}}, JobOutcome{}));
  EXPECT_FALSE(wire->errors_carry_usage());
  ASSERT_EQ(error.size(), 1u);
  EXPECT_EQ(error[0]["error"], "worker lost");
}

TEST(OllamaWire, LogprobsInOllamasShape) {
  auto wire = MakeOllamaWire(true);
  ResponseMeta meta;
  meta.model = "chat";
  meta.logprobs = true;
  worker::DeltaMessage d;
  d.text = "Hi";
  worker::TokenLogprobEntry entry;
  entry.token = "Hi";
  entry.logprob = -0.5f;
  entry.top = {worker::TopLogprob{"Hi", -0.5f}, worker::TopLogprob{"Yo", -1.5f}};
  d.logprobs = {entry};
  const std::vector<json> lines = Lines(wire->StreamDelta(meta, d));
  ASSERT_EQ(lines.size(), 1u);
  const json& lp = lines[0]["logprobs"];
  ASSERT_EQ(lp.size(), 1u);
  EXPECT_EQ(lp[0]["token"], "Hi");
  EXPECT_EQ(lp[0]["logprob"], -0.5);
  EXPECT_EQ(lp[0]["top_logprobs"][1]["token"], "Yo");
  meta.logprobs = false;
  EXPECT_FALSE(Lines(wire->StreamDelta(meta, d))[0].contains("logprobs"));
}

TEST(OllamaModels, ParameterSizeAsOllamaPrintsIt) {
  EXPECT_EQ(OllamaParameterSize(0), "");
  EXPECT_EQ(OllamaParameterSize(134515008), "134.52M");
  EXPECT_EQ(OllamaParameterSize(2000000), "2M");
  EXPECT_EQ(OllamaParameterSize(1543714304), "1.5B");
  EXPECT_EQ(OllamaParameterSize(8000000000), "8B");
  EXPECT_EQ(OllamaParameterSize(4096), "4K");
  EXPECT_EQ(OllamaParameterSize(12), "12");
}

TEST(OllamaModels, TimestampIsRfc3339Utc) {
  EXPECT_EQ(
      OllamaTimestamp(std::chrono::system_clock::from_time_t(0) + std::chrono::microseconds(1500)),
      "1970-01-01T00:00:00.001500Z");
}

}  // namespace
}  // namespace tessera::server
