// The xdna backend on the fake device (--npu-device fake:xdna1): hybrid placements give the
// tokens of the cpu backend alone for 0, 1, half and all layers on the "NPU"; its layers agree
// with the fp32 reference within the decoder program's numeric contract; batching, faults
// (timeout, abort, a chain that reports completion without running, a lost device), the
// hardware-context budget and the NPU queue shared by several models. Nothing here runs on an
// NPU: the fake device executes the program's reference kernels on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "backend/xdna/fake/npu_device_flag.h"
#include "backend/xdna/npu_queue.h"
#include "backend/xdna/xdna_backend.h"
#include "engine/model_executor.h"
#include "engine/placement.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "support/fault_injecting_device.h"
#include "test_support.h"

namespace tessera {
namespace {

// Every test of this program uses the one device of the process: the fake device that
// --npu-device fake:xdna1 makes, wrapped so that tests can inject faults.
NpuOptions FakeNpu() {
  NpuOptions npu;
  npu.device = "fake:xdna1";
  auto fake = ResolveNpuDevice(npu.device);
  EXPECT_TRUE(fake.has_value()) << fake.status().message();
  if (fake) npu.make_device = test::FaultInjectingDevice::Maker(fake->make, {});
  return npu;
}

test::FaultInjectingDevice& Device() {
  auto device = ProcessXdnaDevice(FakeNpu());
  EXPECT_TRUE(device.has_value()) << device.status().message();
  auto* faulty = dynamic_cast<test::FaultInjectingDevice*>(device->get());
  EXPECT_NE(faulty, nullptr);
  return *faulty;
}

enum class Arch { kLlama, kQwen2, kQwen3, kGemma3 };

SyntheticModelSpec SpecFor(Arch arch) {
  SyntheticModelSpec s;
  s.hidden = 64;
  s.intermediate = 96;
  s.vocab = 160;
  s.max_position = 256;
  s.layers = 4;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.dtype = DType::kBF16;
  s.seed = 21 + static_cast<uint64_t>(arch);
  switch (arch) {
    case Arch::kLlama:
      break;
    case Arch::kQwen2:  // q/k/v biases
      s.family = ModelFamily::kQwen2;
      break;
    case Arch::kQwen3:  // per-head q/k norms
      s.family = ModelFamily::kQwen3;
      break;
    case Arch::kGemma3:  // sliding windows, sandwich norms, gelu-tanh
      s.family = ModelFamily::kGemma3;
      s.kv_heads = 1;
      s.sliding_window = 5;
      s.sliding_window_pattern = 2;
      s.rope_local_theta = 1e4;
      break;
  }
  return s;
}

std::shared_ptr<const Checkpoint> Open(const test::TempDir& tmp, Arch arch) {
  const std::string dir = tmp.path() + "/m" + std::to_string(static_cast<int>(arch));
  EXPECT_TRUE(WriteSyntheticCheckpoint(dir, SpecFor(arch)).ok());
  auto ckpt = OpenCheckpoint(dir);
  EXPECT_TRUE(ckpt.has_value()) << ckpt.status().message();
  return *ckpt;
}

std::unique_ptr<ModelExecutor> Load(std::shared_ptr<const Checkpoint> ckpt, const std::string& spec,
                                    int slots = 1, KvCacheType kv = KvCacheType::kBF16) {
  auto placement = ParsePlacement(spec, ckpt->config.num_layers);
  EXPECT_TRUE(placement.has_value()) << placement.status().message();
  ModelExecutor::Options o;
  o.max_slots = slots;
  o.max_seq = 128;
  o.backend.weights = spec == "reference" ? WeightFormat::kAuto : WeightFormat::kBF16;
  o.backend.kv_cache = kv;
  o.backend.npu = FakeNpu();
  auto exec = ModelExecutor::Load(std::move(ckpt), *placement, o);
  EXPECT_TRUE(exec.has_value()) << spec << ": " << exec.status().message();
  return exec ? std::move(*exec) : nullptr;
}

int32_t Argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Greedy tokens after a prompt, and the logits of every step.
struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};
GreedyRun Greedy(ModelExecutor& exec, int new_tokens) {
  std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 63, 120, 7, 33, 81, 12};
  std::vector<float> logits(static_cast<size_t>(exec.spec().vocab));
  GreedyRun r;
  Status st = exec.Forward(0, 0, prompt, logits);
  EXPECT_TRUE(st.ok()) << st.message();
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < new_tokens && st.ok(); ++i) {
    r.logits.push_back(logits);
    const int32_t next = Argmax(logits);
    r.tokens.push_back(next);
    st = exec.Forward(0, pos++, std::span<const int32_t>(&next, 1), logits);
    EXPECT_TRUE(st.ok()) << st.message();
  }
  return r;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(XdnaBackend, HybridGivesTheTokensOfCpuOnlyForNoneOneHalfAndAllLayers) {
  test::TempDir tmp;
  for (Arch arch : {Arch::kLlama, Arch::kQwen2, Arch::kQwen3, Arch::kGemma3}) {
    auto ckpt = Open(tmp, arch);
    const int64_t layers = ckpt->config.num_layers;
    const GreedyRun cpu = Greedy(*Load(ckpt, "cpu"), 24);
    for (int64_t n : {int64_t{0}, int64_t{1}, layers / 2, layers}) {
      auto spec = NpuPlacementSpec(n, -1);
      ASSERT_TRUE(spec.has_value());
      auto exec = Load(ckpt, *spec);
      ASSERT_NE(exec, nullptr);
      if (n > 0) {
        EXPECT_EQ(exec->placement().stages[0].backend, "xdna");
      }
      const GreedyRun hybrid = Greedy(*exec, 24);
      EXPECT_EQ(hybrid.tokens, cpu.tokens)
          << "arch " << static_cast<int>(arch) << ", " << n << " layers on the fake NPU";
    }
  }
}

