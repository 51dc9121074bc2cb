#include "format/gguf.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>

#include "base/utf8.h"
#include "format/json_util.h"

namespace tessera {

static_assert(std::endian::native == std::endian::little, "tessera assumes a little-endian host");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;
constexpr uint64_t kDefaultAlignment = 32;
constexpr char kAlignmentKey[] = "general.alignment";
// The GGUF spec caps keys at 65535 bytes; ggml caps tensor names at GGML_MAX_NAME - 1.
constexpr uint64_t kMaxKeyBytes = 65535;
constexpr uint64_t kMaxTensorNameBytes = 63;
constexpr uint32_t kMaxDims = 4;
// The least bytes one entry can take, to refuse a count the rest of the file cannot hold
// before anything is allocated for it: a key (8-byte length) + type (4) + a u8 value; a tensor
// info is a name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// Bytes of one item of a fixed-size value type; 0 for string and array.
uint64_t FixedSize(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
    case GgufValueType::kI8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kU16:
    case GgufValueType::kI16:
      return 2;
    case GgufValueType::kU32:
    case GgufValueType::kI32:
    case GgufValueType::kF32:
      return 4;
    case GgufValueType::kU64:
    case GgufValueType::kI64:
    case GgufValueType::kF64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

bool KnownValueType(uint32_t id) {
  return id <= static_cast<uint32_t>(GgufValueType::kF64);
}

uint64_t LoadLittleEndian(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kI8 || t == GgufValueType::kI16 || t == GgufValueType::kI32 ||
         t == GgufValueType::kI64;
}
bool IsInteger(GgufValueType t) {
  return IsSigned(t) || t == GgufValueType::kU8 || t == GgufValueType::kU16 ||
         t == GgufValueType::kU32 || t == GgufValueType::kU64;
}

// An integer item's value as a (negative?, magnitude) pair, so any width compares exactly.
struct IntegerValue {
  bool negative = false;
  uint64_t magnitude = 0;
};
IntegerValue DecodeInteger(GgufValueType type, const uint8_t* p) {
  const size_t n = FixedSize(type);
  const uint64_t raw = LoadLittleEndian(p, n);
  if (!IsSigned(type)) return {false, raw};
  const unsigned bits = static_cast<unsigned>(8 * n);
  const bool negative = (raw >> (bits - 1)) & 1u;
  if (!negative) return {false, raw};
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : ((uint64_t{1} << bits) - 1);
  return {true, ((~raw) & mask) + 1};  // two's complement magnitude
}

double DecodeFloat(GgufValueType type, const uint8_t* p) {
  if (type == GgufValueType::kF32) {
    return std::bit_cast<float>(static_cast<uint32_t>(LoadLittleEndian(p, 4)));
  }
  return std::bit_cast<double>(LoadLittleEndian(p, 8));
}

std::string DescribeScalar(GgufValueType type, const uint8_t* p) {
  if (IsInteger(type)) {
    const IntegerValue v = DecodeInteger(type, p);
    return std::string(GgufValueTypeName(type)) + " " + (v.negative ? "-" : "") +
           std::to_string(v.magnitude);
  }
  if (type == GgufValueType::kBool) return std::string("bool ") + (p[0] ? "true" : "false");
  char text[64];
  std::snprintf(text, sizeof text, "%s %.9g", std::string(GgufValueTypeName(type)).c_str(),
                DecodeFloat(type, p));
  return text;
}

// A bounds-checked cursor over the file's bytes; every read names what it was reading.
class Cursor {
 public:
  Cursor(const std::string& where, std::span<const uint8_t> bytes) : where_(where), bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  Status Need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      return Corrupt(where_ + ": " + what + " at byte " + std::to_string(pos_) + " needs " +
                     std::to_string(n) + " bytes, but the file ends at byte " +
                     std::to_string(bytes_.size()) + "; the file is truncated or not GGUF");
    }
    return Status::Ok();
  }
  Expected<std::span<const uint8_t>> Bytes(uint64_t n, const std::string& what) {
    TS_RETURN_IF_ERROR(Need(n, what));
    auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  Expected<uint32_t> U32(const std::string& what) {
    TS_ASSIGN_OR_RETURN(auto b, Bytes(4, what));
    return static_cast<uint32_t>(LoadLittleEndian(b.data(), 4));
  }
  Expected<uint64_t> U64(const std::string& what) {
    TS_ASSIGN_OR_RETURN(auto b, Bytes(8, what));
    return LoadLittleEndian(b.data(), 8);
  }
  // A GGUF string: u64 length, then that many bytes (no terminator).
  Expected<std::string_view> String(const std::string& what, uint64_t max_bytes) {
    const uint64_t at = pos_;
    TS_ASSIGN_OR_RETURN(uint64_t length, U64(what + " length"));
    if (length > max_bytes) {
      return Corrupt(where_ + ": " + what + " at byte " + std::to_string(at) + " is " +
                     std::to_string(length) + " bytes long, over the limit of " +
                     std::to_string(max_bytes));
    }
    if (length > remaining()) {
      return Corrupt(where_ + ": " + what + " at byte " + std::to_string(at) + " claims " +
                     std::to_string(length) + " bytes, but only " + std::to_string(remaining()) +
                     " remain in the file; the file is truncated or not GGUF");
    }
    std::string_view out(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return out;
  }

 private:
  const std::string& where_;
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

// Reads one value of `type` (the key is for messages).
Status ReadValue(const std::string& where, Cursor& in, const std::string& key, uint32_t type_id,
                 GgufValue* out) {
  const std::string what = "value of " + QuoteForMessage(key);
  if (!KnownValueType(type_id)) {
    return Corrupt(where + ": key " + QuoteForMessage(key) + " has value type " +
                   std::to_string(type_id) + ", which GGUF does not define (0..12)");
  }
  out->type = static_cast<GgufValueType>(type_id);
  if (out->type == GgufValueType::kString) {
    TS_ASSIGN_OR_RETURN(out->string, in.String(what, UINT64_MAX));
    return Status::Ok();
  }
  if (out->type != GgufValueType::kArray) {
    TS_ASSIGN_OR_RETURN(out->scalar, in.Bytes(FixedSize(out->type), what));
    if (out->type == GgufValueType::kBool && out->scalar[0] > 1) {
      return Corrupt(where + ": key " + QuoteForMessage(key) + " is a bool holding " +
                     std::to_string(out->scalar[0]) + "; a bool must be 0 or 1");
    }
    return Status::Ok();
  }
  TS_ASSIGN_OR_RETURN(uint32_t item_type, in.U32(what + " item type"));
  if (!KnownValueType(item_type)) {
    return Corrupt(where + ": key " + QuoteForMessage(key) + " is an array of value type " +
                   std::to_string(item_type) + ", which GGUF does not define (0..12)");
  }
  out->item_type = static_cast<GgufValueType>(item_type);
  if (out->item_type == GgufValueType::kArray) {
    return Unsupported(where + ": key " + QuoteForMessage(key) +
                       " is an array of arrays, which tessera does not read");
  }
  TS_ASSIGN_OR_RETURN(out->item_count, in.U64(what + " item count"));
  const uint64_t item_size = FixedSize(out->item_type);
  const uint64_t min_item_bytes = item_size == 0 ? 8 : item_size;  // a string: its length
  if (out->item_count > in.remaining() / min_item_bytes) {
    return Corrupt(where + ": key " + QuoteForMessage(key) + " claims " +
                   std::to_string(out->item_count) + " " +
                   std::string(GgufValueTypeName(out->item_type)) + " items, more than the " +
                   std::to_string(in.remaining()) + " bytes left in the file can hold");
  }
  if (item_size != 0) {
    TS_ASSIGN_OR_RETURN(out->items, in.Bytes(out->item_count * item_size, what));
    return Status::Ok();
  }
  out->strings.reserve(out->item_count);
  for (uint64_t i = 0; i < out->item_count; ++i) {
    TS_ASSIGN_OR_RETURN(std::string_view s,
                        in.String(what + " item " + std::to_string(i), UINT64_MAX));
    out->strings.push_back(s);
  }
  return Status::Ok();
}

std::string DimsText(const std::vector<uint64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace

std::string_view GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kU8:
      return "u8";
    case GgufValueType::kI8:
      return "i8";
    case GgufValueType::kU16:
      return "u16";
    case GgufValueType::kI16:
      return "i16";
    case GgufValueType::kU32:
      return "u32";
    case GgufValueType::kI32:
      return "i32";
    case GgufValueType::kF32:
      return "f32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kU64:
      return "u64";
    case GgufValueType::kI64:
      return "i64";
    case GgufValueType::kF64:
      return "f64";
  }
  return "unknown";
}

std::string DescribeGgufValue(const GgufValue& value) {
  switch (value.type) {
    case GgufValueType::kString:
      return "string " + QuoteForMessage(value.string);
    case GgufValueType::kArray:
      return "array of " + std::to_string(value.item_count) + " " +
             std::string(GgufValueTypeName(value.item_type));
    default:
      if (value.scalar.size() != FixedSize(value.type)) return "malformed value";
      return DescribeScalar(value.type, value.scalar.data());
  }
}

Expected<GgufFile> GgufFile::Open(const std::string& path) {
  auto mapped = MappedFile::Open(path);
  if (!mapped) return mapped.status();
  auto file = std::make_shared<const MappedFile>(std::move(mapped).value());
  auto parsed = Parse(path, file->bytes());
  if (!parsed) return parsed.status();
  parsed->file_ = std::move(file);
  return parsed;
}

Expected<GgufFile> GgufFile::Parse(std::string name, std::span<const uint8_t> bytes) {
  GgufFile result;
  result.path_ = std::move(name);
  const std::string& where = result.path_;
  const uint64_t size = bytes.size();
  if (size < kHeaderBytes) {
    return Corrupt(where + ": file is " + std::to_string(size) +
                   " bytes, too short for a GGUF header (24 bytes: magic, version, counts)");
  }
  Cursor in(where, bytes);
  TS_ASSIGN_OR_RETURN(uint32_t magic, in.U32("magic"));
  if (magic != kMagic) {
    return Corrupt(where + ": not a GGUF file (it does not start with the bytes \"GGUF\")");
  }
  TS_ASSIGN_OR_RETURN(uint32_t version, in.U32("version"));
  if (version == 1) {
    return Unsupported(where +
                       ": GGUF version 1 (2023) is not supported; convert the model "
                       "again with a current llama.cpp");
  }
  if ((version & 0xffffu) == 0 && (version >> 16) != 0) {
    return Unsupported(where + ": a big-endian GGUF file (version field " +
                       std::to_string(__builtin_bswap32(version)) +
                       " byte-swapped); tessera reads little-endian GGUF only");
  }
  if (version != 2 && version != 3) {
    return Unsupported(where + ": GGUF version " + std::to_string(version) +
                       " is not supported; tessera reads versions 2 and 3");
  }
  result.version_ = version;
  TS_ASSIGN_OR_RETURN(uint64_t tensor_count, in.U64("tensor count"));
  TS_ASSIGN_OR_RETURN(uint64_t kv_count, in.U64("metadata count"));
  if (kv_count > in.remaining() / kMinKeyValueBytes) {
    return Corrupt(where + ": metadata count " + std::to_string(kv_count) + " cannot fit in the " +
                   std::to_string(in.remaining()) +
                   " bytes after the header; the file is corrupt or truncated");
  }
  if (tensor_count > in.remaining() / kMinTensorInfoBytes) {
    return Corrupt(where + ": tensor count " + std::to_string(tensor_count) +
                   " cannot fit in the " + std::to_string(in.remaining()) +
                   " bytes after the header; the file is corrupt or truncated");
  }

  result.metadata_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    TS_ASSIGN_OR_RETURN(std::string_view key,
                        in.String("key of metadata entry " + std::to_string(i), kMaxKeyBytes));
    if (key.empty() || !IsValidUtf8(key)) {
      return Corrupt(where + ": metadata entry " + std::to_string(i) + " has " +
                     (key.empty() ? "an empty key" : "a key that is not UTF-8"));
    }
    const std::string key_text(key);
    if (result.metadata_index_.count(key_text) != 0) {
      return Corrupt(where + ": metadata key " + QuoteForMessage(key) + " appears twice");
    }
    TS_ASSIGN_OR_RETURN(uint32_t type, in.U32("value type of " + QuoteForMessage(key)));
    GgufValue value;
    TS_RETURN_IF_ERROR(ReadValue(where, in, key_text, type, &value));
    result.metadata_index_.emplace(key_text, result.metadata_.size());
    result.metadata_.emplace_back(key_text, std::move(value));
  }

  if (result.Has(kAlignmentKey)) {
    auto alignment = result.GetU32(kAlignmentKey);
    if (!alignment) return alignment.status();
    if (*alignment == 0 || !std::has_single_bit(*alignment)) {
      return Corrupt(where + ": " + kAlignmentKey + " is " + std::to_string(*alignment) +
                     "; it must be a power of two");
    }
    result.alignment_ = *alignment;
  } else {
    result.alignment_ = kDefaultAlignment;
  }

  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  ranges.reserve(tensor_count);
  result.tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const std::string what = "tensor info " + std::to_string(i);
    TS_ASSIGN_OR_RETURN(std::string_view name_view, in.String(what + " name", UINT64_MAX));
    if (name_view.size() > kMaxTensorNameBytes) {
      return Corrupt(where + ": " + what + " has a name of " + std::to_string(name_view.size()) +
                     " bytes (" + QuoteForMessage(name_view) + "); ggml allows at most " +
                     std::to_string(kMaxTensorNameBytes));
    }
    if (name_view.empty() || !IsValidUtf8(name_view)) {
      return Corrupt(where + ": " + what + " has " +
                     (name_view.empty() ? "an empty name" : "a name that is not UTF-8"));
    }
    GgufTensor t;
    t.name = std::string(name_view);
    const std::string tensor = "tensor " + QuoteForMessage(t.name);
    if (result.tensor_index_.count(t.name) != 0) {
      return Corrupt(where + ": " + tensor + " appears twice");
    }
    TS_ASSIGN_OR_RETURN(uint32_t n_dims, in.U32(tensor + " dimension count"));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Corrupt(where + ": " + tensor + " has " + std::to_string(n_dims) +
                     " dimensions; ggml tensors have 1 to 4");
    }
    t.num_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      TS_ASSIGN_OR_RETURN(uint64_t dim, in.U64(tensor + " dimension " + std::to_string(d)));
      t.dims.push_back(dim);
      if (dim == 0 || dim > static_cast<uint64_t>(INT64_MAX) ||
          __builtin_mul_overflow(t.num_elements, dim, &t.num_elements) ||
          t.num_elements > static_cast<uint64_t>(INT64_MAX)) {
        return Corrupt(where + ": " + tensor + " has dimensions " + DimsText(t.dims) +
                       (dim == 0 ? ": a dimension is 0" : ": the element count overflows"));
      }
    }
    TS_ASSIGN_OR_RETURN(uint32_t type_id, in.U32(tensor + " type"));
    const GgmlTypeTraits* traits = FindGgmlType(type_id);
    if (traits == nullptr) {
      return Unsupported(where + ": " + tensor + " has ggml type " + std::to_string(type_id) +
                         ", which tessera does not know (a newer ggml type?)");
    }
    t.type = traits->type;
    auto row_bytes = GgmlRowBytes(t.type, t.dims[0]);
    if (!row_bytes) return row_bytes.status().WithContext(where + ": " + tensor + " rows");
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(*row_bytes, t.num_elements / t.dims[0], &bytes)) {
      return Corrupt(where + ": " + tensor + " of " + traits->name + " " + DimsText(t.dims) +
                     ": its byte size overflows 64 bits");
    }
    TS_ASSIGN_OR_RETURN(t.offset, in.U64(tensor + " offset"));
    if (t.offset % result.alignment_ != 0) {
      return Corrupt(where + ": " + tensor + " has offset " + std::to_string(t.offset) +
                     ", not a multiple of the alignment " + std::to_string(result.alignment_));
    }
    uint64_t end = 0;
    if (__builtin_add_overflow(t.offset, bytes, &end)) {
      return Corrupt(where + ": " + tensor + " offset " + std::to_string(t.offset) + " + " +
                     std::to_string(bytes) + " bytes overflows 64 bits");
    }
    ranges.push_back({t.offset, end, result.tensors_.size()});
    result.tensor_index_.emplace(t.name, result.tensors_.size());
    result.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the tensor infos.
  const uint64_t infos_end = in.pos();
  const uint64_t padding = (result.alignment_ - infos_end % result.alignment_) % result.alignment_;
  if (padding > size - infos_end && !result.tensors_.empty()) {
    return Corrupt(where + ": the data section would start at byte " +
                   std::to_string(infos_end + padding) + " (alignment " +
                   std::to_string(result.alignment_) + "), past the end of the file (" +
                   std::to_string(size) + " bytes); the file is truncated");
  }
  result.data_offset_ = std::min(infos_end + padding, size);
  const uint64_t data_size = size - result.data_offset_;
  for (const Range& r : ranges) {
    GgufTensor& t = result.tensors_[r.index];
    if (r.end > data_size) {
      return Corrupt(
          where + ": tensor " + QuoteForMessage(t.name) + " (" + std::string(GgmlTypeName(t.type)) +
          " " + DimsText(t.dims) + ") spans data bytes " + std::to_string(r.begin) + ".." +
          std::to_string(r.end) + ", past the end of the data section (" +
          std::to_string(data_size) + " bytes); the file is truncated or the offset is wrong");
    }
    t.data = bytes.subspan(result.data_offset_ + r.begin, r.end - r.begin);
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    const Range& prev = ranges[i - 1];
    const Range& cur = ranges[i];
    if (cur.begin < prev.end) {
      return Corrupt(where + ": tensors " + QuoteForMessage(result.tensors_[prev.index].name) +
                     " (data bytes " + std::to_string(prev.begin) + ".." +
                     std::to_string(prev.end) + ") and " +
                     QuoteForMessage(result.tensors_[cur.index].name) + " (data bytes " +
                     std::to_string(cur.begin) + ".." + std::to_string(cur.end) + ") overlap");
    }
  }
  return result;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status Missing(const std::string& path, std::string_view key, const char* wanted) {
  return NotFound(path + ": metadata key " + QuoteForMessage(key) + " (" + wanted + ") is missing");
}
Status WrongType(const std::string& path, std::string_view key, const char* wanted,
                 const GgufValue& found) {
  return Corrupt(path + ": metadata key " + QuoteForMessage(key) + " must be " + wanted +
                 ", found " + DescribeGgufValue(found));
}

