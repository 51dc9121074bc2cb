#include "worker/protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tessera::worker {
namespace {

ChatPayload FullChat() {
  ChatPayload chat;
  chat.messages = {{"system", "be brief", "", "", ""},
                   {"user", "hi \xe2\x82\xac", "", "", ""},
                   {"assistant", "", "[{\"id\":\"c\"}]", "", ""},
                   {"tool", "42", "", "call_1", "f"}};
  chat.tools = {{"get_weather", true, R"({"type":"function","function":{"name":"get_weather"}})"}};
  chat.tool_choice = {ToolChoiceMode::kFunction, "get_weather"};
  GenerationOptions& o = chat.options;
  o.max_tokens = 17;
  o.stop = {"\n\n", "END"};
  o.sampling.temperature = 0.7;
  o.sampling.top_k = 40;
  o.sampling.seed = 1234;
  o.logprobs = true;
  o.top_logprobs = 5;
  o.n = 3;
  o.logit_bias = {{151657, 100.0}, {3, -2.5}};
  o.response_format.kind = ResponseFormatKind::kDecision;
  o.response_format.options = {{"\"yes\"", "yes", "it is"}, {"true", "true", ""}};
  o.response_format.property = "answer";
  o.response_format.question = "Is it?";
  chat.enable_thinking = false;
  return chat;
}

TEST(WorkerProtocol, ChatJobRoundTripsEveryField) {
  JobRequest job{0x0102030405060708ull, "tiny", FullChat()};
  auto got = Decode<JobRequest>(Encode(job));
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(got->job_id, job.job_id);
  EXPECT_EQ(got->model, "tiny");
  const auto* chat = std::get_if<ChatPayload>(&got->payload);
  ASSERT_NE(chat, nullptr);
  ASSERT_EQ(chat->messages.size(), 4u);
  EXPECT_EQ(chat->messages[1].content, "hi \xe2\x82\xac");
  EXPECT_EQ(chat->messages[2].tool_calls, "[{\"id\":\"c\"}]");
  EXPECT_EQ(chat->messages[3].tool_call_id, "call_1");
  EXPECT_EQ(chat->messages[3].name, "f");
  ASSERT_EQ(chat->tools.size(), 1u);
  EXPECT_EQ(chat->tools[0].name, "get_weather");
  EXPECT_TRUE(chat->tools[0].strict);
  EXPECT_EQ(chat->tools[0].definition, FullChat().tools[0].definition);
  EXPECT_EQ(chat->tool_choice.mode, ToolChoiceMode::kFunction);
  EXPECT_EQ(chat->tool_choice.function, "get_weather");
  const GenerationOptions& o = chat->options;
  EXPECT_EQ(o.n, 3);
  EXPECT_EQ(o.logit_bias, FullChat().options.logit_bias);
  EXPECT_EQ(o.max_tokens, 17);
  EXPECT_EQ(o.stop, FullChat().options.stop);
  EXPECT_EQ(o.sampling.temperature, 0.7);
  EXPECT_EQ(o.sampling.top_k, 40);
  EXPECT_FALSE(o.sampling.top_p.has_value());
  EXPECT_EQ(o.sampling.seed, 1234);
  EXPECT_TRUE(o.logprobs);
  EXPECT_EQ(o.top_logprobs, 5);
  EXPECT_EQ(o.response_format.kind, ResponseFormatKind::kDecision);
  ASSERT_EQ(o.response_format.options.size(), 2u);
  EXPECT_EQ(o.response_format.options[0].value, "\"yes\"");
  EXPECT_EQ(o.response_format.options[0].text, "yes");
  EXPECT_EQ(o.response_format.options[0].description, "it is");
  EXPECT_EQ(o.response_format.property, "answer");
  EXPECT_EQ(o.response_format.question, "Is it?");
  EXPECT_EQ(chat->enable_thinking, std::optional<bool>(false));
  // Unset (the model's default) stays unset.
  JobRequest plain{1, "tiny", ChatPayload{}};
  auto got_plain = Decode<JobRequest>(Encode(plain));
  ASSERT_TRUE(got_plain);
  EXPECT_FALSE(std::get<ChatPayload>(got_plain->payload).enable_thinking.has_value());
}

// Every payload kind comes back as the same kind with the same bytes, and its own fields.
TEST(WorkerProtocol, EveryPayloadKindRoundTrips) {
  CompletionPayload completion{"Once", {}};
  completion.options.response_format = {ResponseFormatKind::kJsonSchema, R"({"type":"object"})"};
  EmbedPayload embed{{{}, {{1, 2}, {3}}, 4096}, "query", 64};
  RerankPayload rerank{"q", {{"d1", "d2"}, {}, 8192}, "find"};
  ClassifyPayload classify{{{"x"}, {}, 0}, 5, false, false};
  ModeratePayload moderate{{{""}, {}, 8192}, {{"user", "hi", "", "", ""}}};
  SystemOnePayload systemone{"state", {{QuestionType::kScore, "how?", {"0", "1"}, {"lo", "hi"}}}};
  const std::vector<JobPayload> payloads = {FullChat(),
                                            completion,
                                            TokenizePayload{"t", false},
                                            DetokenizePayload{{7, 8}},
                                            embed,
                                            rerank,
                                            classify,
                                            moderate,
                                            systemone,
                                            ChatTokenizePayload{FullChat()}};
  ASSERT_EQ(payloads.size(), std::variant_size_v<JobPayload>);
  for (size_t i = 0; i < payloads.size(); ++i) {
    const std::string frame = Encode(JobRequest{i, "m", payloads[i]});
    auto got = Decode<JobRequest>(frame);
    ASSERT_TRUE(got) << i << ": " << got.status().message();
    EXPECT_EQ(got->payload.index(), i);
    EXPECT_EQ(Encode(*got), frame) << JobPayloadName(payloads[i]);
  }
  auto job = [&](size_t i) { return Decode<JobRequest>(Encode(JobRequest{1, "m", payloads[i]})); };
  EXPECT_EQ(std::get<CompletionPayload>(job(1)->payload).options.response_format.schema,
            R"({"type":"object"})");
  EXPECT_FALSE(std::get<TokenizePayload>(job(2)->payload).add_special_tokens);
  EXPECT_EQ(std::get<DetokenizePayload>(job(3)->payload).ids, (std::vector<int32_t>{7, 8}));
  const EmbedPayload e = std::get<EmbedPayload>(job(4)->payload);
  EXPECT_EQ(e.inputs.ids.size(), 2u);
  EXPECT_EQ(e.inputs.max_input_tokens, 4096);
  EXPECT_EQ(e.prompt_name, "query");
  EXPECT_EQ(e.dimensions, 64);
  const RerankPayload r = std::get<RerankPayload>(job(5)->payload);
  EXPECT_EQ(r.query, "q");
  EXPECT_EQ(r.documents.texts, (std::vector<std::string>{"d1", "d2"}));
  EXPECT_EQ(r.instruction, "find");
  const ClassifyPayload c = std::get<ClassifyPayload>(job(6)->payload);
  EXPECT_EQ(c.truncate_prompt_tokens, 5);
  EXPECT_FALSE(c.use_activation);
  EXPECT_FALSE(c.add_special_tokens);
  EXPECT_EQ(std::get<ModeratePayload>(job(7)->payload).messages[0].content, "hi");
  const SystemOnePayload so = std::get<SystemOnePayload>(job(8)->payload);
  EXPECT_EQ(so.state, "state");
  EXPECT_EQ(so.questions[0].type, QuestionType::kScore);
  EXPECT_EQ(so.questions[0].descriptions[1], "hi");
  const ChatTokenizePayload ct = std::get<ChatTokenizePayload>(job(9)->payload);
  EXPECT_EQ(ct.chat.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(ct.chat.tool_choice.function, "get_weather");
}

// The cache scope travels with every job kind (the worker scopes the prefix cache by it); one
// longer than its limits is refused.
TEST(WorkerProtocol, CacheScopeRoundTripsAndIsBounded) {
  JobRequest job{7, "m", EmbedPayload{TaskInputs{{"a"}, {}, 0}, "", 0}};
  job.cache_scope = {"alice", std::string("salt \0 \xe2\x82\xac", 10)};
  auto got = Decode<JobRequest>(Encode(job));
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(got->cache_scope, job.cache_scope);
  EXPECT_EQ(got->cache_scope.salt.size(), 10u);
  EXPECT_TRUE(std::holds_alternative<EmbedPayload>(got->payload));
  // An empty scope (a shared cache) is the default and round-trips as empty.
  got = Decode<JobRequest>(Encode(JobRequest{8, "m", CompletionPayload{"Once"}}));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->cache_scope, CacheScope{});
  job.cache_scope.salt.assign(kMaxCacheSaltBytes, 's');
  EXPECT_TRUE(Decode<JobRequest>(Encode(job)));
  job.cache_scope.salt.push_back('s');
  EXPECT_FALSE(Decode<JobRequest>(Encode(job)));
  job.cache_scope = {std::string(kMaxCacheTenantBytes + 1, 't'), ""};
  EXPECT_FALSE(Decode<JobRequest>(Encode(job)));
}

// A payload index past the alternatives, or a tool_choice that contradicts itself, is refused.
TEST(WorkerProtocol, MalformedPayloadsAreRefused) {
  std::string frame = Encode(JobRequest{1, "m", DetokenizePayload{}});
  const size_t index_at = 1 + 8 + 4 + 1;  // type, job_id, model's count and byte
  ASSERT_EQ(frame[index_at], 3);
  frame[index_at] = static_cast<char>(std::variant_size_v<JobPayload>);
  EXPECT_FALSE(Decode<JobRequest>(frame));
  ChatPayload chat = FullChat();
  chat.tool_choice = {ToolChoiceMode::kFunction, ""};
  EXPECT_FALSE(Decode<JobRequest>(Encode(JobRequest{1, "m", chat})));
  chat.tool_choice = {ToolChoiceMode::kAuto, "f"};
  EXPECT_FALSE(Decode<JobRequest>(Encode(JobRequest{1, "m", chat})));
}

TEST(WorkerProtocol, EventsRoundTrip) {
  DeltaMessage d{9,  "text", {{"a", -0.5f, {{"a", -0.5f}, {"b", -1.5f}}}},
                 17, 2,      {{0, "call_x", "f", "{\"a\":1}"}}};
  auto delta = Decode<DeltaMessage>(Encode(d));
  ASSERT_TRUE(delta);
  EXPECT_EQ(delta->text, "text");
  EXPECT_EQ(delta->completion_tokens, 17);
  ASSERT_EQ(delta->logprobs.size(), 1u);
  EXPECT_EQ(delta->logprobs[0].top[1].token, "b");
  EXPECT_FLOAT_EQ(delta->logprobs[0].top[1].logprob, -1.5f);
  EXPECT_EQ(delta->choice, 2);
  ASSERT_EQ(delta->tool_calls.size(), 1u);
  EXPECT_EQ(delta->tool_calls[0].id, "call_x");
  EXPECT_EQ(delta->tool_calls[0].arguments, "{\"a\":1}");

  StartedMessage s;
  s.job_id = 3;
  s.prompt_tokens = 12;
  s.sampling.mode = SamplingMode::kSample;
  s.sampling.temperature = 0.9;
  s.sampling.seed = 77;
  s.sampling.seed_was_generated = true;
  auto started = Decode<StartedMessage>(Encode(s));
  ASSERT_TRUE(started);
  EXPECT_EQ(started->sampling.mode, SamplingMode::kSample);
  EXPECT_EQ(started->sampling.seed, 77u);
  EXPECT_TRUE(started->sampling.seed_was_generated);

  DoneMessage done;
  done.job_id = 3;
  done.finish_reason = FinishReason::kStop;
  done.completion_tokens = 4;
  done.ttft_ms = 1.5;
  done.cached_tokens = 9;
  done.choice_finish_reasons = {FinishReason::kStop, FinishReason::kToolCalls};
  done.stop_sequence = "END";
  auto got_done = Decode<DoneMessage>(Encode(done));
  ASSERT_TRUE(got_done);
  EXPECT_EQ(got_done->finish_reason, FinishReason::kStop);
  EXPECT_EQ(got_done->cached_tokens, 9);
  EXPECT_EQ(got_done->choice_finish_reasons, done.choice_finish_reasons);
  EXPECT_EQ(got_done->ttft_ms, 1.5);
  EXPECT_EQ(got_done->stop_sequence, "END");

  auto err = Decode<JobErrorMessage>(
      Encode(JobErrorMessage{5, JobErrorKind::kContextLength, "state: too long", 4097, "state"}));
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind, JobErrorKind::kContextLength);
  EXPECT_EQ(err->prompt_tokens, 4097);
  EXPECT_EQ(err->field, "state");  // the param travels beside the message, not inside it
  EXPECT_EQ(Decode<TokensMessage>(Encode(TokensMessage{1, {4, 5}}))->ids,
            (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(Decode<TextMessage>(Encode(TextMessage{1, "x"}))->text, "x");
  EXPECT_EQ(Decode<ReadyMessage>(Encode(ReadyMessage{"m"}))->model, "m");
  EXPECT_EQ(Decode<CancelRequest>(Encode(CancelRequest{8}))->job_id, 8u);
  auto added =
      Decode<AddModelMessage>(Encode(AddModelMessage{"org/m", "/models/m", ModelKind::kEmbed}));
  ASSERT_TRUE(added);
  EXPECT_EQ(added->name, "org/m");
  EXPECT_EQ(added->dir, "/models/m");
  EXPECT_EQ(added->kind, ModelKind::kEmbed);
  EXPECT_EQ(*PeekMessageType(Encode(*added)), MessageType::kAddModel);
  std::string bad_kind = Encode(AddModelMessage{"m", "/d", ModelKind::kChat});
  bad_kind.back() = static_cast<char>(99);  // the kind byte comes last
  EXPECT_FALSE(Decode<AddModelMessage>(bad_kind));
}

// A bound the engine hits while running (the NPU queue full or timed out, the KV pool) is the
// engine being busy (503 + Retry-After), with its words; any other engine failure stays an
// internal error whose detail is kept in the worker's log.
TEST(WorkerProtocol, EngineBoundsAreBusyOtherFailuresInternal) {
  EXPECT_EQ(EngineFailureKind(ErrorCode::kResourceExhausted), JobErrorKind::kEngineBusy);
  EXPECT_EQ(EngineFailureKind(ErrorCode::kDeadlineExceeded), JobErrorKind::kInternal);
  EXPECT_EQ(EngineFailureKind(ErrorCode::kIo), JobErrorKind::kInternal);
  const std::string busy =
      EngineFailureMessage("NPU queue full: 64 passes wait", ErrorCode::kResourceExhausted);
  EXPECT_NE(busy.find("NPU queue full"), std::string::npos);
  EXPECT_EQ(EngineFailureMessage("/secret/path failed", ErrorCode::kInternal).find("/secret"),
            std::string::npos);
  auto err =
      Decode<JobErrorMessage>(Encode(JobErrorMessage{5, JobErrorKind::kEngineBusy, busy, 0}));
  ASSERT_TRUE(err);
  EXPECT_EQ(err->kind, JobErrorKind::kEngineBusy);
}

TEST(WorkerProtocol, WrongTypeIsRefused) {
  DeltaMessage d;
  d.job_id = 1;
  EXPECT_FALSE(Decode<DoneMessage>(Encode(d)));
  EXPECT_FALSE(PeekMessageType(""));
  EXPECT_FALSE(PeekMessageType(std::string(1, '\x63')));
}

TEST(WorkerProtocol, FramesCrossASocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(WriteFrame(sv[0], Encode(TextMessage{2, std::string(100000, 'z')})).ok());
  ASSERT_TRUE(WriteFrame(sv[0], Encode(CancelRequest{3})).ok());
  auto a = ReadFrame(sv[1]);
  ASSERT_TRUE(a);
  EXPECT_EQ(Decode<TextMessage>(*a)->text.size(), 100000u);
  auto b = ReadFrame(sv[1]);
  ASSERT_TRUE(b);
  EXPECT_EQ(Decode<CancelRequest>(*b)->job_id, 3u);
  close(sv[0]);
  auto eof = ReadFrame(sv[1]);
  ASSERT_FALSE(eof);
  EXPECT_EQ(eof.status().code(), ErrorCode::kNotFound);
  close(sv[1]);
}

}  // namespace
}  // namespace tessera::worker
