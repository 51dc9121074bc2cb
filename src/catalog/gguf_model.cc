#include "catalog/gguf_model.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "base/sha256.h"

namespace tessera {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kQuantizationNames[] = {
    "IQ2_XXS", "IQ3_XXS", "IQ2_XS", "IQ3_XS", "IQ4_NL", "IQ4_XS", "Q3_K_S", "Q3_K_M", "Q3_K_L",
    "Q4_K_S",  "Q4_K_M",  "Q5_K_S", "Q5_K_M", "IQ1_S",  "IQ1_M",  "IQ2_S",  "IQ2_M",  "IQ3_S",
    "IQ3_M",   "TQ1_0",   "TQ2_0",  "MXFP4",  "BF16",   "Q8_0",   "Q4_0",   "Q4_1",   "Q5_0",
    "Q5_1",    "Q2_K",    "Q4_K",   "Q5_K",   "Q6_K",   "F32",    "F16"};

bool IsSeparator(char c) {
  return c == '-' || c == '.' || c == '_';
}

}  // namespace

std::string QuantizationFromFileName(std::string_view file_name) {
  std::string upper(file_name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper.ends_with(".GGUF")) upper.resize(upper.size() - 5);
  std::string found;
  size_t found_at = 0;
  for (std::string_view q : kQuantizationNames) {
    for (size_t at = upper.find(q); at != std::string::npos; at = upper.find(q, at + 1)) {
      const size_t end = at + q.size();
      // '_' joins the parts of a type's name, so a name does not end at one ("Q4_K" is not
      // in "Q4_K_MX"); it may start after one ("model_q8_0").
      const bool starts = at == 0 || IsSeparator(upper[at - 1]);
      const bool ends = end == upper.size() || upper[end] == '-' || upper[end] == '.';
      if (starts && ends && (found.empty() || at > found_at)) {
        found = std::string(q);
        found_at = at;
      }
    }
  }
  return found;
}

// IsGgufFile is defined once, in model/gguf_checkpoint.cc (tessera_backend links the model
// library), with the meaning gguf_model.h gives it.

std::vector<std::string> GgufFileNamesIn(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code file_ec;
    if (name.ends_with(".gguf") && !name.starts_with(".") && entry.is_regular_file(file_ec)) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

Expected<GgufModel> GgufModelOfFile(const std::string& path, std::string name,
                                    ModelLocation location) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return NotFound("cannot read " + path + ": " + ec.message());
  if (!IsGgufFile(path)) {
    return Unsupported(path +
                       " is not a GGUF file (it does not start with \"GGUF\"); give a GGUF "
                       "file, or a checkpoint folder with config.json");
  }
  GgufModel model;
  model.name = std::move(name);
  model.location = location;
  model.path = path;
  model.size_bytes = size;
  model.quantization = QuantizationFromFileName(fs::path(path).filename().string());
  return model;
}

Status VerifyGgufModel(const GgufModel& model, const ProgressCallback& progress) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(model.path, ec);
  if (ec) return NotFound(model.name + ": cannot read " + model.path + ": " + ec.message());
  if (size != model.size_bytes) {
    return Corrupt(model.name + ": " + model.path + " is " + std::to_string(size) +
                   " bytes, the manifest says " + std::to_string(model.size_bytes) +
                   "; the file is damaged or was replaced: pull the model again");
  }
  if (model.expected_sha256.empty()) return Status::Ok();
  const std::string phase = "verifying " + model.name;
  auto report = [&](uint64_t done, bool finished) {
    ReportProgress(progress, {.phase = phase,
                              .done = done,
                              .total = model.size_bytes,
                              .unit = ProgressUnit::kBytes,
                              .finished = finished});
  };
  report(0, false);
  TS_ASSIGN_OR_RETURN(std::string digest,
                      Sha256File(model.path, [&](uint64_t done) { report(done, false); }));
  report(model.size_bytes, true);
  if (digest != model.expected_sha256) {
    return Corrupt(model.name + ": " + model.path + " does not match its sha256 (" + digest +
                   " instead of " + model.expected_sha256 +
                   "); the file is damaged: pull the model again (`ollama pull " + model.name +
                   "`)");
  }
  return Status::Ok();
}

}  // namespace tessera
