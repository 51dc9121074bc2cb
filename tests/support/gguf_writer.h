// A small GGUF writer for tests and fuzz seeds: metadata of every value type, tensors laid out
// at aligned offsets, and hooks for writing the lies a hostile file tells (raw values, a
// tensor offset or type that does not match the data).
//
//   test::GgufWriter w;
//   w.AddString("general.architecture", "llama");
//   w.AddU32("llama.block_count", 2);
//   w.AddTensor("token_embd.weight", GgmlType::kF32, {8, 16}, F32Bytes(values));
//   WriteFile(path, w.Build());
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/half.h"
#include "format/ggml_type.h"
#include "format/gguf.h"

namespace tessera::test {

inline void AppendLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void AppendGgufString(std::string* out, std::string_view s) {
  AppendLe(out, s.size(), 8);
  out->append(s);
}
inline std::string F32Bytes(std::span<const float> values) {
  std::string out(values.size() * 4, '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Q8_0 as ggml's reference quantizer makes it: d = amax / 127 stored as f16, q = round(x / d).
// Returns the blocks and, in *dequantized, the values they stand for (d as stored * q).
inline std::string QuantizeQ8_0(const std::vector<float>& x, std::vector<float>* dequantized) {
  std::string out;
  dequantized->resize(x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t d16 = FloatToF16(d);
    out.push_back(static_cast<char>(d16 & 0xff));
    out.push_back(static_cast<char>(d16 >> 8));
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::round(x[32 * b + j] * id));
      out.push_back(static_cast<char>(static_cast<int8_t>(q)));
      (*dequantized)[32 * b + j] = F16ToFloat(d16) * static_cast<float>(q);
    }
  }
  return out;
}

class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // A value exactly as written after the key: type id, then `payload` as given.
  void AddRaw(std::string_view key, uint32_t type, std::string payload) {
    std::string kv;
    AppendGgufString(&kv, key);
    AppendLe(&kv, type, 4);
    kv += payload;
    kvs_.push_back(std::move(kv));
  }
  void AddU8(std::string_view key, uint8_t v) { AddScalar(key, GgufValueType::kU8, v, 1); }
  void AddI8(std::string_view key, int8_t v) { AddScalar(key, GgufValueType::kI8, uint8_t(v), 1); }
  void AddU16(std::string_view key, uint16_t v) { AddScalar(key, GgufValueType::kU16, v, 2); }
  void AddI16(std::string_view key, int16_t v) {
    AddScalar(key, GgufValueType::kI16, uint16_t(v), 2);
  }
  void AddU32(std::string_view key, uint32_t v) { AddScalar(key, GgufValueType::kU32, v, 4); }
  void AddI32(std::string_view key, int32_t v) {
    AddScalar(key, GgufValueType::kI32, uint32_t(v), 4);
  }
  void AddU64(std::string_view key, uint64_t v) { AddScalar(key, GgufValueType::kU64, v, 8); }
  void AddI64(std::string_view key, int64_t v) {
    AddScalar(key, GgufValueType::kI64, uint64_t(v), 8);
  }
  void AddF32(std::string_view key, float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    AddScalar(key, GgufValueType::kF32, bits, 4);
  }
  void AddF64(std::string_view key, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    AddScalar(key, GgufValueType::kF64, bits, 8);
  }
  void AddBool(std::string_view key, bool v) { AddScalar(key, GgufValueType::kBool, v, 1); }
  void AddString(std::string_view key, std::string_view v) {
    std::string payload;
    AppendGgufString(&payload, v);
    AddRaw(key, static_cast<uint32_t>(GgufValueType::kString), payload);
  }
  void AddStringArray(std::string_view key, const std::vector<std::string>& items) {
    std::string payload;
    AppendLe(&payload, static_cast<uint32_t>(GgufValueType::kString), 4);
    AppendLe(&payload, items.size(), 8);
    for (const std::string& s : items) AppendGgufString(&payload, s);
    AddRaw(key, static_cast<uint32_t>(GgufValueType::kArray), payload);
  }
  void AddF32Array(std::string_view key, const std::vector<float>& items) {
    std::string payload;
    AppendLe(&payload, static_cast<uint32_t>(GgufValueType::kF32), 4);
    AppendLe(&payload, items.size(), 8);
    payload += F32Bytes(items);
    AddRaw(key, static_cast<uint32_t>(GgufValueType::kArray), payload);
  }
  void AddBoolArray(std::string_view key, const std::vector<bool>& items) {
    std::string payload;
    AppendLe(&payload, static_cast<uint32_t>(GgufValueType::kBool), 4);
    AppendLe(&payload, items.size(), 8);
    for (bool v : items) payload.push_back(v ? 1 : 0);
    AddRaw(key, static_cast<uint32_t>(GgufValueType::kArray), payload);
  }
  void AddI32Array(std::string_view key, const std::vector<int32_t>& items) {
    std::string payload;
    AppendLe(&payload, static_cast<uint32_t>(GgufValueType::kI32), 4);
    AppendLe(&payload, items.size(), 8);
    for (int32_t v : items) AppendLe(&payload, static_cast<uint32_t>(v), 4);
    AddRaw(key, static_cast<uint32_t>(GgufValueType::kArray), payload);
  }

