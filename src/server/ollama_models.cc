// What Ollama's /api/tags, /api/show and /api/ps say of a served model, read from its
// checkpoint folder: config.json (family, sizes, dtype), generation_config.json (the default
// parameters), the chat template, the tensors' element count, the files' sizes and times.
// What tessera cannot know as Ollama does (a manifest digest, a Go template) is approximated
// as docs/server.md ("Ollama API") says.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "base/sha256.h"
#include "format/ordered_json.h"
#include "format/safetensors.h"
#include "server/ollama_api.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using nlohmann::json;

constexpr size_t kMaxJsonFileBytes = 4u << 20;

int64_t UnixSeconds(fs::file_time_type t) {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::file_clock::to_sys(t).time_since_epoch())
      .count();
}

ojson ReadJsonFile(const fs::path& path) {
  auto text = ReadFileToString(path.string(), kMaxJsonFileBytes);
  if (!text) return ojson::object();
  auto parsed = ParseOrderedJson(*text, JsonParseLimits{}, path.filename().string());
  return parsed && parsed->is_object() ? std::move(*parsed) : ojson::object();
}

// torch_dtype as Ollama names its file types.
std::string QuantizationLevel(const ojson& config) {
  auto it = config.find("torch_dtype");
  if (it == config.end() || !it->is_string()) return "";
  const std::string dtype = it->get<std::string>();
  if (dtype == "bfloat16") return "BF16";
  if (dtype == "float16") return "F16";
  if (dtype == "float32") return "F32";
  return dtype;
}

std::string ChatTemplate(const fs::path& dir) {
  if (auto jinja = ReadFileToString((dir / "chat_template.jinja").string(), kMaxJsonFileBytes)) {
    return *jinja;
  }
  const ojson tokenizer_config = ReadJsonFile(dir / "tokenizer_config.json");
  auto it = tokenizer_config.find("chat_template");
  return it != tokenizer_config.end() && it->is_string() ? it->get<std::string>() : "";
}

// A number from config.json, or null.
json ConfigNumber(const ojson& config, const char* key) {
  auto it = config.find(key);
  return it != config.end() && it->is_number() ? json::parse(it->dump()) : json(nullptr);
}

json Details(const OllamaModelFacts& f) {
  return {{"parent_model", ""},
          {"format", f.format},
          {"family", f.family},
          {"families", f.family.empty() ? json(nullptr) : json::array({f.family})},
          {"parameter_size", OllamaParameterSize(f.parameter_count)},
          {"quantization_level", f.quantization_level}};
}

// generation_config.json's sampling defaults under Ollama's parameter names, one per line.
std::string ParameterLines(const ojson& generation_config, const std::string& prefix) {
  std::string lines;
  for (auto [ours, theirs] : {std::pair{"temperature", "temperature"}, std::pair{"top_p", "top_p"},
                              std::pair{"top_k", "top_k"}, std::pair{"min_p", "min_p"},
                              std::pair{"repetition_penalty", "repeat_penalty"}}) {
    auto it = generation_config.find(ours);
    if (it != generation_config.end() && it->is_number()) {
      lines += prefix + theirs + " " + it->dump() + "\n";
    }
  }
  return lines;
}

}  // namespace

std::string OllamaParameterSize(uint64_t count) {
  if (count == 0) return "";
  char buf[32];
  const double n = static_cast<double>(count);
  auto scaled = [&](double unit, const char* whole, const char* fraction, const char* suffix) {
    const double v = n / unit;
    std::snprintf(buf, sizeof buf, v == std::floor(v) ? whole : fraction, v, suffix);
  };
  if (count >= 1000000000) {
    scaled(1e9, "%.0f%s", "%.1f%s", "B");
  } else if (count >= 1000000) {
    scaled(1e6, "%.0f%s", "%.2f%s", "M");
  } else if (count >= 1000) {
    std::snprintf(buf, sizeof buf, "%.0fK", n / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(count));
  }
  return buf;
}

