// Fuzzes GGUF reading as model loading does: GgufFile::Open on a file, every metadata value
// read through the typed accessors, every tensor of a supported type dequantized row by row,
// then OpenCheckpoint on the file (config from metadata, names mapped, llama's q/k rows put
// back, tensors bound) and every bound tensor widened.
// Input: the file's bytes.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "format/gguf.h"
#include "format/gguf_quants.h"
#include "fuzz_util.h"
#include "model/checkpoint.h"
#include "model/tensor_convert.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = tessera::fuzz::ScratchDir() + "/gguf";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/model.gguf";
  tessera::fuzz::WriteFileOrDie(path, std::string_view(reinterpret_cast<const char*>(data), size));
  auto file = tessera::GgufFile::Open(path);
  tessera::fuzz::Note("Open", file.status().ToString());
  if (!file) return 0;
  for (const auto& [key, value] : file->metadata()) {
    (void)tessera::DescribeGgufValue(value);
    (void)file->GetString(key);
    (void)file->GetU32(key);
    (void)file->GetI32(key);
    (void)file->GetU64(key);
    (void)file->GetF32(key);
    (void)file->GetBool(key);
    (void)file->GetStringArray(key);
    if (value.item_count <= (1u << 16)) {
      (void)file->GetF32Array(key);
      (void)file->GetI32Array(key);
    }
  }
  for (const tessera::GgufTensor& t : file->tensors()) {
    if (t.dims[0] > (1u << 16)) continue;  // bounded by the file size anyway
    std::vector<float> row(t.dims[0]);
    const uint64_t rows = std::min<uint64_t>(t.rows(), 64);
    for (uint64_t r = 0; r < rows; ++r) (void)tessera::DequantizeRows(t, r, 1, row);
  }
  auto ckpt = tessera::OpenCheckpoint(path);
  tessera::fuzz::Note("OpenCheckpoint", ckpt.status().ToString());
  if (!ckpt) return 0;
  std::vector<float> values;
  for (const std::string& name : (*ckpt)->files.Names()) {
    const tessera::TensorInfo* t = (*ckpt)->files.Find(name);
    if (t->num_elements <= (1u << 16)) (void)tessera::WidenToF32(*t, &values);
  }
  return 0;
}
