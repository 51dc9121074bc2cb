#include "engine/model_executor.h"

#include <algorithm>

#include "format/dtype.h"
#include "model/tensor_convert.h"

namespace tessera {

Expected<std::unique_ptr<ModelExecutor>> ModelExecutor::Load(std::shared_ptr<const Checkpoint> ckpt,
                                                             const Placement& placement,
                                                             const Options& options) {
  std::unique_ptr<ModelExecutor> exec(new ModelExecutor());
  const ModelConfig& cfg = ckpt->config;
  int64_t max_seq = options.max_seq;
  if (max_seq <= 0) max_seq = std::min<int64_t>(cfg.max_position_embeddings, 4096);
  if (max_seq <= 0) max_seq = 4096;
  // Positions past the trained range are meaningless for RoPE models, and the bound keeps
  // the KV cache's size tied to what the checkpoint declares.
  if (cfg.max_position_embeddings > 0 && max_seq > cfg.max_position_embeddings) {
    return InvalidArgument("a context of " + std::to_string(max_seq) +
                           " positions is more than the model's max_position_embeddings (" +
                           std::to_string(cfg.max_position_embeddings) + "); lower --context");
  }
  for (const RopeSpec& rope : ckpt->tensors.spec.ropes) {
    if (rope.max_positions > 0 && max_seq > rope.max_positions) {
      return InvalidArgument("a context of " + std::to_string(max_seq) + " positions is past the " +
                             std::to_string(rope.max_positions) +
                             " the model's short LongRoPE factors cover (its long factors are "
                             "not implemented); lower --context");
    }
  }
  if (options.max_batch_tokens <= 0) return InvalidArgument("max_batch_tokens must be positive");
  exec->max_seq_ = max_seq;
  exec->max_batch_tokens_ = options.max_batch_tokens;
  exec->placement_ = placement;
  if (placement.stages.empty()) return InvalidArgument("placement has no stages");
  if (options.kv_blocks < 0) return InvalidArgument("kv_blocks must be >= 0");
  if (options.kept_states < 0) return InvalidArgument("kept_states must be >= 0");
  const ModelSpec& spec = ckpt->tensors.spec;
  const bool recurrent = spec.count(LayerKind::kGatedDeltaNet) > 0;
  const bool sliding = spec.count(LayerKind::kSlidingAttention) > 0;
  exec->has_slot_state_ = recurrent || sliding;
  exec->kept_states_ = recurrent && !sliding ? options.kept_states : 0;
  KvCacheConfig kv{options.max_slots, max_seq, options.kv_blocks, exec->kept_states_};
  exec->kv_blocks_ = kv.pool_blocks();
  for (size_t i = 0; i < placement.stages.size(); ++i) {
    const PlacementStage& stage = placement.stages[i];
    TS_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                        CreateBackend(stage.backend, options.backend));
    // A head-only last stage (placement.h) holds no layers.
    if (stage.layers.size() > 0) TS_RETURN_IF_ERROR(backend->LoadLayers(*ckpt, stage.layers, kv));
    if (i + 1 == placement.stages.size()) TS_RETURN_IF_ERROR(backend->LoadHead(*ckpt));
    if (stage.layers.size() > 0) exec->layer_backends_.push_back(backend.get());
    exec->backends_.push_back(std::move(backend));
  }
  TS_RETURN_IF_ERROR(exec->ChooseEmbeddingSource(*ckpt));
  exec->hidden_.resize(static_cast<size_t>(options.max_batch_tokens * ckpt->tensors.spec.hidden));
  exec->last_rows_.resize(static_cast<size_t>(options.max_slots * ckpt->tensors.spec.hidden));
  exec->max_slots_ = options.max_slots;
  exec->ckpt_ = std::move(ckpt);
  return exec;
}

size_t ModelExecutor::resident_weight_bytes() const {
  size_t n = 0;
  for (const auto& b : backends_) n += b->resident_weight_bytes();
  return n;
}

int64_t ModelExecutor::ResumablePosition(int slot, int64_t wanted) const {
  int64_t pos = wanted;
  for (const Backend* b : layer_backends_) pos = std::min(pos, b->ResumablePosition(slot, pos));
  return pos;
}