OllamaModelFacts DescribeServedModel(const worker::ModelEntry& model) {
  OllamaModelFacts f;
  f.name = model.name;
  f.kind = model.kind;
  const fs::path dir(model.dir);
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) {  // a single weights file (a .gguf)
    // A GGUF file, also an Ollama blob without an extension, starts with its magic.
    char magic[4] = {};
    std::ifstream in(dir, std::ios::binary);
    f.format = in.read(magic, sizeof magic) && std::string_view(magic, 4) == "GGUF" ? "gguf" : "";
    f.size_bytes = fs::file_size(dir, ec);
    const auto t = fs::last_write_time(dir, ec);
    f.modified_unix = ec ? 0 : UnixSeconds(t);
    return f;
  }
  f.config = ReadJsonFile(dir / "config.json");
  f.generation_config = ReadJsonFile(dir / "generation_config.json");
  f.chat_template = ChatTemplate(dir);
  f.format = f.config.empty() ? "" : "safetensors";
  if (auto it = f.config.find("model_type"); it != f.config.end() && it->is_string()) {
    f.family = it->get<std::string>();
  }
  f.quantization_level = QuantizationLevel(f.config);
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::error_code file_ec;
    if (!e.is_regular_file(file_ec)) continue;  // follows symlinks (the Hugging Face cache)
    f.size_bytes += e.file_size(file_ec);
    const auto t = e.last_write_time(file_ec);
    if (file_ec) continue;
    f.modified_unix = std::max(f.modified_unix, UnixSeconds(t));
  }
  if (auto tensors = CheckpointTensors::Open(dir.string())) {
    for (const std::string& name : tensors->Names()) {
      if (const TensorInfo* t = tensors->Find(name)) f.parameter_count += t->num_elements;
    }
  }
  for (const char* identity : {"tessera-lock.json", "config.json"}) {
    if (auto text = ReadFileToString((dir / identity).string(), kMaxJsonFileBytes)) {
      f.digest = Sha256Hex(*text);
      break;
    }
  }
  return f;
}

json OllamaTagsEntry(const OllamaModelFacts& f) {
  return {{"name", f.name},
          {"model", f.name},
          {"modified_at", OllamaTimestamp(std::chrono::system_clock::from_time_t(f.modified_unix))},
          {"size", f.size_bytes},
          {"digest", f.digest},
          {"details", Details(f)}};
}

json OllamaShowBody(const OllamaModelFacts& f) {
  json info = json::object();
  if (!f.family.empty()) {
    info["general.architecture"] = f.family;
    if (f.parameter_count > 0) info["general.parameter_count"] = f.parameter_count;
    for (auto [key, ours] : {std::pair{"context_length", "max_position_embeddings"},
                             std::pair{"embedding_length", "hidden_size"},
                             std::pair{"feed_forward_length", "intermediate_size"},
                             std::pair{"block_count", "num_hidden_layers"},
                             std::pair{"attention.head_count", "num_attention_heads"},
                             std::pair{"attention.head_count_kv", "num_key_value_heads"},
                             std::pair{"vocab_size", "vocab_size"}}) {
      json v = ConfigNumber(f.config, ours);
      if (!v.is_null()) info[f.family + "." + key] = std::move(v);
    }
  }
  json capabilities = json::array();
  if (f.kind == ModelKind::kEmbed) {
    capabilities.push_back("embedding");
  } else if (f.kind != ModelKind::kClassify) {
    capabilities.push_back("completion");
    if (f.chat_template.find("tools") != std::string::npos) capabilities.push_back("tools");
  }
  const std::string parameters = ParameterLines(f.generation_config, "");
  return {
      {"modelfile", "# Served by tessera as '" + f.name + "' (" +
                        std::string(ModelKindName(f.kind)) + ")\nFROM " + f.name + "\n" +
                        ParameterLines(f.generation_config, "PARAMETER ")},
      {"parameters", parameters},
      {"template", f.chat_template},
      {"details", Details(f)},
      {"model_info", std::move(info)},
      {"capabilities", std::move(capabilities)},
      {"modified_at", OllamaTimestamp(std::chrono::system_clock::from_time_t(f.modified_unix))}};
}

}  // namespace tessera::server
