// The one RoPE of every backend: the inverse frequencies a config asks for (plain, or with
// Llama 3's frequency scaling) and the cos/sin table the backends read, computed in double
// and stored as float, so that every backend (and a hybrid placement) rotates identically.
//
//   RopeTable rope = RopeTable::Build(ckpt.config, dims.head_dim, max_seq);
//   ApplyRotateHalf(q_head, rope.cos_at(pos), rope.sin_at(pos), rope.half());
#pragma once

#include <cstdint>
#include <vector>

#include "format/model_config.h"

namespace tessera {

// theta^(-2i/head_dim) for i < head_dim/2, then Llama 3's scaling when the config has it
// (transformers' _compute_llama3_parameters, in double).
std::vector<double> RopeInverseFrequencies(const ModelConfig& config, int64_t head_dim);

class RopeTable {
 public:
  // cos/sin of pos * inv_freq[i] for every pos < max_seq and i < head_dim / 2.
  static RopeTable Build(const ModelConfig& config, int64_t head_dim, int64_t max_seq);

  int64_t half() const { return half_; }
  const float* cos_at(int64_t pos) const { return cos_.data() + pos * half_; }
  const float* sin_at(int64_t pos) const { return sin_.data() + pos * half_; }

 private:
  int64_t half_ = 0;
  std::vector<float> cos_;  // [max_seq][half]
  std::vector<float> sin_;
};

}  // namespace tessera
