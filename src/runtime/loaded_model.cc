#include "runtime/loaded_model.h"

#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>
#include <type_traits>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/cpu_report.h"
#include "base/mapped_file.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "catalog/package.h"
#include "catalog/package_cache.h"
#include "chat/chat_template.h"
#include "engine/decoding.h"
#include "engine/placement.h"
#include "model/checkpoint.h"
#include "model/gguf_checkpoint.h"
#include "runtime/gguf_loading.h"

namespace tessera {
namespace {

uint64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

// KV memory per position of the shared block pool: one copy of the keys (the cpu backend
// keeps them transposed where its blocked attention kernel runs, row-major elsewhere) and the
// values, for every full-attention layer (4 or 2 bytes a value).
uint64_t PoolBytesPerPosition(const ModelSpec& spec, KvCacheType type) {
  const uint64_t element = type == KvCacheType::kBF16 ? 2 : 4;
  uint64_t bytes = 0;
  for (const LayerSpec& layer : spec.layer) {
    if (layer.kind == LayerKind::kAttention)
      bytes += 2u * element * static_cast<uint64_t>(spec.kv_dim);
  }
  return bytes;
}

// One sequence's recurrent state (DeltaNet layers, fp32).
uint64_t RecurrentStateBytes(const ModelSpec& spec) {
  if (!spec.deltanet) return 0;
  const DeltaNetSpec& n = *spec.deltanet;
  return 4u * static_cast<uint64_t>(n.conv_state_floats() + n.matrix_state_floats()) *
         static_cast<uint64_t>(spec.count(LayerKind::kGatedDeltaNet));
}

// What each slot holds outside the pool: the rings of sliding layers (their window + 128
// positions, twice) and the recurrent state of DeltaNet layers (fp32, with its 2 snapshots).
uint64_t SlotStateBytes(const ModelSpec& spec, int64_t context, KvCacheType type) {
  const uint64_t element = type == KvCacheType::kBF16 ? 2 : 4;
  uint64_t bytes = 0;
  for (const LayerSpec& layer : spec.layer) {
    if (layer.kind == LayerKind::kGatedDeltaNet) {
      const DeltaNetSpec& n = *spec.deltanet;
      bytes += 4u * static_cast<uint64_t>(n.conv_state_floats() + n.matrix_state_floats()) * 3;
    } else if (layer.kind == LayerKind::kSlidingAttention) {
      const int64_t positions = std::min(context, 2 * (layer.window + 128));
      bytes += 2u * element * static_cast<uint64_t>(spec.kv_dim) * static_cast<uint64_t>(positions);
    }
  }
  return bytes;
}

// Runs `work` as the load phase `name`, reported as it starts and when it ends, so a slow one
// is never silent.
template <typename Work>
auto InPhase(const ProgressCallback& progress, std::string_view name, Work&& work) {
  ReportProgress(progress, {.phase = name});
  auto result = work();
  bool succeeded = false;
  if constexpr (std::is_same_v<decltype(result), Status>) {
    succeeded = result.ok();
  } else {
    succeeded = result.has_value();
  }
  if (succeeded) ReportProgress(progress, {.phase = name, .finished = true});
  return result;
}

}  // namespace

Expected<std::optional<KvCacheType>> ParseKvCacheType(std::string_view name) {
  if (name == "auto") return std::optional<KvCacheType>();
  if (name == "bf16") return std::optional<KvCacheType>(KvCacheType::kBF16);
  if (name == "f32") return std::optional<KvCacheType>(KvCacheType::kF32);
  return InvalidArgument("--kv-cache must be auto, bf16 or f32, got '" + std::string(name) + "'");
}

Expected<KvCacheType> KvCacheFor(const Checkpoint& ckpt, WeightFormat weights,
                                 std::optional<KvCacheType> asked) {
  if (asked) return *asked;
  TS_ASSIGN_OR_RETURN(WeightFormat resolved, ResolveWeightFormat(ckpt, weights));
  return DefaultKvCache(resolved);
}

int64_t TaskKvPoolBlocks(int64_t context, int slots) {
  const int64_t others = std::max(slots, 1) - 1;
  return KvBlocksFor(context) + others * (KvBlocksFor(kPrefillChunkTokens) + 1);
}

int DefaultParallelSlots(int cores, uint64_t memory_bytes, uint64_t kv_bytes_per_slot,
                         std::string* why) {
  int slots = std::clamp(2 * std::max(cores, 1), 2, 8);
  const uint64_t budget = memory_bytes / 4;
  std::string reason = std::to_string(std::max(cores, 1)) + " cores";
  if (kv_bytes_per_slot > 0 && budget > 0) {
    const uint64_t fit = budget / kv_bytes_per_slot;
    if (fit < static_cast<uint64_t>(slots)) {
      slots = static_cast<int>(std::max<uint64_t>(fit, 1));
      reason += ", the KV cache within a quarter of " + std::to_string(memory_bytes >> 20) + " MiB";
    }
  }
  if (why) *why = std::to_string(slots) + " slots (" + reason + ")";
  return slots;
}

Expected<std::unique_ptr<LoadedModel>> LoadedModel::Open(
    const std::string& dir, const ModelLoadOptions& options,
    const std::function<void(const std::string&)>& log) {
  std::unique_ptr<LoadedModel> m(new LoadedModel());
  m->dir_ = dir;
  auto in_phase = [&](std::string_view name, auto&& work) {
    return InPhase(options.progress, name, work);
  };
  TS_ASSIGN_OR_RETURN(
      std::shared_ptr<const Checkpoint> ckpt,
      in_phase(IsPackageDir(dir) ? "verifying and mapping the package" : "mapping the checkpoint",
               [&] { return OpenCheckpoint(dir); }));
  const std::string tokenizer_path = dir + "/tokenizer.json";
  if (!FileExists(tokenizer_path)) {
    return NotFound("no tokenizer.json in " + dir + "; a model folder needs its tokenizer");
  }
  auto tok = Tokenizer::FromFile(tokenizer_path);
  if (!tok) return tok.status().WithContext(tokenizer_path);
  m->tokenizer_.emplace(std::move(*tok));
  const std::string config_path = dir + "/tokenizer_config.json";
  if (FileExists(config_path)) {
    TS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path, 64u << 20));
    auto parsed = ParseTokenizerConfig(text);
    if (!parsed) return parsed.status().WithContext(config_path);
    m->tokenizer_config_ = std::move(*parsed);
  }
  if (auto tmpl = LoadChatTemplateConfig(dir); tmpl && !tmpl->source.empty()) {
    TS_ASSIGN_OR_RETURN(PromptAssembler assembler, PromptAssembler::Create(*tmpl, *m->tokenizer_));
    m->assembler_.emplace(std::move(assembler));
  }
  TS_RETURN_IF_ERROR(m->ChooseToolCallSyntax(options.tool_call_syntax, log));
  m->defaults_ = SamplingDefaultsFor(ckpt->generation);
  m->stop_ids_ = StopIds(*ckpt);
  if (m->assembler_ && m->tokenizer_config_.eos_token) {
    // Chat models end a turn with the tokenizer's eos (e.g. <|im_end|>), which
    // generation_config.json does not always list.
    std::optional<int32_t> eos = m->tokenizer_->TokenToId(*m->tokenizer_config_.eos_token);
    if (eos && *eos < ckpt->config.vocab_size &&
        std::find(m->stop_ids_.begin(), m->stop_ids_.end(), *eos) == m->stop_ids_.end()) {
      m->stop_ids_.push_back(*eos);
    }
  }
  return Finish(std::move(m), std::move(ckpt), dir, options, log);
}

