#include "model/rope.h"

#include <cmath>
#include <numbers>

namespace tessera {

std::vector<double> RopeInverseFrequencies(const ModelConfig& config, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv[static_cast<size_t>(i)] =
        std::pow(config.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  if (!config.rope_llama3) return inv;
  // Llama 3: long wavelengths (beyond the original context / low_freq_factor) are stretched by
  // `factor`; short ones (below original / high_freq_factor) are kept; between the two the
  // frequency is blended linearly in original / wavelength.
  const Llama3RopeScaling& s = *config.rope_llama3;
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
  return inv;
}

RopeTable RopeTable::Build(const ModelConfig& config, int64_t head_dim, int64_t max_seq) {
  RopeTable t;
  t.half_ = head_dim / 2;
  const std::vector<double> inv = RopeInverseFrequencies(config, head_dim);
  t.cos_.assign(static_cast<size_t>(max_seq * t.half_), 0.0f);
  t.sin_.assign(static_cast<size_t>(max_seq * t.half_), 0.0f);
  for (int64_t p = 0; p < max_seq; ++p) {
    for (int64_t i = 0; i < t.half_; ++i) {
      const double angle = static_cast<double>(p) * inv[static_cast<size_t>(i)];
      t.cos_[static_cast<size_t>(p * t.half_ + i)] = static_cast<float>(std::cos(angle));
      t.sin_[static_cast<size_t>(p * t.half_ + i)] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

}  // namespace tessera
