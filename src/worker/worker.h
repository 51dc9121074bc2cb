// The inference worker: the process that owns the models and runs every job the HTTP process
// sends it over a socket (worker_protocol.h). It loads models on demand under a residency
// limit with least-recently-used eviction, prewarms each one before it serves, renders chat
// templates, tokenizes, generates, applies stop strings and reports logprobs. Generation jobs
// run together in each model's scheduler (continuous batching over the model's slots);
// resident models take turns, a step each, cut to a time slice while another model streams
// (step_slicer.h); a Cancel takes effect at the next step. The HTTP process
// starts it as `tessera worker --fd N ...` and restarts it when it dies.
//
//   WorkerOptions options;
//   options.models = {{"stories", "/models/stories260k"}};
//   options.placement = "cpu";
//   return RunWorker(/*fd=*/3, options);   // returns when the server closes the socket
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "catalog/gguf_model.h"
#include "chat/tool_call_syntax.h"
#include "format/model_kind.h"
#include "worker/model_entry.h"

namespace tessera::worker {

// The GGUF model an entry's `dir` names (a GGUF file, or an Ollama name in Ollama's store);
// nullopt when it is a checkpoint folder.
Expected<std::optional<GgufModel>> GgufModelOfEntry(const ModelEntry& entry);

// What the entry serves: DetectModelKind of its folder, or DetectGgufModelKind of its GGUF file.
Expected<ModelKindInfo> DetectEntryKind(const ModelEntry& entry);

// Sets each model's kind from its checkpoint, then from `declared` ("NAME=KIND" entries, e.g.
// "guard=guard"): a declaration may make a causal LM with a chat template a rerank, guard or
// decide model, never change what the checkpoint itself says it is (a completion model has no
// chat template to ask a question with). Errors name the model and what was found.
Status ResolveModelKinds(std::vector<ModelEntry>& models, const std::vector<std::string>& declared);

// Sets models' tool_call_syntax from `declared` (--tool-call-syntax entries): "MODEL=SYNTAX",
// or a bare "SYNTAX" when one model is served. Errors name the entry and the valid syntaxes or
// the served models.
Status DeclareToolCallSyntaxes(std::vector<ModelEntry>& models,
                               const std::vector<std::string>& declared);

struct WorkerOptions {
  std::vector<ModelEntry> models;  // the first is the default, loaded at start
  std::string placement = "cpu";
  int64_t context = 0;                  // KV positions per slot; 0: the model's own, at most 4096
  int parallel = 0;                     // sequence slots per model; 0: chosen from cores and memory
  int64_t kv_memory_mib = 0;            // each model's KV cache budget (0: none)
  std::optional<KvCacheType> kv_cache;  // unset: follows the weights (ModelLoadOptions)
  int max_loaded_models = 1;
  bool prewarm = true;            // load and warm the default model before reporting ready
  bool bf16_activations = false;  // BackendOptions::bf16_activations for BF16 packages
  std::optional<CpuIsa> cpu_isa;  // BackendOptions::cpu_isa (--cpu-isa)
  NpuOptions npu;                 // BackendOptions::npu (--npu-device, --npu-queue...)
  // How System One reuses a state (SystemOneOptions in systemone_job.h): --systemone-reuse
  // none|shared|pinned (0, 1, 2) and --systemone-pinned-states N.
  int systemone_resume = 0;
  size_t systemone_entries = 6;
  // Model-load progress lines on stderr as JSON objects ({"type": "model_load", ...}) rather
  // than "tessera worker: model 'x': ..." text: the server's --log-format.
  bool log_json = false;
};

// --systemone-reuse: "none" 0, "shared" 1, "pinned" 2; another name is an error naming them.
Expected<int> ParseSystemOneReuse(std::string_view name);

// Serves jobs from `fd` until it is closed. Returns the process exit code.
int RunWorker(int fd, const WorkerOptions& options);

}  // namespace tessera::worker