Expected<std::unique_ptr<LoadedModel>> LoadedModel::Open(
    const GgufModel& gguf, const ModelLoadOptions& options,
    const std::function<void(const std::string&)>& log) {
  std::unique_ptr<LoadedModel> m(new LoadedModel());
  m->dir_ = gguf.path;
  TS_ASSIGN_OR_RETURN(std::shared_ptr<const Checkpoint> ckpt,
                      InPhase(options.progress, "mapping the GGUF file",
                              [&] { return OpenGgufCheckpoint(gguf.path); }));
  TS_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(gguf.path));
  TS_ASSIGN_OR_RETURN(GgufTokenizerData data, ReadGgufTokenizerData(file));
  auto tok = TokenizerFromGguf(data);
  if (!tok) return tok.status().WithContext(gguf.path);
  m->tokenizer_.emplace(std::move(*tok));
  // BOS follows tokenizer.ggml.add_bos_token inside the tokenizer's post-processor, so
  // tokenizer_config_ stays empty (EncodeText adds nothing more).
  auto tmpl = GgufChatTemplate(data);
  if (!tmpl) return tmpl.status().WithContext(gguf.path);
  if (*tmpl) {
    TS_ASSIGN_OR_RETURN(PromptAssembler assembler, PromptAssembler::Create(**tmpl, *m->tokenizer_));
    m->assembler_.emplace(std::move(assembler));
  }
  TS_RETURN_IF_ERROR(m->ChooseToolCallSyntax(options.tool_call_syntax, log));
  m->stop_ids_ = GgufStopIds(data, ckpt->config.vocab_size);
  m->default_system_ = gguf.system_prompt;
  if (gguf.params) {
    const OllamaParams& p = *gguf.params;
    m->defaults_.temperature = p.temperature;
    m->defaults_.top_p = p.top_p;
    m->defaults_.top_k = p.top_k;
    m->defaults_.min_p = p.min_p;
    m->defaults_.repetition_penalty = p.repeat_penalty;
    m->request_defaults_.stop = p.stop;
    if (p.num_predict && *p.num_predict > 0) m->request_defaults_.max_tokens = p.num_predict;
    m->request_defaults_.seed = p.seed;
  }
  return Finish(std::move(m), std::move(ckpt), /*package_dir=*/"", options, log);
}

