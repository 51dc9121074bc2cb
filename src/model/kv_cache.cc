#include "model/kv_cache.h"

#include <limits>
#include <string>

namespace tessera {

template <typename T>
Status BasicKvCache<T>::Allocate(int slots, int64_t layers, int64_t max_seq, int64_t kv_dim,
                                 bool with_keys) {
  if (slots <= 0 || layers < 0 || max_seq <= 0 || kv_dim <= 0) {
    return InvalidArgument("KV cache sizes must be positive");
  }
  // Refuse sizes whose product overflows or exceeds what we would ever want to allocate.
  long double total = static_cast<long double>(slots) * layers * max_seq * kv_dim;
  constexpr long double kMaxElements = static_cast<long double>(1ull << 36);
  if (total > kMaxElements) {
    return ResourceExhausted("KV cache of " + std::to_string(slots) + " slots x " +
                             std::to_string(max_seq) + " positions is too large; lower --context");
  }
  size_t n = static_cast<size_t>(total);
  keys_.Reset();
  if ((with_keys && !keys_.Allocate(n * sizeof(T))) || !values_.Allocate(n * sizeof(T))) {
    keys_.Reset();
    values_.Reset();
    return ResourceExhausted("out of memory allocating the KV cache (" +
                             std::to_string((with_keys ? 2 : 1) * n * sizeof(T) >> 20) +
                             " MiB); lower --context");
  }
  slots_ = slots;
  layers_ = layers;
  max_seq_ = max_seq;
  kv_dim_ = kv_dim;
  return Status::Ok();
}

template class BasicKvCache<float>;
template class BasicKvCache<uint16_t>;

}  // namespace tessera