// An integer value within [min, max] (min <= 0 <= max); nullopt for a non-integer or one out
// of range.
std::optional<int64_t> IntegerIn(GgufValueType type, const uint8_t* p, int64_t min, uint64_t max) {
  if (!IsInteger(type)) return std::nullopt;
  const IntegerValue v = DecodeInteger(type, p);
  if (v.negative) {
    const uint64_t most_negative = min == 0 ? 0 : static_cast<uint64_t>(-(min + 1)) + 1;
    if (v.magnitude > most_negative) return std::nullopt;
    return -static_cast<int64_t>(v.magnitude - 1) - 1;
  }
  if (v.magnitude > max) return std::nullopt;
  return static_cast<int64_t>(v.magnitude);
}

}  // namespace

Expected<std::string_view> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, "a string");
  if (v->type != GgufValueType::kString) return WrongType(path_, key, "a string", *v);
  return v->string;
}

// An integer of any width whose value lies in [min, max].
Expected<int64_t> GgufFile::GetInteger(std::string_view key, int64_t min, uint64_t max,
                                       const char* wanted) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, wanted);
  if (!IsInteger(v->type)) return WrongType(path_, key, wanted, *v);
  auto n = IntegerIn(v->type, v->scalar.data(), min, max);
  if (!n) return WrongType(path_, key, wanted, *v);
  return *n;
}

