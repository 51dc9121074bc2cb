#include "backend/backend.h"

namespace tessera {

std::string_view WeightFormatName(WeightFormat format) {
  switch (format) {
    case WeightFormat::kAuto:
      return "auto";
    case WeightFormat::kF32:
      return "f32";
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kInt8:
      return "int8";
    case WeightFormat::kInt4:
      return "int4";
  }
  return "auto";
}

Expected<WeightFormat> ParseWeightFormat(std::string_view name) {
  for (WeightFormat f : {WeightFormat::kAuto, WeightFormat::kF32, WeightFormat::kBF16,
                         WeightFormat::kInt8, WeightFormat::kInt4}) {
    if (name == WeightFormatName(f)) return f;
  }
  return InvalidArgument("weight format must be auto, f32, bf16, int8 or int4, got '" +
                         std::string(name) + "'");
}

KvCacheType DefaultKvCache(WeightFormat resolved) {
  return resolved == WeightFormat::kF32 ? KvCacheType::kF32 : KvCacheType::kBF16;
}

const char* KvCacheTypeName(KvCacheType type) {
  return type == KvCacheType::kBF16 ? "bf16" : "f32";
}

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx2Vnni:
      return "avx2vnni";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx512Amx:
      return "avx512amx";
  }
  return "scalar";
}

Expected<CpuIsa> ParseCpuIsa(std::string_view name) {
  for (CpuIsa isa :
       {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx2Vnni, CpuIsa::kAvx512, CpuIsa::kAvx512Amx}) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return InvalidArgument("unknown CPU kernel family '" + std::string(name) +
                         "': expected scalar, avx2, avx2vnni, avx512 or avx512amx");
}

}  // namespace tessera
