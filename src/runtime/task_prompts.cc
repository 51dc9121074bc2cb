#include "runtime/task_prompts.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "model/tensor_convert.h"

namespace tessera {

Expected<int32_t> EndOfTextId(const LoadedModel& model) {
  const Tokenizer& tok = model.tokenizer();
  if (auto id = tok.TokenToId("<|endoftext|>")) return *id;
  if (const auto& eos = model.tokenizer_config().eos_token) {
    if (auto id = tok.TokenToId(*eos)) return *id;
  }
  return Unsupported(
      "the model's vocabulary has neither <|endoftext|> nor an eos_token to end an embedding "
      "input with");
}

Expected<std::vector<int32_t>> EmbeddingIdsFromTokens(const LoadedModel& model,
                                                      std::vector<int32_t> ids) {
  const int64_t vocab = model.checkpoint().config.vocab_size;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab) {
      return InvalidArgument("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                             std::to_string(vocab - 1) + ")");
    }
  }
  TS_ASSIGN_OR_RETURN(int32_t end, EndOfTextId(model));
  if (ids.empty() || ids.back() != end) ids.push_back(end);
  return ids;
}

Expected<std::vector<int32_t>> EmbeddingIds(const LoadedModel& model, const std::string& text,
                                            const std::string& prompt) {
  TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model.EncodeText(prompt + text, true));
  return EmbeddingIdsFromTokens(model, std::move(ids));
}

std::vector<float> PoolEmbedding(std::span<const float> final_hidden, int64_t dimensions,
                                 bool normalize) {
  size_t n = final_hidden.size();
  if (dimensions > 0) n = std::min(n, static_cast<size_t>(dimensions));
  std::vector<float> v(final_hidden.begin(), final_hidden.begin() + static_cast<ptrdiff_t>(n));
  if (!normalize) return v;
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  // torch.nn.functional.normalize: x / max(||x||, 1e-12).
  const double norm = std::max(std::sqrt(sum), 1e-12);
  for (float& x : v) x = static_cast<float>(x / norm);
  return v;
}

Expected<std::vector<int32_t>> RerankIds(const LoadedModel& model, const std::string& query,
                                         const std::string& document,
                                         const std::string& instruction) {
  // Qwen3-Reranker's published prompt: a fixed system turn, the user turn with the three
  // fields, and the assistant turn opened after an empty think block.
  const std::string text =
      "<|im_start|>system\nJudge whether the Document meets the requirements based on the "
      "Query and the Instruct provided. Note that the answer can only be \"yes\" or "
      "\"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: " +
      (instruction.empty() ? std::string(kDefaultRerankInstruction) : instruction) +
      "\n<Query>: " + query + "\n<Document>: " + document +
      "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  return model.EncodeText(text, false);
}

namespace {

Expected<int32_t> SingleToken(const LoadedModel& model, const std::string& text) {
  TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model.EncodeText(text, false));
  if (ids.size() != 1) {
    return Unsupported("the model's tokenizer does not encode \"" + text +
                       "\" as one token, so it cannot score it as a reranker");
  }
  return ids[0];
}

}  // namespace

Expected<YesNoIds> RerankAnswerIds(const LoadedModel& model) {
  YesNoIds ids;
  TS_ASSIGN_OR_RETURN(ids.yes, SingleToken(model, "yes"));
  TS_ASSIGN_OR_RETURN(ids.no, SingleToken(model, "no"));
  // Their logits are read directly: a tokenizer larger than the model must not reach past them.
  const int64_t vocab = model.executor().spec().vocab;
  for (int32_t id : {ids.yes, ids.no}) {
    if (id < 0 || id >= vocab) {
      return Unsupported("the model's tokenizer gives \"yes\"/\"no\" id " + std::to_string(id) +
                         ", outside the model's " + std::to_string(vocab) +
                         " logits; the tokenizer does not match the model");
    }
  }
  return ids;
}

double YesProbability(std::span<const float> logits, YesNoIds ids) {
  const double yes = logits[static_cast<size_t>(ids.yes)];
  const double no = logits[static_cast<size_t>(ids.no)];
  // softmax over the pair: 1 / (1 + e^(no - yes)).
  return 1.0 / (1.0 + std::exp(no - yes));
}

Expected<std::vector<int32_t>> GuardPrefixIds(const LoadedModel& model,
                                              const nlohmann::ordered_json& messages) {
  TS_ASSIGN_OR_RETURN(AssembledPrompt p, model.RenderChat(messages, nlohmann::ordered_json()));
  TS_ASSIGN_OR_RETURN(std::vector<int32_t> tail, model.EncodeText("Safety:", false));
  p.ids.insert(p.ids.end(), tail.begin(), tail.end());
  return p.ids;
}

Expected<std::vector<std::vector<int32_t>>> GuardLabelIds(const LoadedModel& model) {
  std::vector<std::vector<int32_t>> out;
  for (const char* label : kGuardLabels) {
    TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                        model.EncodeText(std::string(" ") + label, false));
    if (ids.empty()) return Internal("a guard label encodes to no tokens");
    out.push_back(std::move(ids));
  }
  return out;
}

Expected<std::vector<int32_t>> GuardCategoriesPromptTail(const LoadedModel& model,
                                                         const std::string& label) {
  return model.EncodeText(" " + label + "\nCategories:", false);
}

std::vector<std::string> ParseGuardCategories(const std::string& generated) {
  const std::string line = generated.substr(0, generated.find('\n'));
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= line.size()) {
    size_t end = line.find(',', begin);
    if (end == std::string::npos) end = line.size();
    std::string item = line.substr(begin, end - begin);
    const size_t first = item.find_first_not_of(" \t\r");
    const size_t last = item.find_last_not_of(" \t\r");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    if (!item.empty() && item != "None") out.push_back(item);
    begin = end + 1;
  }
  return out;
}

Expected<std::vector<double>> ScoreHeadLogits(const Checkpoint& ckpt,
                                              std::span<const float> final_hidden) {
  const TensorRef& score = ckpt.tensors.score;
  if (!score) return Unsupported("the model has no classification head (score.weight)");
  const int64_t labels = ckpt.config.num_labels;
  const size_t width = final_hidden.size();
  std::vector<float> row(width);
  std::vector<double> out(static_cast<size_t>(labels));
  for (int64_t c = 0; c < labels; ++c) {
    TS_RETURN_IF_ERROR(WidenRowsToF32(score, c, 1, row));
    double sum = 0;
    for (size_t i = 0; i < width; ++i) sum += static_cast<double>(row[i]) * final_hidden[i];
    out[static_cast<size_t>(c)] = sum;
  }
  return out;
}

std::vector<double> Softmax(std::span<const double> scores) {
  double max = -INFINITY;
  for (double x : scores) max = std::max(max, x);
  std::vector<double> out(scores.size());
  double sum = 0;
  for (size_t i = 0; i < scores.size(); ++i) sum += out[i] = std::exp(scores[i] - max);
  for (double& x : out) x /= sum;
  return out;
}

}  // namespace tessera