Expected<uint32_t> GgufFile::GetU32(std::string_view key) const {
  TS_ASSIGN_OR_RETURN(int64_t n, GetInteger(key, 0, UINT32_MAX, "an integer from 0 to 4294967295"));
  return static_cast<uint32_t>(n);
}

Expected<int32_t> GgufFile::GetI32(std::string_view key) const {
  TS_ASSIGN_OR_RETURN(int64_t n, GetInteger(key, INT32_MIN, INT32_MAX, "a 32-bit signed integer"));
  return static_cast<int32_t>(n);
}

Expected<uint64_t> GgufFile::GetU64(std::string_view key) const {
  constexpr const char* kWanted = "a non-negative integer";
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, kWanted);
  if (!IsInteger(v->type)) return WrongType(path_, key, kWanted, *v);
  const IntegerValue n = DecodeInteger(v->type, v->scalar.data());
  if (n.negative) return WrongType(path_, key, kWanted, *v);
  return n.magnitude;
}

Expected<float> GgufFile::GetF32(std::string_view key) const {
  constexpr const char* kWanted = "a float (f32 or f64)";
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, kWanted);
  if (v->type != GgufValueType::kF32 && v->type != GgufValueType::kF64) {
    return WrongType(path_, key, kWanted, *v);
  }
  return static_cast<float>(DecodeFloat(v->type, v->scalar.data()));
}

