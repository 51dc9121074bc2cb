// LoadedModel: one model opened the one way every command uses (generate, chat, bench and the
// server's worker): its checkpoint (a path-given checkpoint runs from its package, converted
// on first use), tokenizer and tokenizer_config.json policy, chat template, stop ids and
// sampling defaults, the executor over the placement with N sequence slots, and the scheduler
// that batches those slots. Text is encoded and chat prompts are rendered here, so BOS and
// template options (e.g. Qwen3.5 answering without thinking) are the same everywhere.
//
//   ModelLoadOptions o{.placement = "cpu", .parallel = 4};
//   TS_ASSIGN_OR_RETURN(std::unique_ptr<LoadedModel> m, LoadedModel::Open(dir, o, log));
//   TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, m->RenderChat(messages, {}));
//   m->scheduler().Submit(...);   // see engine/scheduler.h and runtime/text_stream.h
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backend/backend.h"
#include "base/progress.h"
#include "base/status.h"
#include "catalog/gguf_model.h"
#include "chat/tool_call_syntax.h"
#include "engine/model_executor.h"
#include "engine/scheduler.h"
#include "format/model_config.h"
#include "prompt/prompt.h"
#include "sampling/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

struct ModelLoadOptions {
  std::string placement = "cpu";
  WeightFormat weights = WeightFormat::kAuto;
  int threads = 0;
  bool bf16_activations = false;
  std::optional<CpuIsa> cpu_isa{};  // --cpu-isa; unset: the best this CPU runs
  NpuOptions npu{};                 // --npu-device and the NPU queue, for xdna layers
  // The cpu backend's KV cache (--kv-cache). Unset: it follows the weights (DefaultKvCache in
  // backend/backend.h): an F32 run keeps an exact fp32 cache, BF16/INT8/INT4 runs a bf16 one
  // (half the memory and the bytes attention reads; docs/backends.md).
  std::optional<KvCacheType> kv_cache{};
  int64_t context = 0;  // positions per sequence; 0: see kv_memory_mib
  int parallel = 1;     // sequence slots; 0: chosen from the cores and memory (logged)
  // The KV cache's budget in MiB (0: none given). Without it the block pool (backend.h) holds
  // slots x context positions and the context defaults to the model's own, at most 4096. With
  // it the pool is what the budget holds after the slots' own state (recurrent, sliding
  // windows), shared by all slots, and the context defaults to the model's own limit, at most
  // the whole pool; a budget too small for the slots is refused at load with the flags to
  // change. The choice is logged.
  int64_t kv_memory_mib = 0;
  // A task model (embed, rerank, classify, guard, decide): its sequences end with their prompt
  // (a guard's with a few label tokens). Without kv_memory_mib its pool is TaskKvPoolBlocks,
  // not every slot's whole context, since a step runs one prefill chunk of prompt rows however
  // many prompts are resident (logged).
  bool task_model = false;
  bool package_cache = true;  // a checkpoint given by path runs from its package
  bool prewarm = false;       // one forward pass at load, so the first request does not pay
  // --tool-call-syntax: how the model writes tool calls, for a checkpoint the catalog does not
  // know or declares wrongly. Unset: the catalog entry's, else a guess from the chat template
  // (logged). ChooseToolCallSyntax in chat/tool_call_syntax.h.
  std::optional<ToolCallSyntax> tool_call_syntax{};
  // The load's phases (opening, a first-use conversion, loading the weights, prewarm) as they
  // start and end; the caller shows them (base/progress.h). May be empty.
  ProgressCallback progress{};
};

// --kv-cache: "f32", "bf16", or "auto" (nullopt: follow the weights).
Expected<std::optional<KvCacheType>> ParseKvCacheType(std::string_view name);
// The KV cache a run of `ckpt` with `weights` gets: `asked` when given, else DefaultKvCache of
// the format the weights resolve to (a package's own, or the checkpoint's for kAuto).
Expected<KvCacheType> KvCacheFor(const Checkpoint& ckpt, WeightFormat weights,
                                 std::optional<KvCacheType> asked);

// The slots `parallel = 0` gives: two per core, 2..8, fewer when their KV cache would take
// more than a quarter of the machine's memory; `why` says how it was chosen.
int DefaultParallelSlots(int cores, uint64_t memory_bytes, uint64_t kv_bytes_per_slot,
                         std::string* why);

// A task model's KV pool without --kv-memory: one whole context (the longest input it takes)
// plus, for each other slot, one prefill chunk (kPrefillChunkTokens) and the spare block
// admission keeps per running sequence. Short inputs then fill every slot of a step; long
// ones wait for blocks in turn (admission waits, nothing is refused), which costs no
// throughput because a step's prompt rows are one chunk anyway.
int64_t TaskKvPoolBlocks(int64_t context, int slots);

// What a model brings beyond generation_config.json's sampling defaults (Ollama's params
// layer: stop, num_predict, seed); a request's own values win (Session::Start).
struct RequestDefaults {
  std::vector<std::string> stop{};      // used when the request gives no stop strings
  std::optional<int64_t> max_tokens{};  // num_predict when > 0
  std::optional<int64_t> seed{};        // used when the request gives no seed
};