Status ModelExecutor::CopySlotState(int from, int to, int64_t positions, int64_t source_positions) {
  if (!has_slot_state_) return Status::Ok();
  for (Backend* b : layer_backends_) {
    TS_RETURN_IF_ERROR(b->CopySlotState(from, to, positions, source_positions));
  }
  return Status::Ok();
}

Status ModelExecutor::KeepSlotState(int slot, int64_t positions, int entry) {
  if (entry < 0 || entry >= kept_states_) return InvalidArgument("no such kept state");
  for (Backend* b : layer_backends_) TS_RETURN_IF_ERROR(b->KeepSlotState(slot, positions, entry));
  return Status::Ok();
}

Status ModelExecutor::RestoreSlotState(int entry, int slot, int64_t positions) {
  if (entry < 0 || entry >= kept_states_) return InvalidArgument("no such kept state");
  for (Backend* b : layer_backends_)
    TS_RETURN_IF_ERROR(b->RestoreSlotState(entry, slot, positions));
  return Status::Ok();
}

Status ModelExecutor::CopyKvBlock(int32_t from, int32_t to, int64_t positions) {
  for (Backend* b : layer_backends_) TS_RETURN_IF_ERROR(b->CopyKvBlock(from, to, positions));
  return Status::Ok();
}

Status ModelExecutor::ChooseEmbeddingSource(const Checkpoint& ckpt) {
  if (const TensorInfo* embed = ckpt.tensors.embed.info) {
    embed_from_head_ = false;
    embedding_source_ = embed->name + " (" + std::string(DTypeName(embed->dtype)) + ", host)";
    return Status::Ok();
  }
  Backend& head = *backends_.back();
  if (!head.CanEmbedFromHead()) {
    return Unsupported(ckpt.dir + " stores its tied token embedding only as the packed LM head, " +
                       "and the head's backend (" + head.name() +
                       ") cannot read rows of it; place the head on the cpu backend");
  }
  embed_from_head_ = true;
  embedding_source_ =
      "rows of the tied LM head on " + head.name() + "#" + std::to_string(backends_.size() - 1);
  return Status::Ok();
}

Status ModelExecutor::Embed(std::span<const int32_t> tokens, std::span<float> hidden) {
  const ModelSpec& d = spec();
  for (int32_t id : tokens) {
    if (id < 0 || id >= d.vocab) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                             std::to_string(d.vocab - 1) + ")");
    }
  }
  if (embed_from_head_) {
    TS_RETURN_IF_ERROR(backends_.back()->EmbedFromHead(tokens, hidden));
    // The family's embedding scale (gemma3, minicpm); the head's rows are unscaled.
    if (const float scale = ckpt_->tensors.embed_lookup_scale; scale != 1.0f) {
      for (float& v : hidden) v *= scale;
    }
    return Status::Ok();
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    TS_RETURN_IF_ERROR(WidenRowsToF32(ckpt_->tensors.embed, tokens[i], 1,
                                      hidden.subspan(i * d.hidden, static_cast<size_t>(d.hidden))));
  }
  return Status::Ok();
}

