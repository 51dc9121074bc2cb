#include "format/safetensors.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "base/half.h"
#include "base/utf8.h"
#include "format/json_util.h"

namespace tessera {

// Tensor bytes are read and written in the host's order; safetensors is little-endian.
static_assert(std::endian::native == std::endian::little, "tessera assumes a little-endian host");

namespace {

using nlohmann::json;

// The reference implementation (Rust safetensors) refuses headers past 100 MB; a larger
// length means the file is not a safetensors file, and we must not try to parse it.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kSingleFileName = "model.safetensors";
constexpr const char* kIndexFileName = "model.safetensors.index.json";

uint64_t ReadLittleEndianU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Product of the dimensions, refusing negatives and anything that overflows 64 bits.
Expected<uint64_t> CountElements(const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return Corrupt("shape has a negative dimension " + std::to_string(dim));
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count)) {
      return Corrupt("shape's element count overflows 64 bits");
    }
  }
  return count;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// Reads a header value that must be a non-negative integer fitting in int64.
bool GetNonNegativeInt(const json& value, uint64_t* out) {
  if (!value.is_number_unsigned()) return false;  // nlohmann stores every value >= 0 so
  uint64_t v = value.get<uint64_t>();
  if (v > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = v;
  return true;
}

// Validates one tensor entry of the header and fills `info` (except data/file).
Status ParseTensorEntry(const std::string& where, const std::string& name, const json& entry,
                        uint64_t data_size, TensorInfo* info, uint64_t* begin, uint64_t* end) {
  const std::string prefix = where + ": tensor " + QuoteForMessage(name) + ": ";
  if (!entry.is_object()) {
    return Corrupt(prefix + "entry must be an object with dtype, shape and data_offsets, found " +
                   JsonTypeName(entry));
  }
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return Corrupt(
        prefix + "dtype must be a string such as \"F32\"" +
        (dtype_it == entry.end() ? ", but it is missing" : ", found " + JsonForMessage(*dtype_it)));
  }
  auto dtype = ParseSafetensorsDType(dtype_it->get_ref<const std::string&>());
  if (!dtype) return dtype.status().WithContext(where + ": tensor " + QuoteForMessage(name));

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return Corrupt(
        prefix + "shape must be a list of non-negative integers" +
        (shape_it == entry.end() ? ", but it is missing" : ", found " + JsonForMessage(*shape_it)));
  }
  std::vector<int64_t> shape;
  for (const json& dim : *shape_it) {
    uint64_t d = 0;
    if (!GetNonNegativeInt(dim, &d)) {
      return Corrupt(prefix + "shape must be a list of non-negative integers, found " +
                     JsonForMessage(*shape_it));
    }
    shape.push_back(static_cast<int64_t>(d));
  }
  auto count = CountElements(shape);
  if (!count) return count.status().WithContext(prefix + "shape " + ShapeText(shape));
  uint64_t expected_bytes = 0;
  if (__builtin_mul_overflow(*count, static_cast<uint64_t>(DTypeSize(*dtype)), &expected_bytes)) {
    return Corrupt(prefix + "shape " + ShapeText(shape) + " is too large: its byte size overflows");
  }

  auto offsets_it = entry.find("data_offsets");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !GetNonNegativeInt((*offsets_it)[0], begin) || !GetNonNegativeInt((*offsets_it)[1], end)) {
    return Corrupt(prefix + "data_offsets must be [begin, end], two non-negative integers" +
                   (offsets_it == entry.end() ? ", but it is missing"
                                              : ", found " + JsonForMessage(*offsets_it)));
  }
  const std::string offsets_text =
      "data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) + "]";
  if (*begin > *end) return Corrupt(prefix + offsets_text + " has begin after end");
  if (*end > data_size) {
    return Corrupt(prefix + offsets_text + " runs past the end of the data section (" +
                   std::to_string(data_size) + " bytes); the file may be truncated");
  }
  if (*end - *begin != expected_bytes) {
    return Corrupt(prefix + offsets_text + " spans " + std::to_string(*end - *begin) +
                   " bytes, but shape " + ShapeText(shape) + " of " +
                   std::string(DTypeName(*dtype)) + " needs " + std::to_string(expected_bytes));
  }
  info->name = name;
  info->dtype = *dtype;
  info->shape = std::move(shape);
  info->num_elements = *count;
  return Status::Ok();
}