class LoadedModel {
 public:
  // `log` receives one line per note (package conversion, slots chosen); may be empty.
  static Expected<std::unique_ptr<LoadedModel>> Open(
      const std::string& dir, const ModelLoadOptions& options,
      const std::function<void(const std::string&)>& log = {});
  // A GGUF model in place (catalog/gguf_model.h; its sha256 is the caller's to verify, once):
  // the checkpoint from the file (model/gguf_checkpoint.h), the tokenizer, chat template and
  // stop ids from its metadata (runtime/gguf_loading.h), and Ollama's system layer (the system
  // message of a chat that has none) and params layer (temperature, top_p, top_k, min_p,
  // repeat_penalty, stop, num_predict, seed as defaults a request overrides). Ollama's Go
  // template layer is not interpreted: the file's own tokenizer.chat_template is used.
  static Expected<std::unique_ptr<LoadedModel>> Open(
      const GgufModel& gguf, const ModelLoadOptions& options,
      const std::function<void(const std::string&)>& log = {});

  const std::string& dir() const { return dir_; }
  const Checkpoint& checkpoint() const { return exec_->checkpoint(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const TokenizerConfig& tokenizer_config() const { return tokenizer_config_; }
  bool has_chat_template() const { return assembler_.has_value(); }
  const PromptAssembler* assembler() const { return assembler_ ? &*assembler_ : nullptr; }
  ModelExecutor& executor() { return *exec_; }
  const ModelExecutor& executor() const { return *exec_; }
  Scheduler& scheduler() { return *scheduler_; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  const SamplingDefaults& sampling_defaults() const { return defaults_; }
  const RequestDefaults& request_defaults() const { return request_defaults_; }
  // The system message RenderChat puts first when a chat has none (Ollama's system layer).
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }
  int64_t context() const { return exec_->max_seq(); }
  int slots() const { return exec_->max_slots(); }
  uint64_t kv_bytes() const { return kv_bytes_; }
  KvCacheType kv_cache() const { return kv_cache_; }
  // How the model writes tool calls and where that was decided (option, catalog or guessed).
  const ToolCallSyntaxChoice& tool_call_syntax() const { return tool_call_syntax_; }
  // The syntax to parse a reply to a request that gives tools; InvalidArgument, naming the
  // model as `served_name` and saying why, when its template renders no tools or its syntax is
  // none.
  Expected<ToolCallSyntax> ToolCallSyntaxForTools(std::string_view served_name) const;

  // Text to ids with the checkpoint's policy: the tokenizer.json post-processor, and a BOS
  // prepended when tokenizer_config.json says add_bos_token and the post-processor did not.
  Expected<std::vector<int32_t>> EncodeText(const std::string& text, bool add_special) const;
  // The chat template's variables for `kwargs`: the model's default enable_thinking (e.g.
  // Qwen3.5 answers directly) unless kwargs set it. The one place that default is applied.
  nlohmann::ordered_json ChatTemplateKwargs(nlohmann::ordered_json kwargs) const;
  // A conversation through the chat template (FailedPrecondition without one). kwargs reach
  // the template through ChatTemplateKwargs.
  Expected<AssembledPrompt> RenderChat(const nlohmann::ordered_json& messages,
                                       nlohmann::ordered_json kwargs,
                                       bool add_generation_prompt = true) const;

  // Where a chat prompt (`ids`, rendered from `messages` with `kwargs`) is likely to be shared
  // with other prompts: the ids it has in common with the rendering of the messages before the
  // last user message (a system prompt, a history), for SequenceRequest::keep_state_at. Only
  // for models that keep recurrent states (the executor's kept states); 0 otherwise, or when
  // no message precedes the last user message.
  int64_t SharedChatBeginning(const nlohmann::ordered_json& messages,
                              const nlohmann::ordered_json& kwargs,
                              std::span<const int32_t> ids) const;

  // For the load log: architecture, placement, embedding source, slots, KV memory, the
  // tool-call syntax with its source and, when layers or the head run on the cpu backend, its
  // kernel family and decode prefetch ("cpu: avx512 kernels, decode prefetch l2-16k").
  std::string Describe() const;

 private:
  LoadedModel() = default;
  // The part of Open shared by checkpoint folders and GGUF files, once the tokenizer, template,
  // stop ids and defaults are set: placement, KV pool, executor, scheduler, prewarm.
  // `package_dir`: the folder whose package a path-given checkpoint runs from ("" for none).
  static Expected<std::unique_ptr<LoadedModel>> Finish(
      std::unique_ptr<LoadedModel> m, std::shared_ptr<const Checkpoint> ckpt,
      const std::string& package_dir, const ModelLoadOptions& options,
      const std::function<void(const std::string&)>& log);
  // Sets tool_call_syntax_ (ChooseToolCallSyntax: option, catalog entry of dir_, template).
  Status ChooseToolCallSyntax(std::optional<ToolCallSyntax> option,
                              const std::function<void(const std::string&)>& log);
  bool RendersTools() const;

  std::string dir_;
  std::optional<Tokenizer> tokenizer_;
  TokenizerConfig tokenizer_config_;
  std::optional<PromptAssembler> assembler_;
  std::unique_ptr<ModelExecutor> exec_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<int32_t> stop_ids_;
  SamplingDefaults defaults_;
  RequestDefaults request_defaults_;
  std::optional<std::string> default_system_;
  uint64_t kv_bytes_ = 0;
  KvCacheType kv_cache_ = KvCacheType::kBF16;
  ToolCallSyntaxChoice tool_call_syntax_;
  // The cpu backend's kernel family (--cpu-isa, else the best this CPU runs; a family the CPU
  // lacks fails the load), when the placement has a cpu stage.
  std::optional<CpuIsa> cpu_isa_{};
};

}  // namespace tessera
