// The prompts of the task models and the arithmetic of their answers, shared by the server's
// task jobs and the tests that check them against the fp32 reference: what an embedding,
// rerank, guard or classifier input becomes as token ids, and how a final hidden row or a
// logits row becomes a vector, a score or class probabilities. Everything is deterministic and
// computed in double where it is reduced.
//
//   TS_ASSIGN_OR_RETURN(auto ids, EmbeddingIds(model, "what is BM25?", query_prompt));
//   ... run ids, take the final-normed hidden row of the last token (Scheduler on_final_hidden)
//   std::vector<float> v = PoolEmbedding(row, /*dimensions=*/256, /*normalize=*/true);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "runtime/loaded_model.h"

namespace tessera {

// ---- embeddings (Qwen3-Embedding: last-token pooling over text + <|endoftext|>)

// The id that ends every embedding input: <|endoftext|> when the vocabulary has it, else the
// tokenizer's end-of-sequence token.
Expected<int32_t> EndOfTextId(const LoadedModel& model);
// `prompt` (the model's instruction prompt, e.g. "Instruct: ...\nQuery:") + `text`, encoded
// with the checkpoint's special-token policy, ending with EndOfTextId (appended unless the
// post-processor already put it there).
Expected<std::vector<int32_t>> EmbeddingIds(const LoadedModel& model, const std::string& text,
                                            const std::string& prompt);
// Token ids given by the caller, checked against the vocabulary, ending with EndOfTextId.
Expected<std::vector<int32_t>> EmbeddingIdsFromTokens(const LoadedModel& model,
                                                      std::vector<int32_t> ids);
// The first `dimensions` values of a final hidden row (0: all), L2-normalised when asked.
std::vector<float> PoolEmbedding(std::span<const float> final_hidden, int64_t dimensions,
                                 bool normalize);

// ---- reranking (Qwen3-Reranker: P(yes) against no at the last position)

inline constexpr const char* kDefaultRerankInstruction =
    "Given a web search query, retrieve relevant passages that answer the query";
// The reranker's chat prompt around "<Instruct>: ...\n<Query>: ...\n<Document>: ...", ending
// where the assistant answers (after an empty think block).
Expected<std::vector<int32_t>> RerankIds(const LoadedModel& model, const std::string& query,
                                         const std::string& document,
                                         const std::string& instruction);
struct YesNoIds {
  int32_t yes = -1;
  int32_t no = -1;
};
// The single tokens "yes" and "no"; an error when either is not one token.
Expected<YesNoIds> RerankAnswerIds(const LoadedModel& model);
// softmax([logit_no, logit_yes])[1].
double YesProbability(std::span<const float> logits, YesNoIds ids);

// ---- guard (Qwen3Guard-Gen: "Safety: <label>" after the chat template's prompt)

inline constexpr const char* kGuardLabels[] = {"Safe", "Unsafe", "Controversial"};
// The conversation through the guard's chat template (with the generation prompt), then
// "Safety:", where the label follows.
Expected<std::vector<int32_t>> GuardPrefixIds(const LoadedModel& model,
                                              const nlohmann::ordered_json& messages);
// Each label's tokens as they follow the prefix (" Safe", ...), in kGuardLabels order.
Expected<std::vector<std::vector<int32_t>>> GuardLabelIds(const LoadedModel& model);

// What follows a label in the guard's answer, where its categories are generated:
// " <label>\nCategories:".
Expected<std::vector<int32_t>> GuardCategoriesPromptTail(const LoadedModel& model,
                                                         const std::string& label);
// The categories of the guard's generated text (up to its first line end, comma-separated,
// trimmed; "None" is none).
std::vector<std::string> ParseGuardCategories(const std::string& generated);
inline constexpr int64_t kMaxGuardCategoryTokens = 32;

// ---- classification (a *ForSequenceClassification score head)

// score.weight [num_labels, hidden] times the final-normed hidden row, in double.
Expected<std::vector<double>> ScoreHeadLogits(const Checkpoint& ckpt,
                                              std::span<const float> final_hidden);

// ---- shared arithmetic

// softmax of scores (double), max-subtracted.
std::vector<double> Softmax(std::span<const double> scores);

}  // namespace tessera
