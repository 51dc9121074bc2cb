// A generation job whose pass cannot get the NPU within the queue timeout (on the FAKE XDNA
// device: CPU reference kernels, nothing runs on an NPU) ends with a JobError of kind
// kEngineBusy carrying the queue's words (the server answers it 503 engine_busy with
// Retry-After: tests/server/openai_api_test.cc); the next job, with the NPU free, runs. In `serve`
// one worker thread steps every model, so passes never contend there: this test holds the NPU's
// turn itself.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "backend/xdna/fake/npu_device_flag.h"
#include "backend/xdna/npu_queue.h"
#include "model/synthetic_checkpoint.h"
#include "runtime/loaded_model.h"
#include "test_support.h"
#include "worker/generation_job.h"

namespace tessera::worker {
namespace {

TEST(NpuQueueJob, APassThatCannotGetTheNpuIsEngineBusy) {
  // The first backend to open the process's device and queue chooses them.
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.vocab = 4352;
  ASSERT_TRUE(WriteSyntheticModel(tmp.File("m"), spec).ok());
  ModelLoadOptions o;
  o.placement = "xdna:100%,cpu";
  o.npu.device = "fake:xdna2";
  auto fake = ResolveNpuDevice(o.npu.device);
  ASSERT_TRUE(fake.has_value()) << fake.status().message();
  o.npu.make_device = fake->make;
  o.npu.queue_timeout_ms = 50;
  o.parallel = 2;
  o.package_cache = false;
  auto model = LoadedModel::Open(tmp.File("m"), o);
  ASSERT_TRUE(model) << model.status().message();

  CompletionPayload completion{"hello there", {}};
  completion.options.max_tokens = 4;
  const JobRequest request{7, "m", completion};
  auto run = [&](bool hold_npu) {
    std::optional<JobErrorMessage> error;
    bool done = false, ended = false;
    auto send = [&](const std::string& frame) {
      auto type = PeekMessageType(frame);
      if (type && *type == MessageType::kJobError) error = *Decode<JobErrorMessage>(frame);
      if (type && *type == MessageType::kDone) done = true;
    };
    auto vocabulary = []() -> Expected<std::shared_ptr<const TokenVocabulary>> {
      return Unsupported("no grammar in this test");
    };
    auto job = GenerationJob::Start(request, **model, vocabulary, 0, send,
                                    [&](uint64_t) { ended = true; });
    EXPECT_TRUE(std::holds_alternative<std::unique_ptr<GenerationJob>>(job));
    std::optional<NpuQueue::Turn> turn;
    if (hold_npu) turn.emplace(*(*ProcessNpuQueue(o.npu))->Wait());  // another model's pass
    for (int i = 0; i < 100 && !ended; ++i) (void)(*model)->scheduler().Step();
    EXPECT_TRUE(ended);
    return std::make_pair(error, done);
  };

  const auto [busy, busy_done] = run(/*hold_npu=*/true);
  ASSERT_TRUE(busy.has_value());
  EXPECT_FALSE(busy_done);
  EXPECT_EQ(busy->kind, JobErrorKind::kEngineBusy);
  EXPECT_NE(busy->message.find("NPU queue"), std::string::npos) << busy->message;

  const auto [error, done] = run(/*hold_npu=*/false);
  EXPECT_FALSE(error.has_value()) << error->message;
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace tessera::worker
