// ModelExecutor: one loaded model spread over its placement's backends. It embeds tokens on
// the host, hands the hidden state to each stage's backend in turn (crossing once per stage
// per call), and asks the last stage for logits. Buffers are sized at load; the token loop
// does not allocate.
//
//   TS_ASSIGN_OR_RETURN(auto ckpt, OpenCheckpoint(dir));
//   TS_ASSIGN_OR_RETURN(auto placement, ParsePlacement("reference", ckpt->config.num_layers));
//   TS_ASSIGN_OR_RETURN(auto exec, ModelExecutor::Load(ckpt, placement, {.max_seq = 512}));
//   TS_RETURN_IF_ERROR(exec->Forward(/*slot=*/0, /*start_pos=*/0, prompt_ids, logits_last));
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "engine/placement.h"
#include "model/checkpoint.h"

namespace tessera {

class ModelExecutor {
 public:
  struct Options {
    int max_slots = 1;
    int64_t max_seq = 0;             // 0: the model's max_position_embeddings, capped at 4096
    int64_t max_batch_tokens = 512;  // prompt positions per forward pass (longer ones are split)
    BackendOptions backend;          // given to every backend the placement creates
  };

  static Expected<std::unique_ptr<ModelExecutor>> Load(std::shared_ptr<const Checkpoint> ckpt,
                                                       const Placement& placement,
                                                       const Options& options);

  // Runs tokens at positions [start_pos, start_pos + n) of `slot` and writes the logits of
  // the last token to `last_logits` ([vocab]). When `all_logits` is non-empty it must hold
  // [n, vocab] and receives every position's logits (teacher forcing, scoring).
  Status Forward(int slot, int64_t start_pos, std::span<const int32_t> tokens,
                 std::span<float> last_logits, std::span<float> all_logits = {});

  const Checkpoint& checkpoint() const { return *ckpt_; }
  const ModelSpec& spec() const { return ckpt_->tensors.spec; }
  int64_t max_seq() const { return max_seq_; }
  const Placement& placement() const { return placement_; }
  size_t resident_weight_bytes() const;

  // The largest position <= wanted from which `slot` can continue (every backend agreeing):
  // `wanted` for attention-only models; for recurrent layers, their live state or a snapshot.
  int64_t ResumablePosition(int slot, int64_t wanted) const;

 private:
  ModelExecutor() = default;
  Status Embed(std::span<const int32_t> tokens, std::span<float> hidden);

  std::shared_ptr<const Checkpoint> ckpt_;
  Placement placement_;
  std::vector<std::unique_ptr<Backend>> backends_;  // one per placement stage
  int64_t max_seq_ = 0;
  int64_t max_batch_tokens_ = 0;
  std::vector<float> hidden_;  // [max_batch_tokens, hidden]
};

}  // namespace tessera
