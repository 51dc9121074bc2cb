// Fuzzes safetensors reading as model loading does: SafetensorsFile::Open on a file, every
// tensor converted with CopyTensorToF32; with a second part, that part is
// model.safetensors.index.json and CheckpointTensors::Open reads the directory.
// Input: file bytes [ "\n\0\n" index.json ].
#include <cstdint>
#include <filesystem>
#include <vector>

#include "format/safetensors.h"
#include "fuzz_util.h"

namespace {

void ConvertAll(const std::vector<tessera::TensorInfo>& tensors) {
  for (const tessera::TensorInfo& t : tensors) {
    if (t.num_elements > (1u << 16)) continue;  // bounded by the file size anyway
    std::vector<float> out(t.num_elements);
    (void)tessera::CopyTensorToF32(t, out);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts = tessera::fuzz::Split(data, size, 2);
  static const std::string dir = tessera::fuzz::ScratchDir() + "/safetensors";
  std::filesystem::create_directories(dir);
  tessera::fuzz::WriteFileOrDie(dir + "/model.safetensors", parts[0]);
  const std::string index = dir + "/model.safetensors.index.json";
  if (parts.size() == 1) {
    std::filesystem::remove(index);
    auto file = tessera::SafetensorsFile::Open(dir + "/model.safetensors");
    tessera::fuzz::Note("Open", file.status().ToString());
    if (file) {
      ConvertAll(file->tensors());
      (void)file->Find("model.norm.weight");
    }
    return 0;
  }
  tessera::fuzz::WriteFileOrDie(index, parts[1]);
  auto ckpt = tessera::CheckpointTensors::Open(dir);
  tessera::fuzz::Note("CheckpointTensors", ckpt.status().ToString());
  if (ckpt) {
    for (const std::string& name : ckpt->Names()) {
      const tessera::TensorInfo* t = ckpt->Find(name);
      if (t) ConvertAll({*t});
    }
  }
  return 0;
}