Expected<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, "a bool");
  if (v->type != GgufValueType::kBool) return WrongType(path_, key, "a bool", *v);
  return v->scalar[0] != 0;
}

Expected<const GgufValue*> GgufFile::GetArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, "an array");
  if (v->type != GgufValueType::kArray) return WrongType(path_, key, "an array", *v);
  return v;
}

Expected<std::span<const std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, "an array of strings");
  if (v->type != GgufValueType::kArray || v->item_type != GgufValueType::kString) {
    return WrongType(path_, key, "an array of strings", *v);
  }
  return std::span<const std::string_view>(v->strings);
}

Expected<std::vector<float>> GgufFile::GetF32Array(std::string_view key) const {
  constexpr const char* kWanted = "an array of f32 or f64";
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, kWanted);
  if (v->type != GgufValueType::kArray ||
      (v->item_type != GgufValueType::kF32 && v->item_type != GgufValueType::kF64)) {
    return WrongType(path_, key, kWanted, *v);
  }
  const uint64_t size = FixedSize(v->item_type);
  std::vector<float> out(v->item_count);
  for (uint64_t i = 0; i < v->item_count; ++i) {
    out[i] = static_cast<float>(DecodeFloat(v->item_type, v->items.data() + i * size));
  }
  return out;
}

Expected<std::vector<int32_t>> GgufFile::GetI32Array(std::string_view key) const {
  constexpr const char* kWanted = "an array of 32-bit integers";
  const GgufValue* v = Find(key);
  if (!v) return Missing(path_, key, kWanted);
  if (v->type != GgufValueType::kArray || !IsInteger(v->item_type)) {
    return WrongType(path_, key, kWanted, *v);
  }
  const uint64_t size = FixedSize(v->item_type);
  std::vector<int32_t> out(v->item_count);
  for (uint64_t i = 0; i < v->item_count; ++i) {
    auto n = IntegerIn(v->item_type, v->items.data() + i * size, INT32_MIN, INT32_MAX);
    if (!n) {
      return Corrupt(path_ + ": metadata key " + QuoteForMessage(key) + " item " +
                     std::to_string(i) + " is " +
                     DescribeScalar(v->item_type, v->items.data() + i * size) +
                     ", outside the 32-bit integer range");
    }
    out[i] = static_cast<int32_t>(*n);
  }
  return out;
}

}  // namespace tessera
