// What a checkpoint is for: a chat model, or one of the task models served beside it
// (embeddings, reranking, a guard, a classifier, a decider). Read from explicit markers in
// the checkpoint, never guessed from its name: a sentence-transformers last-token pooling
// module makes an embedding model, a `*ForSequenceClassification` architecture with `id2label`
// a classifier, a causal LM with a chat template a chat model, and one without (stories260k) a
// completion model: it continues a prompt (/v1/completions) but cannot be asked a question.
// Rerankers, guards and deciders are causal LMs too: only the catalog (or the user) can say a
// checkpoint is one of them.
//
//   TS_ASSIGN_OR_RETURN(ModelKindInfo info, DetectModelKind("/models/Qwen3-Embedding-0.6B"));
//   if (info.kind == ModelKind::kEmbed) ... info.prompts["query"] ...
//   std::printf("%s (%s)\n", ModelKindName(info.kind).data(), info.evidence.c_str());
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

enum class ModelKind : uint8_t {
  kChat,
  kEmbed,
  kRerank,
  kGuard,
  kClassify,
  kDecide,
  kCompletion,
};

std::string_view ModelKindName(ModelKind kind);  // "chat", "embed", ...
// The kind in a sentence, with its article: "a chat model", "an embed model".
std::string AModelOfKind(ModelKind kind);
std::optional<ModelKind> ParseModelKind(std::string_view name);
// Chat and completion models generate text, so each slot may need a whole context; the task
// kinds' sequences end with their prompt (or a few label tokens).
bool GeneratesText(ModelKind kind);

struct ModelKindInfo {
  ModelKind kind = ModelKind::kChat;
  std::string evidence;  // what decided it, for the load log ("1_Pooling: last-token pooling")
  // kEmbed: the instruction prompts by name (sentence-transformers' "prompts", e.g. "query"),
  // and whether the pooled vector is L2-normalised (a Normalize module).
  std::map<std::string, std::string> prompts;
  bool normalize = false;
  // kClassify: the labels by class index (config.json id2label, every index 0..n-1 present).
  std::vector<std::string> labels;
};

// Reads config.json (and, when present, modules.json with its pooling module's config and
// config_sentence_transformers.json) in `dir`. An architecture or pooling tessera does not run
// is an Unsupported error saying what was found and which kinds do run.
Expected<ModelKindInfo> DetectModelKind(const std::string& dir);

}  // namespace tessera
