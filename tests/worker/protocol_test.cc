#include "worker/protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace tessera::worker {
namespace {

TEST(WorkerProtocol, JobRequestRoundTripsEveryField) {
  JobRequest job;
  job.job_id = 0x0102030405060708ull;
  job.kind = JobKind::kChat;
  job.model = "tiny";
  job.prompt = "p";
  job.messages = {{"system", "be brief", "", "", ""},
                  {"user", "hi \xe2\x82\xac", "", "", ""},
                  {"assistant", "", "[{\"id\":\"c\"}]", "", ""},
                  {"tool", "42", "", "call_1", "f"}};
  job.ids = {1, -2, 300000};
  job.add_special_tokens = false;
  job.max_tokens = 17;
  job.stop = {"\n\n", "END"};
  job.sampling.temperature = 0.7;
  job.sampling.top_k = 40;
  job.sampling.seed = 1234;
  job.logprobs = true;
  job.top_logprobs = 5;
  job.n = 3;
  job.response_format = "{\"type\":\"json_object\"}";
  job.tools = "[]";
  job.tool_choice = "required";
  job.logit_bias = {{151657, 100.0}, {3, -2.5}};
  auto got = Decode<JobRequest>(Encode(job));
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(got->job_id, job.job_id);
  EXPECT_EQ(got->kind, JobKind::kChat);
  EXPECT_EQ(got->model, "tiny");
  ASSERT_EQ(got->messages.size(), 4u);
  EXPECT_EQ(got->messages[1].content, "hi \xe2\x82\xac");
  EXPECT_EQ(got->messages[2].tool_calls, "[{\"id\":\"c\"}]");
  EXPECT_EQ(got->messages[3].tool_call_id, "call_1");
  EXPECT_EQ(got->messages[3].name, "f");
  EXPECT_EQ(got->n, 3);
  EXPECT_EQ(got->response_format, job.response_format);
  EXPECT_EQ(got->tools, "[]");
  EXPECT_EQ(got->tool_choice, "required");
  EXPECT_EQ(got->logit_bias, job.logit_bias);
  EXPECT_EQ(got->ids, job.ids);
  EXPECT_FALSE(got->add_special_tokens);
  EXPECT_EQ(got->max_tokens, 17);
  EXPECT_EQ(got->stop, job.stop);
  EXPECT_EQ(got->sampling.temperature, 0.7);
  EXPECT_EQ(got->sampling.top_k, 40);
  EXPECT_FALSE(got->sampling.top_p.has_value());
  EXPECT_EQ(got->sampling.seed, 1234);
  EXPECT_TRUE(got->logprobs);
  EXPECT_EQ(got->top_logprobs, 5);
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
  auto got_done = Decode<DoneMessage>(Encode(done));
  ASSERT_TRUE(got_done);
  EXPECT_EQ(got_done->finish_reason, FinishReason::kStop);
  EXPECT_EQ(got_done->cached_tokens, 9);
  EXPECT_EQ(got_done->choice_finish_reasons, done.choice_finish_reasons);
  EXPECT_EQ(got_done->ttft_ms, 1.5);

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