Expected<std::unique_ptr<LoadedModel>> LoadedModel::Finish(
    std::unique_ptr<LoadedModel> m, std::shared_ptr<const Checkpoint> ckpt,
    const std::string& package_dir, const ModelLoadOptions& options,
    const std::function<void(const std::string&)>& log) {
  auto in_phase = [&](std::string_view name, auto&& work) {
    return InPhase(options.progress, name, work);
  };
  TS_ASSIGN_OR_RETURN(Placement placement,
                      ParsePlacement(options.placement, ckpt->config.num_layers));
  if (options.package_cache && !package_dir.empty()) {
    TS_ASSIGN_OR_RETURN(ckpt,
                        CheckpointForRun(package_dir, std::move(ckpt), placement.OnlyOn("cpu"),
                                         options.weights, {log, options.progress}));
  }
  TS_ASSIGN_OR_RETURN(const KvCacheType kv_cache,
                      KvCacheFor(*ckpt, options.weights, options.kv_cache));
  ModelExecutor::Options exec_options;
  exec_options.max_seq = options.context;
  exec_options.backend.weights = options.weights;
  exec_options.backend.threads = options.threads;
  exec_options.backend.bf16_activations = options.bf16_activations;
  exec_options.backend.cpu_isa = options.cpu_isa;
  exec_options.backend.npu = options.npu;
  exec_options.backend.kv_cache = kv_cache;
  const ModelSpec& spec = ckpt->tensors.spec;
  const int64_t model_max = std::max<int64_t>(ckpt->config.max_position_embeddings, 1);
  const uint64_t budget = static_cast<uint64_t>(std::max<int64_t>(options.kv_memory_mib, 0)) << 20;
  // Without a budget every slot can hold a whole context (up to 4096 unless asked); with one,
  // a sequence may use the whole pool, up to the model's own limit.
  int64_t context = options.context > 0 ? options.context
                    : budget > 0        ? model_max
                                        : std::min<int64_t>(model_max, 4096);
  const uint64_t per_position = PoolBytesPerPosition(spec, kv_cache);
  int slots = options.parallel;
  if (slots <= 0) {
    std::string why;
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    const int64_t typical = std::min<int64_t>(context, 4096);
    slots = DefaultParallelSlots(
        cores, budget > 0 ? 4 * budget : PhysicalMemoryBytes(),
        SlotStateBytes(spec, typical, kv_cache) + per_position * static_cast<uint64_t>(typical),
        &why);
    if (log) log("parallel: " + why);
  }
  // Recurrent models also keep states at cached prefixes' block ends (one per two slots, at
  // least 2) so that a prefix resumes on any slot.
  const int kept = spec.count(LayerKind::kGatedDeltaNet) > 0 ? std::max(2, slots / 2) : 0;
  const uint64_t slot_state =
      SlotStateBytes(spec, context, kv_cache) * static_cast<uint64_t>(slots) +
      RecurrentStateBytes(spec) * static_cast<uint64_t>(kept);
  const uint64_t block_bytes = per_position * static_cast<uint64_t>(kKvBlockTokens);
  int64_t blocks = static_cast<int64_t>(slots) * KvBlocksFor(context);
  std::string pool_rule =
      budget > 0 ? ", from --kv-memory " + std::to_string(options.kv_memory_mib) + " MiB"
                 : ", a whole context per slot";
  if (budget == 0 && options.task_model) {
    blocks = std::min(blocks, TaskKvPoolBlocks(context, slots));
    pool_rule = ", a task model's: one whole context plus a " +
                std::to_string(kPrefillChunkTokens) + "-position prompt chunk per other slot";
  }
  if (budget > 0) {
    if (slot_state >= budget) {
      return ResourceExhausted("the per-slot state of " + std::to_string(slots) +
                               " slots (recurrent state, sliding "
                               "windows) needs " +
                               std::to_string(slot_state >> 20) + " MiB, more than --kv-memory " +
                               std::to_string(options.kv_memory_mib) +
                               " MiB; lower --parallel or raise --kv-memory");
    }
    if (block_bytes > 0) {
      blocks = static_cast<int64_t>((budget - slot_state) / block_bytes);
      if (blocks < slots) {
        return ResourceExhausted(
            "--kv-memory " + std::to_string(options.kv_memory_mib) + " MiB holds " +
            std::to_string(blocks) + " KV blocks of " + std::to_string(kKvBlockTokens) +
            " positions (" + std::to_string(block_bytes >> 10) + " KiB each), fewer than the " +
            std::to_string(slots) + " slots; raise --kv-memory or lower --parallel");
      }
      if (options.context <= 0) context = std::min(model_max, blocks * kKvBlockTokens);
    }
  }
  if (log) {
    log("KV pool: " + std::to_string(blocks) + " blocks of " + std::to_string(kKvBlockTokens) +
        " positions (" + std::to_string((static_cast<uint64_t>(blocks) * block_bytes) >> 20) +
        " MiB, " + KvCacheTypeName(kv_cache) + ") shared by " + std::to_string(slots) +
        " slots; context " + std::to_string(context) + " positions (the model's limit is " +
        std::to_string(model_max) + ")" + pool_rule);
  }
  exec_options.max_seq = context;
  exec_options.max_slots = slots;
  exec_options.kv_blocks = blocks;
  exec_options.kept_states = kept;
  // Every slot's decode token plus one prompt chunk per step.
  exec_options.max_batch_tokens = slots + kPrefillChunkTokens;
  m->kv_bytes_ = slot_state + static_cast<uint64_t>(blocks) * block_bytes;
  m->kv_cache_ = kv_cache;
  TS_ASSIGN_OR_RETURN(m->exec_,
                      in_phase(ckpt->tensors.packed ? "loading the packed weights"
                                                    : "loading and packing the weights",
                               [&] { return ModelExecutor::Load(ckpt, placement, exec_options); }));
  m->scheduler_ = std::make_unique<Scheduler>(*m->exec_, Scheduler::Options{});
  if (std::any_of(placement.stages.begin(), placement.stages.end(),
                  [](const PlacementStage& st) { return st.backend == "cpu"; })) {
    m->cpu_isa_ = options.cpu_isa.value_or(DetectCpuIsa());
  }
  if (options.prewarm) {
    // One forward pass touches every weight page and sizes every buffer.
    std::vector<float> logits(static_cast<size_t>(m->exec_->spec().vocab));
    const int32_t warm_id = static_cast<int32_t>(ckpt->generation.bos_token_id.value_or(0));
    TS_RETURN_IF_ERROR(in_phase("prewarm (one forward pass)", [&] {
      return m->exec_->Forward(0, 0, std::span<const int32_t>(&warm_id, 1), logits);
    }));
  }
  return m;
}

