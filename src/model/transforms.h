// Checkpoint transforms applied at load so a model fits a program built for another shape,
// each exact: the transformed model computes bit-identical logits (tests/model/
// transforms_test.cc proves it on synthetic checkpoints, reference and cpu backends).
//
//   TS_ASSIGN_OR_RETURN(std::shared_ptr<const Checkpoint> ckpt, OpenCheckpoint(dir));
//   TS_ASSIGN_OR_RETURN(ckpt, ReplicateKvHeads(ckpt, 8));   // 16:2 GQA -> 16:8
//   TS_ASSIGN_OR_RETURN(ckpt, InjectIdentityQkNorm(ckpt));  // llama/qwen2 -> qwen3-shaped
//   ModelExecutor::Load(ckpt, placement, options);
//
// A transformed checkpoint is a view: it holds the source checkpoint (whose mapped files its
// unchanged tensors still point into) and owns only the tensors it rewrote, in the source's
// dtype. Its `files` is empty; `dir`, the generation config and everything else are the
// source's.
//
// KV-head replication. With heads query heads and kv KV heads, query head h reads KV head
// h / (heads / kv). Repeating each KV head r = target / kv times in a row (rows of k_proj,
// v_proj, k_bias, v_bias; k_norm is per head_dim and stays) makes new head j a copy of original
// head j / r, and query head h now reads j = h / (heads / target), a copy of head
// (h / (heads / target)) / r = h / (heads / kv): the same head, so the same keys and values,
// computed by the same dot products over the same rows. Copying rows is exact in any dtype.
// Tiling (new head j = original j % kv) would pair queries with the wrong heads; the test
// checks that it changes the logits, so the identity is not vacuous.
//
// QK-norm identity injection. A Qwen3-shaped program normalises each q and k head before RoPE:
// y = x / sqrt(mean(x^2) + eps) * w. No choice of w makes that the identity: it maps x and 2x
// to (nearly) the same y, so the attention scores lose the heads' magnitudes, which the model
// without the norm depends on (the test shows unit weights run as a real RMSNorm change the
// logits). The exact formulation is a pass-through stage: the injected checkpoint binds unit
// q_norm/k_norm weights ([head_dim], the dtype of the model's norms; 1 is exact in F32, F16
// and BF16) and sets spec.qk_norm_identity, while spec.qk_norm stays false. A program with a
// norm stage (shape: spec.qk_norm || spec.qk_norm_identity) runs it as y = x * w without the
// RMS factor, and x * 1.0f == x exactly; a backend without such a stage (reference, cpu) reads
// spec.qk_norm, skips the norm and computes the model as trained. So an unaware backend is
// never wrong, and no backend needed a change.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "model/checkpoint.h"

namespace tessera {

// Each KV head repeated target_kv_heads / kv_heads times (config.num_kv_heads, spec.kv_heads and
// spec.kv_dim updated). InvalidArgument when target_kv_heads is not a positive multiple of the
// model's KV heads, does not divide its query heads, the model has no attention layers, or
// the checkpoint is a package of packed weights (their panels are a backend's layout).
Expected<std::shared_ptr<const Checkpoint>> ReplicateKvHeads(std::shared_ptr<const Checkpoint> ckpt,
                                                             int64_t target_kv_heads);

// Unit q_norm/k_norm bound on every attention layer and spec.qk_norm_identity set (see above).
// InvalidArgument when the model already has q/k norms (real or injected) or no attention
// layers.
Expected<std::shared_ptr<const Checkpoint>> InjectIdentityQkNorm(
    std::shared_ptr<const Checkpoint> ckpt);

}  // namespace tessera
