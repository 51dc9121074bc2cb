// Measurement program (built, not a test): what looking tokens up in a tied package's packed
// LM head does to the logits, against the same weight format loaded from the source checkpoint
// (which looks tokens up in its own embedding tensor). Both run placement "cpu" in the
// package's format, so the embedding rows are the only difference.
//
//   build/tests/backend/embedding_exactness SOURCE_DIR PACKAGE_DIR [POSITIONS] [THREADS]
//
// Prints, for two teacher-forced sequences of POSITIONS tokens (default 256): uniformly random
// ids, and a 16-token random prompt followed by the source's own greedy continuation: the
// fraction of positions whose arg-max agrees, the largest and the mean |logit difference|,
// and the largest |logit| for scale. For perspective, the same figures for the quantization of
// the whole model: the source in its own precision (F32 or BF16) against the source in the
// package's format.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_weights.h"
#include "engine/model_executor.h"
#include "engine/placement.h"
#include "model/checkpoint.h"

namespace tessera {
namespace {

Expected<std::unique_ptr<ModelExecutor>> Load(std::shared_ptr<const Checkpoint> ckpt,
                                              WeightFormat format, int64_t positions, int threads) {
  TS_ASSIGN_OR_RETURN(Placement placement, ParsePlacement("cpu", ckpt->config.num_layers));
  ModelExecutor::Options o;
  o.max_seq = positions;
  o.max_batch_tokens = std::min<int64_t>(positions, 256);
  o.backend.weights = format;
  o.backend.threads = threads;
  return ModelExecutor::Load(std::move(ckpt), placement, o);
}

Status AllLogits(ModelExecutor& exec, const std::vector<int32_t>& tokens, std::vector<float>* all) {
  std::vector<float> last(static_cast<size_t>(exec.spec().vocab));
  all->assign(tokens.size() * last.size(), 0.0f);
  return exec.Forward(0, 0, tokens, last, *all);
}

void Report(const char* what, const std::vector<float>& a, const std::vector<float>& b,
            int64_t vocab) {
  const size_t n = a.size() / static_cast<size_t>(vocab);
  size_t same = 0;
  double max_abs = 0, sum_abs = 0, max_logit = 0;
  for (size_t t = 0; t < n; ++t) {
    auto ra = a.begin() + static_cast<ptrdiff_t>(t * vocab);
    auto rb = b.begin() + static_cast<ptrdiff_t>(t * vocab);
    same += std::max_element(ra, ra + vocab) - ra == std::max_element(rb, rb + vocab) - rb;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    max_abs = std::max(max_abs, d);
    sum_abs += d;
    max_logit = std::max(max_logit, std::fabs(static_cast<double>(a[i])));
  }
  std::printf(
      "%-18s top-1 agreement %zu/%zu = %.4f  max |dlogit| %.4g  mean |dlogit| %.3g  "
      "max |logit| %.3g\n",
      what, same, n, static_cast<double>(same) / static_cast<double>(n), max_abs,
      sum_abs / static_cast<double>(a.size()), max_logit);
}

int Fail(const Status& st) {
  std::fprintf(stderr, "embedding_exactness: %s\n", st.message().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: embedding_exactness SOURCE_DIR PACKAGE_DIR [POSITIONS] [THREADS]\n");
    return 2;
  }
  const int64_t positions = argc > 3 ? std::atoll(argv[3]) : 256;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 0;
  if (positions < 17) return Fail(InvalidArgument("POSITIONS must be at least 17"));
  auto source = OpenCheckpoint(argv[1]);
  if (!source) return Fail(source.status());
  auto package = OpenCheckpoint(argv[2]);
  if (!package) return Fail(package.status());
  if (!(*package)->tensors.packed)
    return Fail(InvalidArgument(std::string(argv[2]) + " is not a package"));
  auto format = ResolveCpuWeightFormat(**package, WeightFormat::kAuto);
  if (!format) return Fail(format.status());
  auto from_source = Load(*source, *format, positions, threads);
  if (!from_source) return Fail(from_source.status());
  auto from_package = Load(*package, *format, positions, threads);
  if (!from_package) return Fail(from_package.status());
  std::printf("format %s; source embedding: %s; package embedding: %s\n",
              std::string(WeightFormatName(*format)).c_str(),
              (*from_source)->embedding_source().c_str(),
              (*from_package)->embedding_source().c_str());
  const int64_t vocab = (*from_source)->spec().vocab;
  std::mt19937 rng(5);
  std::vector<int32_t> random(static_cast<size_t>(positions));
  for (auto& t : random) t = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  std::vector<float> a, b;
  if (Status st = AllLogits(**from_source, random, &a); !st.ok()) return Fail(st);
  if (Status st = AllLogits(**from_package, random, &b); !st.ok()) return Fail(st);
  Report("random ids", a, b, vocab);

  // The source's greedy continuation of a 16-token prompt, then both teacher forced on it.
  std::vector<int32_t> greedy(random.begin(), random.begin() + 16);
  std::vector<float> logits(static_cast<size_t>(vocab));
  if (Status st = (*from_source)->Forward(0, 0, greedy, logits); !st.ok()) return Fail(st);
  while (static_cast<int64_t>(greedy.size()) < positions) {
    const auto next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    greedy.push_back(next);
    if (static_cast<int64_t>(greedy.size()) == positions) break;
    const int64_t pos = static_cast<int64_t>(greedy.size()) - 1;
    if (Status st = (*from_source)->Forward(0, pos, std::span(&greedy.back(), 1), logits);
        !st.ok()) {
      return Fail(st);
    }
  }
  if (Status st = AllLogits(**from_source, greedy, &a); !st.ok()) return Fail(st);
  if (Status st = AllLogits(**from_package, greedy, &b); !st.ok()) return Fail(st);
  Report("greedy continuation", a, b, vocab);

  from_package->reset();  // one quantized model and one unquantized model in memory
  auto plain = Load(*source, WeightFormat::kAuto, positions, threads);
  if (!plain) return Fail(plain.status());
  std::printf("whole-model quantization, source in its own precision vs source %s:\n",
              std::string(WeightFormatName(*format)).c_str());
  if (Status st = AllLogits(**plain, random, &b); !st.ok()) return Fail(st);
  if (Status st = AllLogits(**from_source, random, &a); !st.ok()) return Fail(st);
  Report("random ids", b, a, vocab);
  if (Status st = AllLogits(**plain, greedy, &b); !st.ok()) return Fail(st);
  if (Status st = AllLogits(**from_source, greedy, &a); !st.ok()) return Fail(st);
  Report("greedy continuation", b, a, vocab);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  return tessera::Main(argc, argv);
}