// The program's fp32 contract against the reference's double sums, on the same bf16 weights:
// close (not bit-equal: different accumulation), and far closer than a wrong kernel would be.
TEST(XdnaBackend, LayersAgreeWithTheReferenceWithinTheNumericContract) {
  test::TempDir tmp;
  for (Arch arch : {Arch::kLlama, Arch::kQwen2, Arch::kQwen3, Arch::kGemma3}) {
    auto ckpt = Open(tmp, arch);
    const GreedyRun ref = Greedy(*Load(ckpt, "reference"), 6);
    auto exec = Load(ckpt, "xdna:100%,cpu", 1, KvCacheType::kF32);  // the reference's KV
    ASSERT_NE(exec, nullptr);
    EXPECT_EQ(exec->placement().stages.back().layers.size(), 0) << "a head-only cpu stage";
    const GreedyRun npu = Greedy(*exec, 6);
    ASSERT_EQ(npu.logits.size(), ref.logits.size());
    for (size_t i = 0; i < ref.logits.size(); ++i) {
      EXPECT_LT(MaxAbsDiff(npu.logits[i], ref.logits[i]), 2e-3f) << "step " << i;
    }
    EXPECT_EQ(npu.tokens, ref.tokens);
  }
}

TEST(XdnaBackend, BatchedStepsMatchEachSequenceAlone) {
  test::TempDir tmp;
  auto ckpt = Open(tmp, Arch::kQwen3);
  auto alone = Load(ckpt, "xdna:2,cpu", 3);
  auto batched = Load(ckpt, "xdna:2,cpu", 3);
  ASSERT_TRUE(alone && batched);
  const int64_t vocab = ckpt->tensors.spec.vocab;
  // Three sequences: prompts of 9, 3 and 20 tokens, then decode tokens, batched together.
  std::vector<std::vector<int32_t>> prompts = {
      {1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11, 12}, std::vector<int32_t>(20, 0)};
  for (int i = 0; i < 20; ++i)
    prompts[2][static_cast<size_t>(i)] = static_cast<int32_t>(i * 7 % 150);
  std::vector<std::vector<float>> expected(3, std::vector<float>(static_cast<size_t>(vocab)));
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(
        alone->Forward(s, 0, prompts[static_cast<size_t>(s)], expected[static_cast<size_t>(s)])
            .ok());
  }
  std::vector<ModelExecutor::StepInput> inputs;
  for (int s = 0; s < 3; ++s) inputs.push_back({s, 0, prompts[static_cast<size_t>(s)], {}});
  std::vector<float> logits(static_cast<size_t>(3 * vocab));
  ASSERT_TRUE(batched->Step(inputs, logits).ok());
  for (int s = 0; s < 3; ++s) {
    std::vector<float> row(logits.begin() + s * vocab, logits.begin() + (s + 1) * vocab);
    EXPECT_EQ(row, expected[static_cast<size_t>(s)]) << "sequence " << s;
  }
}

