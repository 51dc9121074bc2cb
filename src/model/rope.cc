#include "model/rope.h"

#include <cmath>
#include <numbers>

namespace tessera {
namespace {

// Llama 3: long wavelengths (beyond the original context / low_freq_factor) are stretched by
// `factor`; short ones (below original / high_freq_factor) are kept; between the two the
// frequency is blended linearly in original / wavelength.
void ApplyLlama3Scaling(const Llama3RopeScaling& s, std::vector<double>& inv) {
  const double original = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = original / s.low_freq_factor;
  const double high_freq_wavelen = original / s.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2.0 * std::numbers::pi / f;
    if (wavelen > low_freq_wavelen) {
      f /= s.factor;
    } else if (wavelen >= high_freq_wavelen) {
      const double smooth =
          (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
}

}  // namespace

RopeSpec MakeRopeSpec(const ModelConfig& config, bool sliding_layers) {
  RopeSpec spec;
  spec.rotary_dim =
      static_cast<int64_t>(static_cast<double>(config.head_dim) * config.partial_rotary_factor);
  const int64_t half = spec.rotary_dim / 2;
  const double theta = sliding_layers ? config.rope_local_theta : config.rope_theta;
  spec.inv_freq.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    spec.inv_freq[static_cast<size_t>(i)] =
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(spec.rotary_dim));
  }
  if (sliding_layers) return spec;
  if (config.rope_llama3) ApplyLlama3Scaling(*config.rope_llama3, spec.inv_freq);
  for (double& f : spec.inv_freq) f /= config.rope_linear_factor;
  if (const auto& lr = config.rope_longrope) {
    // Short factors: positions up to the original context (beyond it the long factors would
    // apply, and keys cached with the short ones would be stale; the executor refuses it).
    for (int64_t i = 0; i < half; ++i) {
      spec.inv_freq[static_cast<size_t>(i)] /= lr->short_factor[static_cast<size_t>(i)];
    }
    const double original = static_cast<double>(lr->original_max_position_embeddings);
    const double scale = static_cast<double>(config.max_position_embeddings) / original;
    if (scale > 1.0) spec.attention_factor = std::sqrt(1.0 + std::log(scale) / std::log(original));
    spec.max_positions = lr->original_max_position_embeddings;
  }
  return spec;
}

RopeTable RopeTable::Build(const RopeSpec& spec, int64_t max_seq) {
  RopeTable t;
  t.half_ = spec.rotary_dim / 2;
  t.cos_.assign(static_cast<size_t>(max_seq * t.half_), 0.0f);
  t.sin_.assign(static_cast<size_t>(max_seq * t.half_), 0.0f);
  for (int64_t p = 0; p < max_seq; ++p) {
    for (int64_t i = 0; i < t.half_; ++i) {
      const double angle = static_cast<double>(p) * spec.inv_freq[static_cast<size_t>(i)];
      const auto at = static_cast<size_t>(p * t.half_ + i);
      t.cos_[at] = static_cast<float>(std::cos(angle) * spec.attention_factor);
      t.sin_[at] = static_cast<float>(std::sin(angle) * spec.attention_factor);
    }
  }
  return t;
}

}  // namespace tessera