Status LoadedModel::ChooseToolCallSyntax(std::optional<ToolCallSyntax> option,
                                         const std::function<void(const std::string&)>& log) {
  TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
  const CatalogEntry* entry = CatalogEntryOfModelDir(*catalog, dir_);
  tool_call_syntax_ = tessera::ChooseToolCallSyntax(
      option, entry != nullptr ? entry->tool_call_syntax : std::nullopt,
      assembler_ ? &assembler_->config() : nullptr, log);
  return Status::Ok();
}

bool LoadedModel::RendersTools() const {
  return assembler_ && assembler_->config().renders_tools;
}

Expected<ToolCallSyntax> LoadedModel::ToolCallSyntaxForTools(std::string_view served_name) const {
  const std::string name(served_name);
  if (!RendersTools()) {
    return InvalidArgument("the chat template of '" + name +
                           "' does not describe tools to the model (its tool-call syntax: " +
                           tool_call_syntax_.Describe() + "); send the request without tools");
  }
  if (tool_call_syntax_.syntax == ToolCallSyntax::kNone) {
    return InvalidArgument("'" + name + "' has no tool-call syntax (" +
                           tool_call_syntax_.Describe() +
                           ") although its chat template renders tools; the server's operator "
                           "can declare one with --tool-call-syntax");
  }
  return tool_call_syntax_.syntax;
}

