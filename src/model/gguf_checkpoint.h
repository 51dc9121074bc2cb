// A GGUF file (llama.cpp's format) opened as a tessera checkpoint, in place: its metadata
// becomes the config.json a Hugging Face checkpoint would carry (then parsed and checked by
// ParseModelConfig like any other), its tensor names map back to Hugging Face ones, and its
// tensors stay in the mapped file; block-quantized ones are converted to fp32 tensor by tensor
// (or row range by row range) when a backend widens them (tensor_convert.h), never all at once.
// Only what llama.cpp's converter transformed is copied to undo it: the attn_q/attn_k rows of
// llama and minicpm, which it interleaves per head (still in the file's type), gemma3's norm
// weights, to which it added 1 (F32 copies, 1 subtracted back), and qwen35's (1 + w) norms,
// A_log and regrouped value heads.
//
//   TS_ASSIGN_OR_RETURN(auto ckpt, OpenGgufCheckpoint("/models/qwen3-0.6b-q8_0.gguf"));
//
// Architectures: llama, qwen2, qwen3, gemma3, minicpm, qwen35 (others refused by name; the
// per-family metadata and transforms are in gguf_arch.h). Weight types: those
// gguf_quants.h converts (others refused by name, with the tensor).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "format/gguf.h"
#include "model/checkpoint.h"

namespace tessera {

// The config.json text GGUF metadata stands for (exposed for tests and `tessera show`-like
// callers): model_type, sizes, heads, rope theta, eps, context length, tie, biases, bos/eos.
Expected<std::string> GgufConfigJson(const GgufFile& gguf);

// GGUF tensor name -> Hugging Face name ("blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight") in `architecture` (gemma3 names some norms its own
// way); empty when tessera knows no counterpart.
std::string HfTensorName(std::string_view gguf_name, std::string_view architecture = "llama");

Expected<std::shared_ptr<const Checkpoint>> OpenGgufCheckpoint(const std::string& path);

}  // namespace tessera
