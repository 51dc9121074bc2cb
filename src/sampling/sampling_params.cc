#include "sampling/sampling_params.h"

#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <string_view>

#include "sampling/rng.h"

namespace tessera {
namespace {

// Where a value came from, appended to an error so that a bad model default is not blamed on
// the user's request.
enum class Origin { kRequest, kModelDefault };

std::string_view OriginSuffix(Origin origin) {
  return origin == Origin::kModelDefault ? " (from the model's generation_config.json)" : "";
}

// Shortest text that reads back as the same double: "3.5", "nan", "-inf".
std::string FormatNumber(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// value in [low, high], or (low, high] when low_is_open. NaN fails both comparisons below.
Status CheckReal(std::string_view field, double value, double low, double high, bool low_is_open,
                 Origin origin) {
  const bool above_low = low_is_open ? value > low : value >= low;
  if (above_low && value <= high) return Status::Ok();
  std::string range =
      low_is_open ? "greater than " + FormatNumber(low) + " and at most " + FormatNumber(high)
                  : "between " + FormatNumber(low) + " and " + FormatNumber(high);
  return InvalidArgument(std::string(field) + " must be " + range + ", got " + FormatNumber(value) +
                         std::string(OriginSuffix(origin)));
}

Status CheckTopK(int64_t top_k, Origin origin) {
  if (top_k >= 0) return Status::Ok();
  return InvalidArgument("top_k must be 0 (off) or a positive integer, got " +
                         std::to_string(top_k) + std::string(OriginSuffix(origin)));
}

Status CheckSeed(uint64_t seed) {
  if (seed <= static_cast<uint64_t>(kMaxSamplingSeed)) return Status::Ok();
  return InvalidArgument("seed must be between 0 and " + std::to_string(kMaxSamplingSeed) +
                         ", got " + std::to_string(seed));
}

// The request's value if set, else the model's if set, else the built-in one.
template <typename T>
struct Chosen {
  T value;
  Origin origin;
};

template <typename T>
Chosen<T> Choose(const std::optional<T>& requested, const std::optional<T>& model_default,
                 T builtin) {
  if (requested) return {*requested, Origin::kRequest};
  if (model_default) return {*model_default, Origin::kModelDefault};
  return {builtin, Origin::kRequest};
}

}  // namespace

Status ValidateResolvedSamplingParams(const ResolvedSamplingParams& p) {
  const Origin r = Origin::kRequest;
  TS_RETURN_IF_ERROR(CheckReal("temperature", p.temperature, 0.0, 2.0, false, r));
  TS_RETURN_IF_ERROR(CheckTopK(p.top_k, r));
  TS_RETURN_IF_ERROR(CheckReal("top_p", p.top_p, 0.0, 1.0, true, r));
  TS_RETURN_IF_ERROR(CheckReal("min_p", p.min_p, 0.0, 1.0, false, r));
  TS_RETURN_IF_ERROR(CheckReal("repetition_penalty", p.repetition_penalty, 0.1, 2.0, false, r));
  TS_RETURN_IF_ERROR(CheckReal("presence_penalty", p.presence_penalty, -2.0, 2.0, false, r));
  TS_RETURN_IF_ERROR(CheckReal("frequency_penalty", p.frequency_penalty, -2.0, 2.0, false, r));
  TS_RETURN_IF_ERROR(CheckSeed(p.seed));
  const bool greedy_temperature = p.temperature == 0.0;
  const bool greedy_mode = p.mode == SamplingMode::kGreedy;
  if (greedy_temperature != greedy_mode) {
    return InvalidArgument(std::string("sampling mode must be ") +
                           (greedy_temperature ? "greedy" : "sample") + " when temperature is " +
                           FormatNumber(p.temperature) + ", got " +
                           (greedy_mode ? "greedy" : "sample"));
  }
  return Status::Ok();
}

std::optional<SamplingFieldError> CheckRequestedSampling(const SamplingParams& r) {
  const Origin o = Origin::kRequest;
  struct Real {
    std::string_view field;
    const std::optional<double>& value;
    double low, high;
    bool low_is_open;
  };
  const Real reals[] = {{"temperature", r.temperature, 0.0, 2.0, false},
                        {"top_p", r.top_p, 0.0, 1.0, true},
                        {"min_p", r.min_p, 0.0, 1.0, false},
                        {"repetition_penalty", r.repetition_penalty, 0.1, 2.0, false},
                        {"presence_penalty", r.presence_penalty, -2.0, 2.0, false},
                        {"frequency_penalty", r.frequency_penalty, -2.0, 2.0, false}};
  for (const Real& f : reals) {
    if (!f.value) continue;
    if (Status st = CheckReal(f.field, *f.value, f.low, f.high, f.low_is_open, o); !st.ok()) {
      return SamplingFieldError{f.field, std::move(st)};
    }
  }
  if (r.top_k) {
    if (Status st = CheckTopK(*r.top_k, o); !st.ok()) return SamplingFieldError{"top_k", st};
  }
  if (r.seed && *r.seed < 0) {
    return SamplingFieldError{
        "seed", InvalidArgument("seed must be between 0 and " + std::to_string(kMaxSamplingSeed) +
                                ", got " + std::to_string(*r.seed))};
  }
  return std::nullopt;
}

Expected<ResolvedSamplingParams> ResolveSamplingParams(const SamplingParams& request,
                                                       const SamplingDefaults& model_defaults) {
  // do_sample == false turns the model's default into greedy decoding; its temperature is
  // then not consulted at all (and so not validated), exactly as transformers ignores it.
  const bool model_wants_greedy =
      model_defaults.do_sample.has_value() && !*model_defaults.do_sample;
  const std::optional<double> model_temperature =
      model_wants_greedy ? std::optional<double>(0.0) : model_defaults.temperature;

  const auto temperature = Choose(request.temperature, model_temperature, 1.0);
  const auto top_k = Choose<int64_t>(request.top_k, model_defaults.top_k, 0);
  const auto top_p = Choose(request.top_p, model_defaults.top_p, 1.0);
  const auto min_p = Choose(request.min_p, model_defaults.min_p, 0.0);
  const auto repetition =
      Choose(request.repetition_penalty, model_defaults.repetition_penalty, 1.0);
  const double presence = request.presence_penalty.value_or(0.0);
  const double frequency = request.frequency_penalty.value_or(0.0);

  const Origin r = Origin::kRequest;
  TS_RETURN_IF_ERROR(
      CheckReal("temperature", temperature.value, 0.0, 2.0, false, temperature.origin));
  TS_RETURN_IF_ERROR(CheckTopK(top_k.value, top_k.origin));
  TS_RETURN_IF_ERROR(CheckReal("top_p", top_p.value, 0.0, 1.0, true, top_p.origin));
  TS_RETURN_IF_ERROR(CheckReal("min_p", min_p.value, 0.0, 1.0, false, min_p.origin));
  TS_RETURN_IF_ERROR(
      CheckReal("repetition_penalty", repetition.value, 0.1, 2.0, false, repetition.origin));
  TS_RETURN_IF_ERROR(CheckReal("presence_penalty", presence, -2.0, 2.0, false, r));
  TS_RETURN_IF_ERROR(CheckReal("frequency_penalty", frequency, -2.0, 2.0, false, r));
  if (request.seed && (*request.seed < 0)) {
    return InvalidArgument("seed must be between 0 and " + std::to_string(kMaxSamplingSeed) +
                           ", got " + std::to_string(*request.seed));
  }

  ResolvedSamplingParams resolved;
  resolved.mode = temperature.value == 0.0 ? SamplingMode::kGreedy : SamplingMode::kSample;
  resolved.temperature = temperature.value;
  resolved.top_k = top_k.value;
  resolved.top_p = top_p.value;
  resolved.min_p = min_p.value;
  resolved.repetition_penalty = repetition.value;
  resolved.presence_penalty = presence;
  resolved.frequency_penalty = frequency;
  if (request.seed) {
    resolved.seed = static_cast<uint64_t>(*request.seed);
  } else if (resolved.mode == SamplingMode::kSample) {
    resolved.seed = GenerateSamplingSeed();
    resolved.seed_was_generated = true;
  }
  return resolved;
}

uint64_t GenerateSamplingSeed() {
  uint64_t bits = 0;
  try {
    // libstdc++ throws when no entropy source exists; that must not escape this library.
    std::random_device device;
    bits = (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
  } catch (...) {
    static std::atomic<uint64_t> counter{0};
    uint64_t mixer =
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (counter.fetch_add(1, std::memory_order_relaxed) << 48);
    bits = SplitMix64Next(&mixer);
  }
  return bits & kMaxDrawnSamplingSeed;
}

}  // namespace tessera