Expected<std::vector<int32_t>> LoadedModel::EncodeText(const std::string& text,
                                                       bool add_special) const {
  EncodeOptions opts;
  opts.add_special_tokens = add_special;
  TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->Encode(text, opts));
  if (add_special && tokenizer_config_.add_bos_token.value_or(false) &&
      tokenizer_config_.bos_token) {
    std::optional<int32_t> bos = tokenizer_->TokenToId(*tokenizer_config_.bos_token);
    if (!bos) {
      return Corrupt("tokenizer_config.json asks for add_bos_token but bos_token '" +
                     *tokenizer_config_.bos_token + "' is not in the vocabulary");
    }
    if (ids.empty() || ids.front() != *bos) ids.insert(ids.begin(), *bos);
  }
  return ids;
}

int64_t LoadedModel::SharedChatBeginning(const nlohmann::ordered_json& messages,
                                         const nlohmann::ordered_json& kwargs,
                                         std::span<const int32_t> ids) const {
  if (exec_->kept_states() == 0 || !messages.is_array()) return 0;
  size_t last_user = messages.size();
  for (size_t i = messages.size(); i-- > 0;) {
    const auto& m = messages[i];
    if (m.is_object() && m.contains("role") && m["role"] == "user") {
      last_user = i;
      break;
    }
  }
  if (last_user == 0 || last_user == messages.size()) return 0;
  nlohmann::ordered_json before = nlohmann::ordered_json::array();
  for (size_t i = 0; i < last_user; ++i) before.push_back(messages[i]);
  auto head = RenderChat(before, kwargs, /*add_generation_prompt=*/false);
  if (!head) return 0;  // e.g. a template that wants a user message: no hint
  // Tokens of a prefix of the text may differ from the whole text's at the junction; the ids
  // both start with are shared by any prompt that renders the same messages first.
  const size_t n = std::min(head->ids.size(), ids.size());
  size_t same = 0;
  while (same < n && head->ids[same] == ids[same]) ++same;
  return static_cast<int64_t>(same);
}

Expected<AssembledPrompt> LoadedModel::RenderChat(const nlohmann::ordered_json& messages,
                                                  nlohmann::ordered_json kwargs,
                                                  bool add_generation_prompt) const {
  if (!assembler_) {
    return InvalidArgument("the model in " + dir_ +
                           " has no chat template; give a plain prompt instead");
  }
  if (default_system_ && messages.is_array() &&
      !(!messages.empty() && messages[0].is_object() && messages[0].contains("role") &&
        messages[0]["role"] == "system")) {
    nlohmann::ordered_json with_system = nlohmann::ordered_json::array();
    with_system.push_back({{"role", "system"}, {"content", *default_system_}});
    for (const auto& message : messages) with_system.push_back(message);
    return assembler_->Assemble(with_system, add_generation_prompt,
                                ChatTemplateKwargs(std::move(kwargs)));
  }
  return assembler_->Assemble(messages, add_generation_prompt,
                              ChatTemplateKwargs(std::move(kwargs)));
}

nlohmann::ordered_json LoadedModel::ChatTemplateKwargs(nlohmann::ordered_json kwargs) const {
  if (kwargs.is_null()) kwargs = nlohmann::ordered_json::object();
  if (const auto thinking = checkpoint().config.default_enable_thinking;
      thinking && kwargs.is_object() && !kwargs.contains("enable_thinking")) {
    kwargs["enable_thinking"] = *thinking;  // e.g. Qwen3.5: answer directly
  }
  return kwargs;
}

std::string LoadedModel::Describe() const {
  return DescribeCheckpoint(checkpoint()) + "; " + exec_->placement().Describe() +
         "; token embedding: " + exec_->embedding_source() + "; " + std::to_string(slots()) +
         " slots, context " + std::to_string(context()) + " positions, KV pool of " +
         std::to_string(exec_->kv_blocks()) + " blocks, ~" + std::to_string(kv_bytes_ >> 20) +
         " MiB (" + KvCacheTypeName(kv_cache_) + "); tool calls: " + tool_call_syntax_.Describe() +
         (cpu_isa_ ? "; cpu: " + CpuKernelChoiceText(*cpu_isa_) : "");
}

}  // namespace tessera
