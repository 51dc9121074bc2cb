#include "model/checkpoint.h"

#include "base/mapped_file.h"
#include "model/gguf_checkpoint.h"

namespace tessera {

Expected<std::shared_ptr<const Checkpoint>> OpenCheckpoint(const std::string& dir) {
  if (IsGgufFile(dir)) return OpenGgufCheckpoint(dir);
  auto config_text = ReadFileToString(dir + "/config.json", 16u << 20);
  if (!config_text) return config_text.status();
  auto config = ParseModelConfig(*config_text);
  if (!config) return config.status().WithContext(dir);

  GenerationConfig generation;
  bool has_generation = false;
  std::string gen_path = dir + "/generation_config.json";
  if (FileExists(gen_path)) {
    auto gen_text = ReadFileToString(gen_path, 16u << 20);
    if (!gen_text) return gen_text.status();
    auto gen = ParseGenerationConfig(*gen_text);
    if (!gen) return gen.status().WithContext(dir);
    generation = std::move(*gen);
    has_generation = true;
  }
  auto files = CheckpointTensors::Open(dir);
  if (!files) return files.status();
  // Bind only once the tensors sit at their final address: the bound fields point into them.
  auto ckpt =
      std::make_shared<Checkpoint>(Checkpoint{dir, std::move(*config), std::move(generation),
                                              has_generation, std::move(*files), ModelTensors{}});
  auto tensors = BindModelTensors(ckpt->config, ckpt->files);
  if (!tensors) return tensors.status().WithContext(dir);
  ckpt->tensors = std::move(*tensors);
  return std::shared_ptr<const Checkpoint>(std::move(ckpt));
}

std::string DescribeCheckpoint(const Checkpoint& ckpt) {
  std::string text = DescribeModelSpec(ckpt.tensors.spec);
  if (!ckpt.tensors.ignored.empty()) {
    text += "; ignored:";
    for (size_t i = 0; i < ckpt.tensors.ignored.size(); ++i) {
      text += (i ? ", " : " ") + ckpt.tensors.ignored[i];
    }
  }
  return text;
}

}  // namespace tessera