TEST(XdnaBackend, FaultsMidDecodeAreRecoveredOrReported) {
  test::TempDir tmp;
  auto ckpt = Open(tmp, Arch::kLlama);
  const GreedyRun clean = Greedy(*Load(ckpt, "xdna:3,cpu"), 12);
  for (test::InjectedFault::Kind kind : {test::InjectedFault::kTimeout, test::InjectedFault::kAbort,
                                         test::InjectedFault::kCompletedNothingWritten}) {
    auto exec = Load(ckpt, "xdna:3,cpu");
    test::FaultInjectingDevice& dev = Device();
    const XdnaCounters before = ReadXdnaCounters();
    // Decode has started after the prompt's chain; the fault hits the 6th chain from here.
    dev.InjectFault({kind, dev.chains_run() + 6});
    const GreedyRun faulty = Greedy(*exec, 12);
    EXPECT_EQ(faulty.tokens, clean.tokens) << "fault kind " << kind;
    const XdnaCounters after = ReadXdnaCounters();
    EXPECT_EQ(after.faults - before.faults, 1);
    EXPECT_EQ(after.chain_retries - before.chain_retries, 1);
  }
}

TEST(XdnaBackend, RepeatedFaultsFailThePassWithTheDevicesWords) {
  test::TempDir tmp;
  auto ckpt = Open(tmp, Arch::kLlama);
  auto exec = Load(ckpt, "xdna:2,cpu");
  test::FaultInjectingDevice& dev = Device();
  for (int i = 0; i < kMaxChainAttempts; ++i)
    dev.InjectFault({test::InjectedFault::kTimeout, dev.chains_run() + i});
  std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<float> logits(static_cast<size_t>(exec->spec().vocab));
  Status st = exec->Forward(0, 0, prompt, logits);
  EXPECT_EQ(st.code(), ErrorCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("timeout"), std::string::npos) << st.message();
  // The device is fine afterwards: the next pass runs.
  EXPECT_TRUE(exec->Forward(0, 0, prompt, logits).ok());
}

// Greedy decoding of several models, one step of each in turn.
std::vector<std::vector<int32_t>> Interleaved(std::vector<ModelExecutor*> models, int new_tokens) {
  const std::vector<int32_t> prompt = {1, 17, 42, 99, 5, 63, 120, 7};
  std::vector<std::vector<int32_t>> out(models.size());
  std::vector<std::vector<float>> logits(models.size());
  for (size_t m = 0; m < models.size(); ++m) {
    logits[m].resize(static_cast<size_t>(models[m]->spec().vocab));
    EXPECT_TRUE(models[m]->Forward(0, 0, prompt, logits[m]).ok());
  }
  for (int i = 0; i < new_tokens; ++i) {
    for (size_t m = 0; m < models.size(); ++m) {
      const int32_t next = Argmax(logits[m]);
      out[m].push_back(next);
      const int64_t pos = static_cast<int64_t>(prompt.size()) + i;
      Status st = models[m]->Forward(0, pos, std::span<const int32_t>(&next, 1), logits[m]);
      EXPECT_TRUE(st.ok()) << st.message();
    }
  }
  return out;
}

