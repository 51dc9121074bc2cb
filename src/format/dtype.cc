#include "format/dtype.h"

#include <array>
#include <string>

namespace tessera {
namespace {

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  size_t size;
};

// Safetensors spellings, in the order listed in error messages.
constexpr std::array<DTypeEntry, 10> kDTypes = {{
    {DType::kF64, "F64", 8},
    {DType::kF32, "F32", 4},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},
    {DType::kI8, "I8", 1},
    {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
}};

const DTypeEntry* Lookup(DType dtype) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.dtype == dtype) return &e;
  }
  return nullptr;
}

}  // namespace

Expected<DType> ParseSafetensorsDType(std::string_view name) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.name == name) return e.dtype;
  }
  std::string supported;
  for (const DTypeEntry& e : kDTypes) {
    if (!supported.empty()) supported += ", ";
    supported += e.name;
  }
  // The name comes from a file: keep the message short and printable.
  std::string shown;
  for (char c : name.substr(0, 32)) {
    shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (name.size() > 32) shown += "...";
  return Unsupported("dtype '" + shown + "' is not supported; supported: " + supported);
}

std::string_view DTypeName(DType dtype) {
  if (dtype == DType::kGgmlBlocks) return "GGML";
  const DTypeEntry* e = Lookup(dtype);
  return e != nullptr ? e->name : std::string_view("?");
}

size_t DTypeSize(DType dtype) {
  const DTypeEntry* e = Lookup(dtype);
  return e != nullptr ? e->size : 0;
}

bool IsFloatWeightDType(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

}  // namespace tessera