  // `dims` in ggml order (innermost first); `data` the tensor's bytes. The offset is the next
  // aligned one unless `offset` says otherwise (the data still goes at the computed place).
  void AddTensor(std::string name, GgmlType type, std::vector<uint64_t> dims, std::string data,
                 std::optional<uint64_t> offset = std::nullopt) {
    tensors_.push_back(
        {std::move(name), static_cast<uint32_t>(type), std::move(dims), std::move(data), offset});
  }
  // Drops what was added under `key` / as tensor `name` (to replace it with a bad value);
  // false when there was none.
  bool RemoveKey(std::string_view key) {
    std::string prefix;
    AppendGgufString(&prefix, key);
    for (auto it = kvs_.begin(); it != kvs_.end(); ++it) {
      if (it->rfind(prefix, 0) == 0) {
        kvs_.erase(it);
        return true;
      }
    }
    return false;
  }
  bool RemoveTensor(std::string_view name) {
    for (auto it = tensors_.begin(); it != tensors_.end(); ++it) {
      if (it->name == name) {
        tensors_.erase(it);
        return true;
      }
    }
    return false;
  }
  // Layout alignment (the general.alignment key is written only if added explicitly).
  void SetAlignment(uint64_t alignment) { alignment_ = alignment; }
  // Counts written in the header instead of the true ones.
  void SetCounts(std::optional<uint64_t> tensors, std::optional<uint64_t> kvs) {
    tensor_count_ = tensors;
    kv_count_ = kvs;
  }

  std::string Build() const {
    std::string out = "GGUF";
    AppendLe(&out, version_, 4);
    AppendLe(&out, tensor_count_.value_or(tensors_.size()), 8);
    AppendLe(&out, kv_count_.value_or(kvs_.size()), 8);
    for (const std::string& kv : kvs_) out += kv;
    std::vector<uint64_t> placed;
    uint64_t next = 0;
    for (const Tensor& t : tensors_) {
      placed.push_back(next);
      next = Align(next + t.data.size());
      AppendGgufString(&out, t.name);
      AppendLe(&out, t.dims.size(), 4);
      for (uint64_t d : t.dims) AppendLe(&out, d, 8);
      AppendLe(&out, t.type, 4);
      AppendLe(&out, t.offset.value_or(placed.back()), 8);
    }
    out.resize(Align(out.size()), '\0');
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(data_start + placed[i], '\0');
      out += tensors_[i].data;
    }
    if (!tensors_.empty()) out.resize(data_start + next, '\0');
    return out;
  }

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> dims;
    std::string data;
    std::optional<uint64_t> offset;
  };
  void AddScalar(std::string_view key, GgufValueType type, uint64_t bits, int bytes) {
    std::string payload;
    AppendLe(&payload, bits, bytes);
    AddRaw(key, static_cast<uint32_t>(type), payload);
  }
  uint64_t Align(uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  uint32_t version_;
  uint64_t alignment_ = 32;
  std::optional<uint64_t> tensor_count_, kv_count_;
  std::vector<std::string> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace tessera::test
