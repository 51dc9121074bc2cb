// Checkpoint: a Hugging Face checkpoint directory opened and validated as a whole:
// config.json, generation_config.json (optional), the safetensors weights (single file or
// sharded), bound to typed per-layer fields. Kept alive (and mapped) while a model uses it.
//
//   TS_ASSIGN_OR_RETURN(std::shared_ptr<const Checkpoint> ckpt, OpenCheckpoint("/models/x"));
//   ckpt->config.num_layers; ckpt->tensors.layers[3].down_proj;
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "format/model_config.h"
#include "format/safetensors.h"
#include "model/model_tensors.h"

namespace tessera {

struct Checkpoint {
  std::string dir;
  ModelConfig config;
  GenerationConfig generation;  // defaults when generation_config.json is absent
  bool has_generation_config = false;
  CheckpointTensors files;
  ModelTensors tensors;  // points into `files`
};

// `dir` is a checkpoint directory, or a GGUF file (model/gguf_checkpoint.h; then `dir` is the
// file's path).
Expected<std::shared_ptr<const Checkpoint>> OpenCheckpoint(const std::string& dir);

// One line for the load log: the architecture (DescribeModelSpec) and what the checkpoint
// holds that is deliberately unused ("ignored: 2 tensors under model.visual. ...").
std::string DescribeCheckpoint(const Checkpoint& ckpt);

}  // namespace tessera
