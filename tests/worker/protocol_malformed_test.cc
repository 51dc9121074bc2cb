// Hostile frames, for every message type of the worker protocol (run under ASan+UBSan with
// -L malformed). The encoding is canonical: every field has exactly one encoding (booleans are
// 0 or 1, enums are checked, counts are exact and nothing may trail), so a payload that decodes
// at all must be exactly the encoding of what it decoded to. That is the property asserted for
// every truncation and every corruption of valid messages, with every decoder:
//   * a proper prefix of a message is refused by every decoder (no field is zero bytes long);
//   * a corrupted message is refused, or it decodes (only as the type its first byte names) to a
//     message whose encoding is the corrupted payload byte for byte.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <limits>
#include <set>

#include "worker/protocol.h"

namespace tessera::worker {
namespace {

// Decodes `payload` as M and encodes the result again; the decoder's error otherwise.
template <typename M>
Expected<std::string> Reencode(std::string_view payload) {
  Expected<M> m = Decode<M>(payload);
  if (!m) return m.status();
  return Encode(*m);
}

// One decoder per message type, each paired with its encoder.
struct Codec {
  MessageType type;
  const char* name;
  Expected<std::string> (*reencode)(std::string_view);
};

const std::vector<Codec>& Codecs() {
  static const std::vector<Codec> codecs = {
      {MessageType::kJobRequest, "JobRequest", Reencode<JobRequest>},
      {MessageType::kCancel, "Cancel", Reencode<CancelRequest>},
      {MessageType::kAddModel, "AddModel", Reencode<AddModelMessage>},
      {MessageType::kReady, "Ready", Reencode<ReadyMessage>},
      {MessageType::kStarted, "Started", Reencode<StartedMessage>},
      {MessageType::kDelta, "Delta", Reencode<DeltaMessage>},
      {MessageType::kDone, "Done", Reencode<DoneMessage>},
      {MessageType::kJobError, "JobError", Reencode<JobErrorMessage>},
      {MessageType::kTokens, "Tokens", Reencode<TokensMessage>},
      {MessageType::kText, "Text", Reencode<TextMessage>},
      {MessageType::kTaskResult, "TaskResult", Reencode<TaskResultMessage>},
  };
  return codecs;
}

struct Sample {
  MessageType type;
  std::string payload;
};

// Valid messages of every type, with every field set away from its default somewhere (and
// optional fields both present and absent, lists empty and not).
std::vector<Sample> Samples() {
  std::vector<Sample> out;
  ChatPayload chat;
  chat.messages = {{"system", "be brief", "", "", ""},
                   {"user", "hello", "", "", ""},
                   {"assistant", "", "[{\"id\":\"call_1\"}]", "", ""},
                   {"tool", "21", "", "call_1", "get_weather"}};
  chat.tools = {{"get_weather", true, R"({"type":"function","function":{"name":"get_weather"}})"},
                {"f", false, "{}"}};
  chat.tool_choice = {ToolChoiceMode::kFunction, "get_weather"};
  GenerationOptions& o = chat.options;
  o.max_tokens = 16;
  o.stop = {"x", "\n\n"};
  o.sampling.temperature = 0.7;
  o.sampling.top_k = 40;
  o.sampling.top_p = 0.9;
  o.sampling.min_p = 0.05;
  o.sampling.repetition_penalty = 1.1;
  o.sampling.presence_penalty = -0.5;
  o.sampling.frequency_penalty = 0.25;
  o.sampling.seed = -3;
  o.logprobs = true;
  o.top_logprobs = 5;
  o.n = 3;
  o.response_format = {ResponseFormatKind::kDecision,
                       "",
                       {{"1", "1", "one"}, {"\"b\"", "b", ""}},
                       "answer",
                       "Which?"};
  o.logit_bias = {{7, 1.5}};
  out.push_back(
      {MessageType::kJobRequest, Encode(JobRequest{0x0102030405060708ull, "stories", chat})});
  CompletionPayload completion{"Once upon", {}};
  completion.options.response_format = {
      ResponseFormatKind::kJsonSchema, R"({"type":"object"})", {}, "", ""};
  out.push_back({MessageType::kJobRequest, Encode(JobRequest{2, "", completion})});
  out.push_back({MessageType::kJobRequest,
                 Encode(JobRequest{3, "m", TokenizePayload{"caf\xc3\xa9", false}})});
  out.push_back(
      {MessageType::kJobRequest, Encode(JobRequest{4, "m", DetokenizePayload{{1, -1, 70000}}})});
  out.push_back({MessageType::kJobRequest,
                 Encode(JobRequest{5, "m", EmbedPayload{{{}, {{1, 2}, {3}}, 4096}, "query", 64}})});
  out.push_back({MessageType::kJobRequest,
                 Encode(JobRequest{6, "m", RerankPayload{"q", {{"a", "", "b"}, {}, 8192}, "i"}})});
  out.push_back({MessageType::kJobRequest,
                 Encode(JobRequest{7, "m", ClassifyPayload{{{"x"}, {}, 0}, 7, false, false}})});
  out.push_back({MessageType::kJobRequest,
                 Encode(JobRequest{
                     8, "m", ModeratePayload{{{""}, {}, 8192}, {{"user", "hi", "", "", ""}}}})});
  SystemOnePayload s1;
  s1.state = "{\"ticket\": 7}";
  s1.questions = {{QuestionType::kChoice, "Which team?", {"billing", "tech"}, {"money", ""}},
                  {QuestionType::kNoul, "Angry?", {"yes", "no"}, {"", ""}}};
  out.push_back({MessageType::kJobRequest, Encode(JobRequest{9, "m", s1})});
  out.push_back({MessageType::kCancel, Encode(CancelRequest{42})});
  out.push_back(
      {MessageType::kAddModel, Encode(AddModelMessage{"org/m", "/models/m", ModelKind::kRerank})});
  out.push_back({MessageType::kReady, Encode(ReadyMessage{"stories"})});
  out.push_back({MessageType::kReady, Encode(ReadyMessage{""})});
  StartedMessage started;
  started.job_id = 3;
  started.prompt_tokens = 12;
  started.sampling.mode = SamplingMode::kSample;
  started.sampling.temperature = 0.8;
  started.sampling.top_k = 50;
  started.sampling.top_p = 0.95;
  started.sampling.min_p = 0.01;
  started.sampling.repetition_penalty = 1.2;
  started.sampling.presence_penalty = 0.1;
  started.sampling.frequency_penalty = 0.2;
  started.sampling.seed = ~0ull;
  started.sampling.seed_was_generated = true;
  out.push_back({MessageType::kStarted, Encode(started)});
  out.push_back({MessageType::kStarted, Encode(StartedMessage{})});
  out.push_back({MessageType::kDelta,
                 Encode(DeltaMessage{1, "abc", {{"t", -1.0f, {{"u", -2.0f}}}}, 3, 0, {}})});
  out.push_back({MessageType::kDelta,
                 Encode(DeltaMessage{
                     7,
                     "",
                     {{"a", -0.5f, {}},
                      {"b", -std::numeric_limits<float>::infinity(), {{"c", -3.0f}, {"d", -4.0f}}}},
                     9,
                     2,
                     {{0, "call_x", "get_weather", "{\"city\":"}, {1, "", "", "\"P\"}"}}})});
  DoneMessage done;
  done.job_id = 5;
  done.finish_reason = FinishReason::kLength;
  done.prompt_tokens = 10;
  done.completion_tokens = 20;
  done.cached_tokens = 7;
  done.queue_ms = 0.5;
  done.load_ms = 1.5;
  done.prefill_ms = 2.5;
  done.ttft_ms = 3.5;
  done.decode_ms = 4.5;
  done.prefill_tok_s = 100.0;
  done.decode_tok_s = 50.0;
  done.choice_finish_reasons = {FinishReason::kLength, FinishReason::kToolCalls};
  done.slots = 8;
  done.slots_in_use = 3;
  done.sequences_waiting = 1;
  done.kv_blocks = 640;
  done.kv_blocks_free = 600;
  done.kv_blocks_cached = 17;
  out.push_back({MessageType::kDone, Encode(done)});
  out.push_back({MessageType::kDone, Encode(DoneMessage{})});
  for (JobErrorKind kind :
       {JobErrorKind::kInvalidRequest, JobErrorKind::kContextLength, JobErrorKind::kModelNotFound,
        JobErrorKind::kInternal, JobErrorKind::kEngineBusy}) {
    out.push_back({MessageType::kJobError, Encode(JobErrorMessage{1, kind, "m", 9})});
  }
  out.push_back({MessageType::kTokens, Encode(TokensMessage{1, {1, 2, 3}})});
  out.push_back({MessageType::kTokens, Encode(TokensMessage{1, {}})});
  out.push_back({MessageType::kText, Encode(TextMessage{1, "t"})});
  out.push_back({MessageType::kText, Encode(TextMessage{8, ""})});
  TaskResultMessage task;
  task.job_id = 9;
  task.items = {{0, {0.5f, -0.25f}, "Unsafe", 12, {"Violent", "PII"}}, {1, {}, "", 0, {}}};
  task.labels = {"Safe", "Unsafe", "Controversial"};
  task.prompt_tokens = 12;
  task.cached_tokens = 4;
  task.queue_ms = 0.5;
  task.run_ms = 3.25;
  out.push_back({MessageType::kTaskResult, Encode(task)});
  out.push_back({MessageType::kTaskResult, Encode(TaskResultMessage{})});
  return out;
}

// The types PeekMessageType accepts: every type the protocol has.
std::set<MessageType> ProtocolTypes() {
  std::set<MessageType> types;
  for (int t = 0; t < 256; ++t) {
    if (auto type = PeekMessageType(std::string(1, static_cast<char>(t)))) types.insert(*type);
  }
  return types;
}

// The codecs that decode `payload`; each must re-encode it byte for byte.
std::vector<MessageType> CheckDecoders(const std::string& payload, const std::string& what) {
  std::vector<MessageType> accepted;
  for (const Codec& c : Codecs()) {
    auto again = c.reencode(payload);
    if (!again) {
      EXPECT_FALSE(again.status().message().empty()) << what << " as " << c.name;
      continue;
    }
    accepted.push_back(c.type);
    EXPECT_EQ(*again, payload) << what << ": decoded as " << c.name
                               << " but does not encode back to the same bytes";
  }
  // At most one decoder accepts a payload: the one of the type its first byte names.
  EXPECT_LE(accepted.size(), 1u) << what;
  if (!accepted.empty()) {
    auto peeked = PeekMessageType(payload);
    EXPECT_TRUE(peeked && *peeked == accepted[0]) << what;
  }
  return accepted;
}

TEST(WorkerProtocolMalformed, EveryMessageTypeHasACodecAndSamplesThatRoundTrip) {
  const std::set<MessageType> types = ProtocolTypes();
  std::set<MessageType> codec_types, sample_types;
  for (const Codec& c : Codecs()) codec_types.insert(c.type);
  for (const Sample& s : Samples()) sample_types.insert(s.type);
  EXPECT_EQ(types.size(), 11u);
  EXPECT_EQ(codec_types, types) << "a message type without a codec in this test";
  EXPECT_EQ(sample_types, types) << "a message type without a sample in this test";
  for (const Sample& s : Samples()) {
    auto accepted = CheckDecoders(s.payload, "a valid message");
    EXPECT_EQ(accepted, std::vector<MessageType>{s.type});
  }
}

TEST(WorkerProtocolMalformed, TruncationsAreErrors) {
  EXPECT_FALSE(PeekMessageType(""));
  for (const Sample& s : Samples()) {
    for (size_t n = 0; n < s.payload.size(); ++n) {
      // Every field takes at least one byte, so no decoder may accept a proper prefix.
      auto accepted = CheckDecoders(s.payload.substr(0, n), "a prefix");
      EXPECT_TRUE(accepted.empty()) << "type " << int(s.type) << " cut to " << n << " of "
                                    << s.payload.size() << " bytes was accepted";
    }
  }
}

TEST(WorkerProtocolMalformed, ByteFlipsAreErrorsOrExactlyReencode) {
  size_t refused = 0, decoded = 0;
  for (const Sample& s : Samples()) {
    for (size_t i = 0; i < s.payload.size(); ++i) {
      std::set<uint8_t> values = {0x00, 0x01, 0x02, 0x7f, 0x80, 0xfe, 0xff};
      for (int bit = 0; bit < 8; ++bit) {
        values.insert(static_cast<uint8_t>(static_cast<uint8_t>(s.payload[i]) ^ (1u << bit)));
      }
      for (uint8_t v : values) {
        if (v == static_cast<uint8_t>(s.payload[i])) continue;
        std::string bad = s.payload;
        bad[i] = static_cast<char>(v);
        const std::string what = "type " + std::to_string(int(s.type)) + " byte " +
                                 std::to_string(i) + " -> " + std::to_string(v);
        (CheckDecoders(bad, what).empty() ? refused : decoded)++;
      }
    }
  }
  // Both outcomes happen (a flipped character of a string decodes, a flipped type or count
  // does not), so neither half of the property holds vacuously.
  EXPECT_GT(refused, 0u);
  EXPECT_GT(decoded, 0u);
}

TEST(WorkerProtocolMalformed, HugeCountsAreRefusedWithoutAllocating) {
  std::string p = Encode(TokensMessage{1, {}});
  p[9] = p[10] = p[11] = p[12] = '\xff';  // count 2^32-1 with no data behind it
  EXPECT_FALSE(Decode<TokensMessage>(p));
}

TEST(WorkerProtocolMalformed, OversizedAndCutFrames) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const char header[4] = {'\xff', '\xff', '\xff', '\x7f'};
  ASSERT_EQ(write(sv[0], header, 4), 4);
  EXPECT_FALSE(ReadFrame(sv[1]));
  const char short_frame[6] = {10, 0, 0, 0, 1, 2};
  ASSERT_EQ(write(sv[0], short_frame, 6), 6);
  close(sv[0]);
  auto got = ReadFrame(sv[1]);
  EXPECT_FALSE(got);
  close(sv[1]);
}

}  // namespace
}  // namespace tessera::worker