// XDNA1 has 6 hardware contexts and each model's plan needs 4: models take turns, the idle
// one closed (its KV cache read back) and reopened on its next pass, and no token changes.
TEST(XdnaBackend, ModelsBeyondTheContextBudgetTakeTurnsWithTheirState) {
  test::TempDir tmp;
  std::vector<std::shared_ptr<const Checkpoint>> ckpts = {Open(tmp, Arch::kLlama),
                                                          Open(tmp, Arch::kQwen3)};
  std::vector<std::vector<int32_t>> alone;
  for (auto& c : ckpts) {
    auto exec = Load(c, "xdna:100%,cpu");
    alone.push_back(Interleaved({exec.get()}, 10)[0]);
  }
  auto a = Load(ckpts[0], "xdna:100%,cpu");
  auto b = Load(ckpts[1], "xdna:100%,cpu");
  ASSERT_TRUE(a && b);
  test::FaultInjectingDevice& dev = Device();
  EXPECT_LE(dev.open_programs(), NpuTargetFor(XdnaGeneration::kXdna1).hw_context_limit);
  const XdnaCounters before = ReadXdnaCounters();
  const auto together = Interleaved({a.get(), b.get()}, 10);
  EXPECT_EQ(together[0], alone[0]);
  EXPECT_EQ(together[1], alone[1]);
  // Each of the 22 passes after the first found the other model resident.
  EXPECT_GE(ReadXdnaCounters().evictions - before.evictions, 20);
  EXPECT_LE(dev.open_programs(), NpuTargetFor(XdnaGeneration::kXdna1).hw_context_limit);
}