Status ParseMetadata(const std::string& where, const json& value,
                     std::map<std::string, std::string>* metadata) {
  if (value.is_null()) return Status::Ok();
  if (!value.is_object()) {
    return Corrupt(where + ": __metadata__ must be an object of strings, found " +
                   JsonTypeName(value));
  }
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!it->is_string()) {
      return Corrupt(where + ": __metadata__ " + QuoteForMessage(it.key()) +
                     " must be a string, found " + JsonForMessage(*it));
    }
    (*metadata)[it.key()] = it->get<std::string>();
  }
  return Status::Ok();
}

// A shard named by the index must be a plain file in the checkpoint directory.
bool IsPlainFileName(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  return name.find_first_of(std::string("/\\\0", 3)) == std::string::npos;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

const TensorInfo* FindSorted(const std::vector<TensorInfo>& tensors, std::string_view name) {
  auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  if (it == tensors.end() || it->name != name) return nullptr;
  return &*it;
}

}  // namespace

Expected<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  auto mapped = MappedFile::Open(path);
  if (!mapped) return mapped.status();
  auto file = std::make_shared<MappedFile>(std::move(mapped).value());
  const uint64_t size = file->size();
  if (size < 8) {
    return Corrupt(path + ": file is " + std::to_string(size) +
                   " bytes, too short for safetensors (it starts with an 8-byte header length)");
  }
  const uint64_t header_len = ReadLittleEndianU64(file->data());
  if (header_len > kMaxHeaderBytes) {
    return Corrupt(path + ": header length " + std::to_string(header_len) + " exceeds the " +
                   std::to_string(kMaxHeaderBytes) + "-byte limit; not a safetensors file?");
  }
  if (header_len > size - 8) {
    return Corrupt(path + ": header length " + std::to_string(header_len) +
                   " runs past the end of the file (" + std::to_string(size) +
                   " bytes); the file is truncated or not safetensors");
  }
  const std::string where = path + " header";
  std::string_view header_text(reinterpret_cast<const char*>(file->data() + 8), header_len);
  TS_ASSIGN_OR_RETURN(json header, ParseJsonDocument(header_text, where));
  if (!header.is_object()) {
    return Corrupt(where + ": must be a JSON object of tensors, found " + JsonTypeName(header));
  }

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  SafetensorsFile result;
  result.path_ = path;
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == kMetadataKey) {
      TS_RETURN_IF_ERROR(ParseMetadata(where, it.value(), &result.metadata_));
      continue;
    }
    TensorInfo info;
    uint64_t begin = 0;
    uint64_t end = 0;
    TS_RETURN_IF_ERROR(
        ParseTensorEntry(where, it.key(), it.value(), data_size, &info, &begin, &end));
    info.data = std::span<const uint8_t>(file->data() + data_start + begin, end - begin);
    info.file = path;
    if (end > begin) ranges.push_back({begin, end, result.tensors_.size()});
    result.tensors_.push_back(std::move(info));
  }

  // Empty tensors occupy no bytes, so only non-empty ranges can overlap.
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 1; i < ranges.size(); ++i) {
    const Range& prev = ranges[i - 1];
    const Range& cur = ranges[i];
    if (cur.begin < prev.end) {
      return Corrupt(where + ": tensors " + QuoteForMessage(result.tensors_[prev.index].name) +
                     " (bytes " + std::to_string(prev.begin) + ".." + std::to_string(prev.end) +
                     ") and " + QuoteForMessage(result.tensors_[cur.index].name) + " (bytes " +
                     std::to_string(cur.begin) + ".." + std::to_string(cur.end) + ") overlap");
    }
  }

  std::sort(result.tensors_.begin(), result.tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  result.file_ = std::move(file);
  return result;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  return FindSorted(tensors_, name);
}

const std::map<std::string, std::string>& CheckpointTensors::first_shard_metadata() const {
  static const std::map<std::string, std::string> kEmpty;
  return shards_.empty() ? kEmpty : shards_.front().metadata();
}

