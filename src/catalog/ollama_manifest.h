// Ollama's model names and the small files of its store, parsed without touching the disk (so
// the fuzz target reaches all of it): a name such as `qwen2.5:0.5b` or
// `hf.co/user/repo:Q4_K_M`, the Docker-style manifest a name points to, and the JSON of its
// config and params layers. Read from Ollama's source (types/model/name.go, manifest/*.go,
// server/images.go, api/types.go); the code is tessera's own.
//
//   std::optional<OllamaName> n = ParseOllamaName("qwen2.5:0.5b");
//   // n->host "registry.ollama.ai", n->ns "library", n->model "qwen2.5", n->tag "0.5b"
//   TS_ASSIGN_OR_RETURN(OllamaManifest m, ParseOllamaManifest(text, path));
//   TS_ASSIGN_OR_RETURN(OllamaParams p, ParseOllamaParams(params_text, "params layer"));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tessera {

inline constexpr char kOllamaDefaultHost[] = "registry.ollama.ai";
inline constexpr char kOllamaDefaultNamespace[] = "library";
inline constexpr char kOllamaDefaultTag[] = "latest";
inline constexpr char kOllamaModelMediaType[] = "application/vnd.ollama.image.model";

// A fully qualified Ollama name: manifests/<host>/<ns>/<model>/<tag> in the store.
struct OllamaName {
  std::string host;
  std::string ns;  // namespace
  std::string model;
  std::string tag;

  // host/ns/model/tag, the manifest's path below manifests/.
  std::string RelativePath() const;
  // The shortest spelling Ollama shows (`ollama list`), always with its tag: "qwen2.5:0.5b",
  // "user/model:tag", "hf.co/user/repo:Q4_K_M".
  std::string Shortest() const;
};

// Parses [host/][namespace/]model[:tag] (an optional "scheme://" before the host is dropped)
// and fills in Ollama's defaults (registry.ollama.ai, library, latest). nullopt when a part is
// empty or breaks Ollama's rules (host 1-350 characters, the others 1-80; letters, digits and
// '_' first, then also '-', '.' (not in the namespace) and ':' (host only)); such text is not
// an Ollama name, and no part of a valid one can climb out of the store.
std::optional<OllamaName> ParseOllamaName(std::string_view text);
// The name a manifest file's path below manifests/ stands for ("host/ns/model/tag"), or
// nullopt when it is not four valid parts.
std::optional<OllamaName> OllamaNameFromPath(std::string_view relative_path);

// What a layer is, by its media type (application/vnd.ollama.image.*).
enum class OllamaLayerKind {
  kModel,      // .model: the GGUF weights
  kTemplate,   // .template (and the older .prompt): a Go text/template
  kSystem,     // .system: the system prompt
  kParams,     // .params: default options as JSON
  kLicense,    // .license: text, may repeat
  kMessages,   // .messages: preset conversation turns
  kAdapter,    // .adapter: a LoRA
  kProjector,  // .projector: a vision projector
  kEmbed,      // .embed: deprecated; Ollama ignores it
  kOther,      // anything else (.draft, .tensor, .json, unknown)
};
OllamaLayerKind OllamaLayerKindOf(std::string_view media_type);

struct OllamaLayer {
  std::string media_type;
  std::string digest;  // "sha256:<64 lowercase hex>"
  uint64_t size = 0;
  OllamaLayerKind kind = OllamaLayerKind::kOther;

  std::string Hex() const { return digest.substr(7); }
  // The blob's file name: "sha256-<hex>".
  std::string BlobName() const { return "sha256-" + Hex(); }
};

struct OllamaManifest {
  std::optional<OllamaLayer> config{};  // absent when its digest is empty, as Ollama allows
  std::vector<OllamaLayer> layers;
  uint64_t TotalSize() const;  // config + layers, what `ollama list` shows
};

// schemaVersion 2, a config object and a layers array whose entries carry a string mediaType,
// a sha256 digest and a non-negative integer size. Corrupt, one line naming `what`, otherwise.
Expected<OllamaManifest> ParseOllamaManifest(std::string_view text, std::string_view what);

// The config blob (application/vnd.docker.container.image.v1+json): what tessera shows.
struct OllamaConfig {
  std::string model_format;    // "gguf" ("" when not given)
  std::string file_type;       // the quantization, e.g. "Q4_K_M"
  std::string model_family;    // e.g. "qwen2"
  std::string parameter_size;  // model_type, e.g. "494.03M"
};
Expected<OllamaConfig> ParseOllamaConfig(std::string_view text, std::string_view what);

// The params layer, typed as Ollama's api.Options reads it. Keys Ollama does not know are
// kept by name in `ignored` (Ollama ignores them too, with a warning); a known key with a
// value of the wrong type is Corrupt, naming it; null counts as absent.
struct OllamaParams {
  std::vector<std::string> stop;
  std::optional<double> temperature, top_p, min_p, typical_p, repeat_penalty, presence_penalty,
      frequency_penalty;
  std::optional<int64_t> num_ctx, num_predict, top_k, seed, repeat_last_n, num_keep, num_batch,
      num_gpu, main_gpu, num_thread, draft_num_predict;
  std::optional<bool> use_mmap;
  std::vector<std::string> ignored;
};
Expected<OllamaParams> ParseOllamaParams(std::string_view text, std::string_view what);
// The params as a JSON object of the keys that are set (the ignored ones under "ignored").
nlohmann::json OllamaParamsToJson(const OllamaParams& params);

}  // namespace tessera