TEST(XdnaBackend, AModelThatCannotFitIsRefusedSayingSo) {
  test::TempDir tmp;
  auto ckpt = Open(tmp, Arch::kLlama);
  auto placement = ParsePlacement("xdna:100%,cpu", ckpt->config.num_layers);
  ASSERT_TRUE(placement.has_value());
  ModelExecutor::Options o;
  o.max_seq = 128;
  o.kv_blocks = int64_t{1} << 24;  // 16M blocks of 32 positions: far past the device's memory
  o.backend.npu = FakeNpu();
  auto exec = ModelExecutor::Load(ckpt, *placement, o);
  ASSERT_FALSE(exec.has_value());
  EXPECT_EQ(exec.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(exec.status().message().find("cannot hold"), std::string::npos)
      << exec.status().message();
}

// A burst of 200 embedding-sized passes (one 16-token prompt each) from three models on the one
// NPU, from three threads: the queue serves them one at a time and refuses none.
TEST(XdnaBackend, ThreeModelsShareTheNpuQueueWithoutRefusals) {
  test::TempDir tmp;
  std::vector<std::unique_ptr<ModelExecutor>> models;
  for (Arch arch : {Arch::kLlama, Arch::kQwen2, Arch::kQwen3}) {
    models.push_back(Load(Open(tmp, arch), "xdna:100%,cpu"));
    ASSERT_NE(models.back(), nullptr);
  }
  const XdnaCounters before = ReadXdnaCounters();
  std::vector<std::thread> threads;
  std::vector<int> failures(3, 0);
  for (int m = 0; m < 3; ++m) {
    threads.emplace_back([&, m] {
      ModelExecutor& exec = *models[static_cast<size_t>(m)];
      std::vector<int32_t> prompt(16);
      std::vector<float> logits(static_cast<size_t>(exec.spec().vocab));
      const int passes = m == 0 ? 68 : 66;
      for (int i = 0; i < passes; ++i) {
        for (int t = 0; t < 16; ++t) prompt[static_cast<size_t>(t)] = (i * 16 + t + m) % 150;
        if (!exec.Forward(0, 0, prompt, logits).ok()) ++failures[static_cast<size_t>(m)];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures, std::vector<int>(3, 0));
  const XdnaCounters after = ReadXdnaCounters();
  EXPECT_EQ(after.passes - before.passes, 200);
  EXPECT_EQ(after.queue_refusals, before.queue_refusals);
}

TEST(NpuQueue, FullQueueAndTimeoutAreRefusedNamingTheQueue) {
  NpuQueue queue(/*capacity=*/1, std::chrono::milliseconds(50));
  auto held = queue.Wait();
  ASSERT_TRUE(held.has_value());
  // One pass may wait behind the holder; it times out because the holder never lets go.
  std::thread waiter([&] {
    auto t = queue.Wait();
    EXPECT_FALSE(t.has_value());
    EXPECT_EQ(t.status().code(), ErrorCode::kResourceExhausted);
    EXPECT_NE(t.status().message().find("NPU queue"), std::string::npos);
  });
  waiter.join();
  EXPECT_EQ(queue.refused(), 1);
  // After the holder ends, the next pass is served at once (the abandoned ticket is skipped).
  { auto done = std::move(*held); }
  auto next = queue.Wait();
  EXPECT_TRUE(next.has_value());
}

TEST(NpuQueue, ServesPassesInArrivalOrder) {
  NpuQueue queue(/*capacity=*/8, std::chrono::milliseconds(60000));
  std::vector<int> order;
  std::mutex mu;
  std::optional<NpuQueue::Turn> first(*queue.Wait());
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    // Each thread takes its ticket before the next starts (waiting() counts it).
    threads.emplace_back([&, i] {
      auto t = queue.Wait();
      ASSERT_TRUE(t.has_value());
      std::lock_guard lock(mu);
      order.push_back(i);
    });
    for (int spins = 0; queue.waiting() < i + 1 && spins < 100000000; ++spins)
      std::this_thread::yield();
  }
  first.reset();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(XdnaBackend, LostDeviceFailsPassesAndSaysSo) {
  // Last in this program: the device stays lost.
  test::TempDir tmp;
  auto ckpt = Open(tmp, Arch::kLlama);
  auto exec = Load(ckpt, "xdna:2,cpu");
  test::FaultInjectingDevice& dev = Device();
  dev.InjectFault({test::InjectedFault::kDeviceLost, dev.chains_run()});
  std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<float> logits(static_cast<size_t>(exec->spec().vocab));
  Status st = exec->Forward(0, 0, prompt, logits);
  EXPECT_EQ(st.code(), ErrorCode::kDeviceLost);  // the worker exits on this code
  EXPECT_NE(st.message().find("lost"), std::string::npos) << st.message();
  EXPECT_EQ(exec->Forward(0, 0, prompt, logits).code(), ErrorCode::kDeviceLost);
}

TEST(Placement, NpuFlagsBecomePlacements) {
  EXPECT_EQ(*NpuPlacementSpec(0, -1), "cpu");
  EXPECT_EQ(*NpuPlacementSpec(3, -1), "xdna:3,cpu");
  EXPECT_EQ(*NpuPlacementSpec(-1, 50), "xdna:50%,cpu");
  EXPECT_FALSE(NpuPlacementSpec(2, 50).has_value());
  EXPECT_FALSE(NpuPlacementSpec(-1, 101).has_value());
  EXPECT_FALSE(NpuPlacementSpec(-1, 12.5).has_value());
  auto half = ParsePlacement("xdna:50%,cpu", 30);
  ASSERT_TRUE(half.has_value());
  EXPECT_EQ(half->stages[0].layers.end, 15);
  auto all = ParsePlacement("xdna:100%,cpu", 30);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->stages[1].layers.size(), 0);
  EXPECT_FALSE(ParsePlacement("xdna:30,cpu:0", 30).has_value());  // counts are positive
  EXPECT_FALSE(ParsePlacement("xdna:101%,cpu", 30).has_value());
}

}  // namespace
}  // namespace tessera
