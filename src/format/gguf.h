// GGUF (llama.cpp's model file, versions 2 and 3, little-endian) read in place: the file is
// mapped, every count, length, offset and size is checked against the file before it is used
// or allocated for, and tensor data stays in the map (spans into it).
//
//   TS_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Open("qwen3-0.6b-q8_0.gguf"));
//   TS_ASSIGN_OR_RETURN(std::string_view arch, gguf.GetString("general.architecture"));
//   TS_ASSIGN_OR_RETURN(uint32_t layers, gguf.GetU32(std::string(arch) + ".block_count"));
//   TS_ASSIGN_OR_RETURN(auto tokens, gguf.GetStringArray("tokenizer.ggml.tokens"));
//   const GgufTensor* q = gguf.FindTensor("blk.0.attn_q.weight");
//   q->dims[0];  // ggml order: dims[0] is the contiguous (innermost) one
//
// What is refused, each with one line naming the file and the problem: a wrong magic, version
// 1 or > 3, a big-endian file, counts or lengths that cannot fit in the rest of the file, an
// unknown value type, arrays of arrays, duplicate keys or tensor names, a tensor name over 64
// bytes or not UTF-8, 0 or more than 4 dimensions, a zero dimension, an unknown ggml type, a
// first dimension that is not whole blocks, a general.alignment that is not a power of two, a
// tensor offset that is not aligned, runs past the file or overlaps another tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "format/ggml_type.h"

namespace tessera {

// GGUF's metadata value types, numbered as the file numbers them.
enum class GgufValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view GgufValueTypeName(GgufValueType type);  // "u32", "string", "array", ...

// One metadata value. Scalars keep their little-endian bytes (decoded by the accessors);
// strings and string-array items point into the mapped file.
struct GgufValue {
  GgufValueType type = GgufValueType::kU8;
  std::span<const uint8_t> scalar;  // the bytes of a number or bool
  std::string_view string;          // kString
  // kArray: the items' type and count; numbers' bytes packed, or the strings.
  GgufValueType item_type = GgufValueType::kU8;
  uint64_t item_count = 0;
  std::span<const uint8_t> items;         // numeric / bool items, item_count * item size bytes
  std::vector<std::string_view> strings;  // string items
};

// For messages: "u32 28", "string \"llama\"", "array of 151936 string".
std::string DescribeGgufValue(const GgufValue& value);

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<uint64_t> dims;     // ggml order, innermost first; 1 to 4 of them, each >= 1
  uint64_t num_elements = 0;      // product of dims
  uint64_t offset = 0;            // from the start of the data section, as written
  std::span<const uint8_t> data;  // in the mapped file, exactly the tensor's bytes
  uint64_t rows() const { return dims.empty() ? 0 : num_elements / dims[0]; }
};

class GgufFile {
 public:
  static Expected<GgufFile> Open(const std::string& path);
  // The same parse over bytes the caller keeps alive as long as the result (tests, fuzzing);
  // `name` stands for the file in messages.
  static Expected<GgufFile> Parse(std::string name, std::span<const uint8_t> bytes);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts

  // Metadata, in file order, and by key.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Typed reads. A missing key is kNotFound; a value of another type kCorrupt; both name the
  // key and what was found. The integer reads take any integer type whose value fits (writers
  // differ: llama.cpp writes u32 where others write i32 or u64); GetF32 takes f32 or f64.
  Expected<std::string_view> GetString(std::string_view key) const;
  Expected<uint32_t> GetU32(std::string_view key) const;
  Expected<int32_t> GetI32(std::string_view key) const;
  Expected<uint64_t> GetU64(std::string_view key) const;
  Expected<float> GetF32(std::string_view key) const;
  Expected<bool> GetBool(std::string_view key) const;
  // Arrays: any array (its item type and count for the caller to check), or typed.
  Expected<const GgufValue*> GetArray(std::string_view key) const;
  Expected<std::span<const std::string_view>> GetStringArray(std::string_view key) const;
  Expected<std::vector<float>> GetF32Array(std::string_view key) const;    // f32 or f64 items
  Expected<std::vector<int32_t>> GetI32Array(std::string_view key) const;  // integers that fit

  const std::vector<GgufTensor>& tensors() const { return tensors_; }  // in file order
  const GgufTensor* FindTensor(std::string_view name) const;

 private:
  Expected<int64_t> GetInteger(std::string_view key, int64_t min, uint64_t max,
                               const char* wanted) const;

  std::string path_;
  std::shared_ptr<const MappedFile> file_;  // null for Parse(); spans point into it
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace tessera
