// Fuzzes Ollama's store as name resolution reads it: ParseOllamaManifest, ParseOllamaConfig,
// ParseOllamaParams (and OllamaParamsToJson) on the parts, ParseOllamaName and
// OllamaNameFromPath on the manifest's first line, then ReadOllamaModel on a scratch store
// holding the fuzzed manifest, the config and params parts as blobs named by their sha256,
// and two fixed blobs (kModelBlob, kTemplateBlob; fuzz/make_seeds.py writes seeds whose
// digests name all four), so the fuzzer reaches the layer checks and refusals.
// Input: manifest [ "\n\0\n" config blob [ "\n\0\n" params blob ] ].
#include <cstdint>
#include <filesystem>
#include <string>

#include "base/sha256.h"
#include "catalog/ollama_manifest.h"
#include "catalog/ollama_store.h"
#include "fuzz_util.h"

namespace {

// A GGUF v3 header with no tensors and no keys, and a one-line template.
const std::string kModelBlob("GGUF\x03\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24);
const std::string kTemplateBlob = "{{ .Prompt }}";

void WriteBlob(const std::string& root, const std::string& bytes) {
  tessera::fuzz::WriteFileOrDie(root + "/blobs/sha256-" + tessera::Sha256Hex(bytes), bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  const auto parts = tessera::fuzz::Split(data, size, 3);
  static const std::string root = tessera::fuzz::ScratchDir() + "/ollama";
  static const bool made = [] {
    fs::create_directories(root + "/blobs");
    fs::create_directories(root + "/manifests/registry.ollama.ai/library/m");
    WriteBlob(root, kModelBlob);
    WriteBlob(root, kTemplateBlob);
    return true;
  }();
  (void)made;
  (void)tessera::ParseOllamaManifest(parts[0], "manifest");
  const std::string_view first_line = parts[0].substr(0, parts[0].find('\n'));
  if (first_line.size() < 1024) {
    (void)tessera::ParseOllamaName(first_line);
    (void)tessera::OllamaNameFromPath(first_line);
  }
  if (parts.size() > 1) {
    (void)tessera::ParseOllamaConfig(parts[1], "config");
    WriteBlob(root, std::string(parts[1]));
  }
  if (parts.size() > 2) {
    if (auto params = tessera::ParseOllamaParams(parts[2], "params")) {
      (void)tessera::OllamaParamsToJson(*params).dump();
    }
    WriteBlob(root, std::string(parts[2]));
  }
  tessera::fuzz::WriteFileOrDie(root + "/manifests/registry.ollama.ai/library/m/t", parts[0]);
  const auto name = tessera::ParseOllamaName("m:t");
  auto model = tessera::ReadOllamaModel(root, *name);
  tessera::fuzz::Note("ReadOllamaModel", model.status().ToString());
  // Blobs written for this input are removed, so the scratch store does not grow.
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string hex = tessera::Sha256Hex(parts[i]);
    if (hex != tessera::Sha256Hex(kModelBlob) && hex != tessera::Sha256Hex(kTemplateBlob)) {
      fs::remove(root + "/blobs/sha256-" + hex);
    }
  }
  return 0;
}