Status ModelExecutor::Forward(int slot, int64_t start_pos, std::span<const int32_t> tokens,
                              std::span<float> last_logits, std::span<float> all_logits) {
  const ModelSpec& d = spec();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return InvalidArgument("nothing to run: no tokens");
  if (start_pos < 0 || start_pos + n > max_seq_) {
    return OutOfRange("sequence of " + std::to_string(start_pos + n) +
                      " tokens exceeds the context of " + std::to_string(max_seq_));
  }
  if (last_logits.size() != static_cast<size_t>(d.vocab)) {
    return Internal("last_logits must hold vocab_size floats");
  }
  if (!all_logits.empty() && all_logits.size() != static_cast<size_t>(n * d.vocab)) {
    return Internal("all_logits must hold n * vocab_size floats");
  }
  Backend& head = *backends_.back();
  for (int64_t done = 0; done < n;) {
    int64_t chunk = std::min(max_batch_tokens_, n - done);
    std::span<float> hidden(hidden_.data(), static_cast<size_t>(chunk * d.hidden));
    TS_RETURN_IF_ERROR(
        Embed(tokens.subspan(static_cast<size_t>(done), static_cast<size_t>(chunk)), hidden));
    ForwardBatch batch{{SequenceChunk{slot, start_pos + done, chunk, {}}}};  // identity layout
    for (Backend* backend : layer_backends_)
      TS_RETURN_IF_ERROR(backend->ForwardLayers(batch, hidden));
    if (!all_logits.empty()) {
      TS_RETURN_IF_ERROR(
          head.ComputeLogits(hidden, chunk,
                             all_logits.subspan(static_cast<size_t>(done * d.vocab),
                                                static_cast<size_t>(chunk * d.vocab)),
                             LogitRows::kPositions));
    }
    done += chunk;
    if (done == n) {
      auto last_row = hidden.subspan(static_cast<size_t>((chunk - 1) * d.hidden),
                                     static_cast<size_t>(d.hidden));
      TS_RETURN_IF_ERROR(head.ComputeLogits(last_row, 1, last_logits, LogitRows::kOnePerSequence));
    }
  }
  return Status::Ok();
}

Status ModelExecutor::Step(std::span<const StepInput> inputs, std::span<float> logits,
                           std::span<float> final_hidden) {
  const ModelSpec& d = spec();
  const size_t hidden = static_cast<size_t>(d.hidden);
  if (inputs.empty()) return InvalidArgument("nothing to run: no sequences");
  if (static_cast<int64_t>(inputs.size()) > max_slots_) return Internal("more inputs than slots");
  if (!logits.empty() && logits.size() != inputs.size() * static_cast<size_t>(d.vocab)) {
    return Internal("logits must hold one vocab_size row per input");
  }
  if (!final_hidden.empty() && final_hidden.size() != inputs.size() * hidden) {
    return Internal("final_hidden must hold one hidden_size row per input");
  }
  // One-token inputs lead the batch (ForwardBatch's rule); `order` maps batch order to inputs.
  order_.clear();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].tokens.size() == 1) order_.push_back(i);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].tokens.size() != 1) order_.push_back(i);
  ForwardBatch& batch = batch_;
  batch.chunks.clear();
  size_t rows = 0;
  for (size_t i : order_) {
    const StepInput& in = inputs[i];
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    if (n == 0) return InvalidArgument("nothing to run for slot " + std::to_string(in.slot));
    if (in.start_pos < 0 || in.start_pos + n > max_seq_) {
      return OutOfRange("sequence of " + std::to_string(in.start_pos + n) +
                        " tokens exceeds the context of " + std::to_string(max_seq_));
    }
    if (static_cast<int64_t>(rows) + n > max_batch_tokens_) {
      return InvalidArgument("a step of more than " + std::to_string(max_batch_tokens_) +
                             " tokens");
    }
    TS_RETURN_IF_ERROR(Embed(
        in.tokens, std::span<float>(hidden_.data() + rows * hidden, in.tokens.size() * hidden)));
    batch.chunks.push_back({in.slot, in.start_pos, n, in.blocks});
    rows += in.tokens.size();
  }
  std::span<float> all(hidden_.data(), rows * hidden);
  for (Backend* backend : layer_backends_) TS_RETURN_IF_ERROR(backend->ForwardLayers(batch, all));
  // Each input's last row, in input order, through the head as rows of different sequences.
  size_t end = 0;
  for (size_t i : order_) {
    end += inputs[i].tokens.size();
    std::copy_n(hidden_.data() + (end - 1) * hidden, hidden, last_rows_.data() + i * hidden);
  }
  const std::span<const float> last(last_rows_.data(), inputs.size() * hidden);
  const int64_t n_rows = static_cast<int64_t>(inputs.size());
  if (!final_hidden.empty()) {
    TS_RETURN_IF_ERROR(backends_.back()->FinalNorm(last, n_rows, final_hidden));
  }
  if (logits.empty()) return Status::Ok();
  return backends_.back()->ComputeLogits(last, n_rows, logits, LogitRows::kOnePerSequence);
}

}  // namespace tessera
