// The one RoPE of every backend: the spec a config asks for (plain, Llama 3's frequency
// scaling, linear position scaling, LongRoPE; partial rotary; gemma3's local theta) and the
// cos/sin table the backends read, computed in double and stored as float, so that every
// backend (and a hybrid placement) rotates identically.
//
//   RopeSpec spec = MakeRopeSpec(config, /*sliding_layers=*/false);
//   RopeTable rope = RopeTable::Build(spec, max_seq);
//   // pairs (x[i], x[i + half]) for i < rope.half(), half = spec.rotary_dim / 2
#pragma once

#include <cstdint>
#include <vector>

#include "format/model_config.h"
#include "model/model_spec.h"

namespace tessera {

// The RoPE of full-attention layers, or (sliding_layers) of gemma3's local layers: theta from
// rope_local_base_freq and no scaling.
RopeSpec MakeRopeSpec(const ModelConfig& config, bool sliding_layers);

class RopeTable {
 public:
  // cos/sin (times attention_factor) of pos * inv_freq[i] for pos < max_seq, i < half().
  static RopeTable Build(const RopeSpec& spec, int64_t max_seq);

  int64_t half() const { return half_; }
  const float* cos_at(int64_t pos) const { return cos_.data() + pos * half_; }
  const float* sin_at(int64_t pos) const { return sin_.data() + pos * half_; }

 private:
  int64_t half_ = 0;
  std::vector<float> cos_;  // [max_seq][half]
  std::vector<float> sin_;
};

}  // namespace tessera
