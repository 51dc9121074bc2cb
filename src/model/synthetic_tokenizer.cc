#include "model/synthetic_tokenizer.h"

#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "base/utf8.h"

namespace tessera {
namespace {

// Original training text: plain English prose about ordinary things, long enough to learn
// the frequent words and pieces of English.
constexpr std::string_view kTrainingText =
    "The morning was quiet and the river moved slowly past the old mill. A small boat waited "
    "by the stone steps, and the boy who owned it sat on the wall with his shoes beside him. "
    "He was thinking about the market in the town across the water, where his mother sold "
    "bread and his sister counted coins into a wooden box. Every day the same people came to "
    "buy the same things, and every day they talked about the weather, the price of flour and "
    "the news from the city. When the bell rang at noon the baker closed his door for an hour "
    "and the children ran down to the river to throw stones and watch the rings spread across "
    "the surface. In the afternoon the wind turned cold and clouds gathered over the hills. "
    "The boy pushed the boat into the current and rowed with long, steady strokes toward the "
    "far bank. He could hear the voices of the traders, the creak of carts and the bark of a "
    "dog that followed every stranger. His sister saw him first and waved, then went back to "
    "her work without a word. There were apples to sort, letters to carry and a list of names "
    "to read before the evening meal. Their mother said that a day without work was a day "
    "without bread, but she smiled when she said it, and the children knew that she did not "
    "mean it as a warning. Later, when the lamps were lit and the street grew dark, they "
    "walked home together along the road that followed the river. The water was black and "
    "still, and the stars were bright above the trees. Nobody spoke for a long time. Then the "
    "boy asked what they would do if the mill stopped turning, and his mother answered that "
    "people would always need bread, and that the river would always find a way to the sea. "
    "Questions like these have simple answers: we learn, we build, we share what we have, "
    "and we try again tomorrow. Numbers such as 1, 2, 3, 10, 25, 100 and 2024 appear in "
    "lists, tables and reports; code uses names like value, count, index, result and error. "
    "Some forms ask for an answer (yes/no), some ask (no/yes) twice, and others for a verdict "
    "(Safe/Unsafe/Controversial) or (Controversial/Unsafe/Safe).";

// GPT-2's reversible byte -> printable character map used by byte-level BPE.
std::vector<std::string> ByteToUnicode() {
  std::vector<std::string> table(256);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
    AppendUtf8(&table[static_cast<size_t>(b)], cp);
  }
  return table;
}

// Words with their leading space attached, punctuation on its own: close to what the GPT-2
// pre-tokenizer produces for plain prose.
std::map<std::string, int> CountWords(std::string_view text) {
  std::map<std::string, int> counts;
  std::string word;
  auto flush = [&]() {
    if (!word.empty()) ++counts[word];
    word.clear();
  };
  for (char c : text) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (c == ' ') {
      flush();
      word = " ";
    } else if (alnum) {
      if (!word.empty() && word != " " && !std::isalnum(static_cast<unsigned char>(word.back())))
        flush();
      word += c;
    } else {
      flush();
      word = std::string(1, c);
      flush();
    }
  }
  flush();
  return counts;
}

}  // namespace

Expected<SyntheticTokenizerFiles> MakeSyntheticTokenizer(int max_merges) {
  if (max_merges < 0) return InvalidArgument("max_merges must be >= 0");
  const std::vector<std::string> byte_char = ByteToUnicode();
  // Each word as a sequence of symbols (strings of mapped characters).
  std::vector<std::pair<std::vector<std::string>, int>> words;
  for (const auto& [w, n] : CountWords(kTrainingText)) {
    std::vector<std::string> symbols;
    for (unsigned char b : w) symbols.push_back(byte_char[b]);
    words.emplace_back(std::move(symbols), n);
  }
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  int32_t next_id = 0;
  for (int b = 0; b < 256; ++b) vocab[byte_char[static_cast<size_t>(b)]] = next_id++;
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (int m = 0; m < max_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [symbols, n] : words) {
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += n;
    }
    // Most frequent pair; std::map order breaks ties deterministically.
    const std::pair<std::string, std::string>* best = nullptr;
    int best_count = 1;
    for (const auto& [pair, n] : pairs) {
      if (n > best_count && !vocab.contains(pair.first + pair.second)) {
        best = &pair;
        best_count = n;
      }
    }
    if (best == nullptr) break;
    std::string merged = best->first + best->second;
    merges.push_back(best->first + " " + best->second);
    vocab[merged] = next_id++;
    for (auto& [symbols, n] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == best->first && symbols[i + 1] == best->second) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      symbols = std::move(out);
    }
  }
  SyntheticTokenizerFiles files;
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    added.push_back({{"id", next_id},
                     {"content", special},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
    ++next_id;
  }
  files.endoftext_id = next_id - 3;
  files.im_start_id = next_id - 2;
  files.im_end_id = next_id - 1;
  files.vocab_size = next_id;

  nlohmann::ordered_json tok;
  tok["version"] = "1.0";
  tok["truncation"] = nullptr;
  tok["padding"] = nullptr;
  tok["added_tokens"] = added;
  tok["normalizer"] = nullptr;
  tok["pre_tokenizer"] = {{"type", "ByteLevel"},
                          {"add_prefix_space", false},
                          {"trim_offsets", true},
                          {"use_regex", true}};
  tok["post_processor"] = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", true}};
  tok["decoder"] = {{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", true},
                    {"use_regex", true}};
  tok["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", false},
                  {"vocab", vocab},
                  {"merges", merges}};
  files.tokenizer_json = tok.dump(1);

  nlohmann::ordered_json cfg;
  cfg["add_bos_token"] = false;
  cfg["bos_token"] = nullptr;
  cfg["eos_token"] = "<|im_end|>";
  cfg["pad_token"] = "<|endoftext|>";
  cfg["unk_token"] = nullptr;
  cfg["model_max_length"] = 32768;
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  cfg["clean_up_tokenization_spaces"] = false;
  cfg["chat_template"] =
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  files.tokenizer_config_json = cfg.dump(2);
  return files;
}

}  // namespace tessera