Expected<CheckpointTensors> CheckpointTensors::Open(const std::string& dir) {
  CheckpointTensors result;
  const std::string single_path = JoinPath(dir, kSingleFileName);
  const std::string index_path = JoinPath(dir, kIndexFileName);

  if (FileExists(single_path)) {
    TS_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(single_path));
    result.shards_.push_back(std::move(file));
  } else if (FileExists(index_path)) {
    TS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path, 64u << 20));
    TS_ASSIGN_OR_RETURN(json index, ParseJsonDocument(text, index_path));
    if (!index.is_object()) {
      return Corrupt(index_path + ": must be a JSON object with a weight_map, found " +
                     JsonTypeName(index));
    }
    auto map_it = index.find("weight_map");
    if (map_it == index.end() || !map_it->is_object() || map_it->empty()) {
      return Corrupt(
          index_path + ": weight_map must be a non-empty object {tensor: shard file}" +
          (map_it == index.end() ? ", but it is missing" : ", found " + JsonForMessage(*map_it)));
    }
    const json& weight_map = *map_it;
    std::map<std::string, size_t> shard_index;  // shard file name -> position in shards_
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      if (!it->is_string()) {
        return Corrupt(index_path + ": weight_map " + QuoteForMessage(it.key()) +
                       " must name a shard file (a string), found " + JsonForMessage(*it));
      }
      const std::string& shard = it->get_ref<const std::string&>();
      if (!IsPlainFileName(shard)) {
        return Corrupt(index_path + ": weight_map " + QuoteForMessage(it.key()) + " names shard " +
                       QuoteForMessage(shard) +
                       "; shards must be plain file names in the checkpoint directory");
      }
      shard_index.emplace(shard, 0);
    }
    for (auto& [shard, position] : shard_index) {
      const std::string shard_path = JoinPath(dir, shard);
      if (!FileExists(shard_path)) {
        return NotFound(index_path + ": shard " + QuoteForMessage(shard) +
                        " named in weight_map does not exist: " + shard_path);
      }
      TS_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(shard_path));
      position = result.shards_.size();
      result.shards_.push_back(std::move(file));
    }
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      const std::string& shard = it->get_ref<const std::string&>();
      const SafetensorsFile& file = result.shards_[shard_index.at(shard)];
      if (file.Find(it.key()) == nullptr) {
        return Corrupt(index_path + ": weight_map says tensor " + QuoteForMessage(it.key()) +
                       " is in " + QuoteForMessage(shard) + ", but that shard does not have it");
      }
    }
  } else {
    return NotFound(dir + ": no checkpoint found; expected " + kSingleFileName + " or " +
                    kIndexFileName);
  }

  // Built only now: shards_ no longer reallocates, so the pointers stay valid (and a move of
  // the vector keeps its elements where they are).
  for (const SafetensorsFile& file : result.shards_) {
    for (const TensorInfo& tensor : file.tensors()) {
      auto [it, inserted] = result.by_name_.emplace(tensor.name, &tensor);
      if (!inserted) {
        return Corrupt(dir + ": tensor " + QuoteForMessage(tensor.name) + " appears in both " +
                       it->second->file + " and " + tensor.file);
      }
    }
  }
  return result;
}

Expected<CheckpointTensors> CheckpointTensors::FromTensors(std::vector<TensorInfo> tensors,
                                                           std::shared_ptr<const void> owner) {
  CheckpointTensors result;
  result.adopted_ = std::move(tensors);
  result.owner_ = std::move(owner);
  for (const TensorInfo& tensor : result.adopted_) {
    if (!result.by_name_.emplace(tensor.name, &tensor).second) {
      return Corrupt(tensor.file + ": tensor " + QuoteForMessage(tensor.name) + " appears twice");
    }
  }
  return result;
}

const TensorInfo* CheckpointTensors::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<std::string> CheckpointTensors::Names() const {
  std::vector<std::string> names;
  names.reserve(by_name_.size());
  for (const auto& entry : by_name_) names.push_back(entry.first);
  return names;
}

