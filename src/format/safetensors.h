// Safetensors reading (mmap, every header field bounds-checked before use) and writing.
//
//   TS_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open("model.safetensors"));
//   const TensorInfo* t = file.Find("model.norm.weight");
//   std::vector<float> w(t->num_elements);
//   TS_RETURN_IF_ERROR(CopyTensorToF32(*t, w));
//
//   TS_ASSIGN_OR_RETURN(auto ckpt, CheckpointTensors::Open("/models/qwen3"));  // 1..N shards
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
#include "format/dtype.h"
#include "format/ggml_type.h"

namespace tessera {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;     // row-major, outermost first
  uint64_t num_elements = 0;      // product of shape (1 for a scalar)
  std::span<const uint8_t> data;  // points into the mapped file; size = num_elements * dtype size
  std::string file;               // the shard it lives in (for messages)
  GgmlType ggml_type = GgmlType::kF32;  // dtype kGgmlBlocks: the ggml block type of `data`
};

class SafetensorsFile {
 public:
  // Maps the file and validates the whole header: length, JSON, dtypes, shapes, offsets
  // (in range, non-overlapping, matching element counts). Errors name the file and field.
  // A tensor name written twice in the header is refused (JSON would silently keep the
  // last). Gaps between tensors are allowed; bytes no tensor claims are ignored.
  static Expected<SafetensorsFile> Open(const std::string& path);

  const TensorInfo* Find(std::string_view name) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<MappedFile> file_;  // shared so TensorInfo spans stay valid across moves
  std::vector<TensorInfo> tensors_;   // sorted by name
  std::map<std::string, std::string> metadata_;
};

// All tensors of a Hugging Face checkpoint directory: model.safetensors, or the shards named
// by model.safetensors.index.json (weight_map). A tensor in two shards, a shard the index
// names that is missing, or a tensor the index promises that its shard lacks, is an error.
class CheckpointTensors {
 public:
  static Expected<CheckpointTensors> Open(const std::string& dir);
  // Tensors that live in another container (a GGUF file): their spans point into memory that
  // `owner` keeps alive. A name given twice is refused.
  static Expected<CheckpointTensors> FromTensors(std::vector<TensorInfo> tensors,
                                                 std::shared_ptr<const void> owner);

  CheckpointTensors() = default;  // empty: no tensors
  // Move-only: by_name_ points into shards_, which a copy would not share.
  CheckpointTensors(CheckpointTensors&&) = default;
  CheckpointTensors& operator=(CheckpointTensors&&) = default;
  CheckpointTensors(const CheckpointTensors&) = delete;
  CheckpointTensors& operator=(const CheckpointTensors&) = delete;

  const TensorInfo* Find(std::string_view name) const;
  std::vector<std::string> Names() const;
  size_t size() const { return by_name_.size(); }
  size_t shard_count() const { return shards_.size(); }
  // The __metadata__ of the first shard (empty when there is none).
  const std::map<std::string, std::string>& first_shard_metadata() const;

 private:
  std::vector<SafetensorsFile> shards_;
  std::vector<TensorInfo> adopted_;    // FromTensors' tensors
  std::shared_ptr<const void> owner_;  // what adopted_'s spans point into
  std::map<std::string, const TensorInfo*, std::less<>> by_name_;
};

// Converts any F32/F16/BF16 tensor to fp32; `out` must hold exactly num_elements.
Status CopyTensorToF32(const TensorInfo& tensor, std::span<float> out);

// Writing, for tests, `tessera synth` and packages. Tensors are laid out in the given order,
// each 8-byte aligned in the data section, header padded with spaces to a multiple of 8.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // num_elements * DTypeSize(dtype) little-endian bytes
};
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata = {});
// Convenience: packs fp32 values into `dtype` (F32, F16 or BF16, round to nearest even).
// For any other dtype the bytes stay empty, and WriteSafetensors refuses the tensor (unless
// it has zero elements); a value count that does not match the shape is refused there too.
TensorToWrite MakeTensor(std::string name, DType dtype, std::vector<int64_t> shape,
                         std::span<const float> values);

}  // namespace tessera
