// ModelExecutor: one loaded model spread over its placement's backends. It embeds tokens,
// hands the hidden state to each stage's backend in turn (crossing once per stage per call),
// and asks the last stage for logits. Buffers are sized at load; the token loop does not
// allocate. Where token embeddings come from is decided once at load (embedding_source()):
// the checkpoint's embedding tensor, widened on the host, or, for a package of a tied model
// (which stores that matrix once, as the packed LM head), the head's rows from the backend
// that owns the head; a model whose head backend cannot do that is refused, never run another
// way.
//
//   TS_ASSIGN_OR_RETURN(auto ckpt, OpenCheckpoint(dir));
//   TS_ASSIGN_OR_RETURN(auto placement, ParsePlacement("reference", ckpt->config.num_layers));
//   TS_ASSIGN_OR_RETURN(auto exec, ModelExecutor::Load(ckpt, placement, {.max_seq = 512}));
//   TS_RETURN_IF_ERROR(exec->Forward(/*slot=*/0, /*start_pos=*/0, prompt_ids, logits_last));
#pragma once

#include <memory>
#include <span>
#include <string>
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
    // KV pool blocks (backend.h); 0: max_slots x KvBlocksFor(max_seq), enough for the identity
    // layout that Forward() uses.
    int64_t kv_blocks = 0;
    // Recurrent states kept apart from the slots (Backend::KeepSlotState), for prefixes cached
    // in the pool; used only by models whose per-slot state is recurrent alone (no sliding
    // rings).
    int kept_states = 0;
    BackendOptions backend;  // given to every backend the placement creates
  };

  static Expected<std::unique_ptr<ModelExecutor>> Load(std::shared_ptr<const Checkpoint> ckpt,
                                                       const Placement& placement,
                                                       const Options& options);

  // Runs tokens at positions [start_pos, start_pos + n) of `slot` and writes the logits of
  // the last token to `last_logits` ([vocab]). When `all_logits` is non-empty it must hold
  // [n, vocab] and receives every position's logits (teacher forcing, scoring).
  Status Forward(int slot, int64_t start_pos, std::span<const int32_t> tokens,
                 std::span<float> last_logits, std::span<float> all_logits = {});

  // One forward batch over several sequences (continuous batching): each input runs its
  // tokens at positions [start_pos, start_pos + n) of its slot (one input per slot), and row i
  // of `logits` ([inputs.size(), vocab]) receives input i's last-token logits. All tokens
  // together must fit max_batch_tokens. A sequence's logits do not depend on the rest of the
  // batch (see ForwardBatch). An empty `logits` skips the LM head; a non-empty `final_hidden`
  // ([inputs.size(), hidden]) receives each input's last row after the final norm (pooled
  // embeddings, score heads).
  struct StepInput {
    int slot = 0;
    int64_t start_pos = 0;
    std::span<const int32_t> tokens;
    std::span<const int32_t> blocks;  // the sequence's KV block table; empty: identity layout
  };
  Status Step(std::span<const StepInput> inputs, std::span<float> logits,
              std::span<float> final_hidden = {});

  const Checkpoint& checkpoint() const { return *ckpt_; }
  int max_slots() const { return max_slots_; }
  int64_t max_batch_tokens() const { return max_batch_tokens_; }
  const ModelSpec& spec() const { return ckpt_->tensors.spec; }
  int64_t max_seq() const { return max_seq_; }
  const Placement& placement() const { return placement_; }
  size_t resident_weight_bytes() const;
  // For the load log: "model.embed_tokens.weight (BF16, host)" or "rows of the tied LM head on
  // cpu-avx512-int8#1".
  const std::string& embedding_source() const { return embedding_source_; }

  // The largest position <= wanted from which `slot` can continue (every backend agreeing):
  // `wanted` for attention-only models; for recurrent layers, their live state or a snapshot.
  int64_t ResumablePosition(int slot, int64_t wanted) const;

  // Makes `to`'s per-slot state that of `from` after `positions` positions on every backend
  // (see Backend::CopySlotState; nothing to do without recurrent or sliding layers); an error
  // leaves `to` to be recomputed.
  Status CopySlotState(int from, int to, int64_t positions, int64_t source_positions);
  // Whether slots hold state outside the block pool (recurrent layers, sliding rings): a
  // sequence then resumes a prefix only where its slot's state can.
  bool has_slot_state() const { return has_slot_state_; }
  // Copies a pool block's first `positions` positions to another block on every backend.
  Status CopyKvBlock(int32_t from, int32_t to, int64_t positions);
  int64_t kv_blocks() const { return kv_blocks_; }
  // Kept recurrent states (0 when the model has none to keep, or sliding rings).
  int kept_states() const { return kept_states_; }
  Status KeepSlotState(int slot, int64_t positions, int entry);
  Status RestoreSlotState(int entry, int slot, int64_t positions);

 private:
  ModelExecutor() = default;
  Status ChooseEmbeddingSource(const Checkpoint& ckpt);  // after the head is loaded
  Status Embed(std::span<const int32_t> tokens, std::span<float> hidden);

  std::shared_ptr<const Checkpoint> ckpt_;
  Placement placement_;
  std::vector<std::unique_ptr<Backend>> backends_;  // one per placement stage
  std::vector<Backend*> layer_backends_;            // those holding layers (not a head-only one)
  int64_t max_seq_ = 0;
  int64_t max_batch_tokens_ = 0;
  std::vector<float> hidden_;     // [max_batch_tokens, hidden]
  std::vector<float> last_rows_;  // [max_slots, hidden], Step's rows for the head
  std::vector<size_t> order_;     // Step's batch order (one-token inputs first)
  ForwardBatch batch_;            // Step's batch (kept: no allocation per step)
  int max_slots_ = 1;
  int64_t kv_blocks_ = 0;
  bool has_slot_state_ = false;
  int kept_states_ = 0;
  bool embed_from_head_ = false;  // token rows come from the head backend's EmbedFromHead
  std::string embedding_source_;
};

}  // namespace tessera