Status CopyTensorToF32(const TensorInfo& tensor, std::span<float> out) {
  const std::string name = "tensor " + QuoteForMessage(tensor.name);
  if (!IsFloatWeightDType(tensor.dtype)) {
    return Unsupported(name + " has dtype " + std::string(DTypeName(tensor.dtype)) +
                       "; only F32, F16 and BF16 convert to fp32");
  }
  if (out.size() != tensor.num_elements) {
    return InvalidArgument(name + ": output holds " + std::to_string(out.size()) +
                           " floats but the tensor has " + std::to_string(tensor.num_elements));
  }
  const size_t element_size = DTypeSize(tensor.dtype);
  uint64_t needed = 0;
  if (__builtin_mul_overflow(tensor.num_elements, element_size, &needed) ||
      tensor.data.size() != needed) {
    return Corrupt(name + ": holds " + std::to_string(tensor.data.size()) + " bytes, expected " +
                   std::to_string(tensor.num_elements) + " x " + std::to_string(element_size));
  }
  const uint8_t* src = tensor.data.data();
  switch (tensor.dtype) {
    case DType::kF32:
      if (!out.empty()) std::memcpy(out.data(), src, needed);
      break;
    case DType::kF16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = F16ToFloat(bits);
      }
      break;
    case DType::kBF16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = Bf16ToFloat(bits);
      }
      break;
    default:
      break;  // excluded above
  }
  return Status::Ok();
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    json meta = json::object();
    for (const auto& [key, value] : metadata) {
      if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
        return InvalidArgument(path + ": metadata " + QuoteForMessage(key) + " is not valid UTF-8");
      }
      meta[key] = value;
    }
    header[kMetadataKey] = std::move(meta);
  }
  std::vector<uint64_t> offsets;  // start of each tensor in the data section
  uint64_t cursor = 0;
  for (const TensorToWrite& t : tensors) {
    const std::string name = "tensor " + QuoteForMessage(t.name);
    if (!IsValidUtf8(t.name) || t.name == kMetadataKey) {
      return InvalidArgument(path + ": " + name + " is not a usable tensor name");
    }
    if (header.contains(t.name)) {
      return InvalidArgument(path + ": " + name + " is written twice");
    }
    auto count = CountElements(t.shape);
    if (!count) return count.status().WithContext(path + ": " + name);
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(*count, static_cast<uint64_t>(DTypeSize(t.dtype)), &bytes) ||
        bytes != t.bytes.size()) {
      return InvalidArgument(path + ": " + name + " has " + std::to_string(t.bytes.size()) +
                             " bytes, but shape " + ShapeText(t.shape) + " of " +
                             std::string(DTypeName(t.dtype)) + " needs " + std::to_string(*count) +
                             " x " + std::to_string(DTypeSize(t.dtype)));
    }
    cursor = (cursor + 7) / 8 * 8;
    offsets.push_back(cursor);
    header[t.name] = {{"dtype", DTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {cursor, cursor + bytes}}};
    cursor += bytes;
  }
  std::string header_text = header.dump();
  header_text.resize((header_text.size() + 7) / 8 * 8, ' ');

  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return IoError("cannot create " + path + ": " + std::strerror(errno));
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header_text.size() >> (8 * i));
  bool ok = std::fwrite(length, 1, 8, out) == 8 &&
            std::fwrite(header_text.data(), 1, header_text.size(), out) == header_text.size();
  uint64_t written = 0;
  static const uint8_t kZeros[8] = {};
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    if (offsets[i] > written) {
      ok = std::fwrite(kZeros, 1, offsets[i] - written, out) == offsets[i] - written;
    }
    const auto& bytes = tensors[i].bytes;
    ok = ok && (bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size());
    written = offsets[i] + bytes.size();
  }
  int saved_errno = errno;
  if (std::fclose(out) != 0 && ok) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) return IoError("cannot write " + path + ": " + std::strerror(saved_errno));
  return Status::Ok();
}

TensorToWrite MakeTensor(std::string name, DType dtype, std::vector<int64_t> shape,
                         std::span<const float> values) {
  TensorToWrite t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  switch (dtype) {
    case DType::kF32:
      t.bytes.resize(values.size() * 4);
      if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
      break;
    case DType::kF16:
    case DType::kBF16:
      t.bytes.resize(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t bits = dtype == DType::kF16 ? FloatToF16(values[i]) : FloatToBf16(values[i]);
        std::memcpy(t.bytes.data() + 2 * i, &bits, 2);
      }
      break;
    default:
      break;  // documented: WriteSafetensors refuses the empty bytes
  }
  return t;
}

}  // namespace tessera
