// tokenizer_bench: encoding throughput (MB/s, one thread) on a few MB of English prose for the
// Qwen2.5, Llama-3, Gemma-3 and stories260k tokenizers.
//
//   build-tok/bench/tokenizer_bench [--mb 4] [--shared DIR]
//
// The corpus is the prose-like strings of the public reference vectors plus the stories260k
// reference texts, joined into paragraphs and repeated to the requested size. It is encoded in
// paragraph-sized Encode calls. "cold" is the first pass over a freshly loaded tokenizer (empty
// word cache); "warm" is the best of the next two passes.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

bool LooksLikeProse(const std::string& s) {
  if (s.size() < 40) return false;
  size_t letters = 0, other = 0;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == ' ') {
      ++letters;
    } else if (c >= 0x80 || c == '{' || c == '}' || c == ';' || c == '<' || c == '\t') {
      ++other;
    }
  }
  return other * 50 < s.size() && letters * 10 >= s.size() * 8;
}

std::vector<std::string> BuildParagraphs(const std::string& shared, size_t target_bytes) {
  std::vector<std::string> sentences;
  auto add_from = [&](const std::string& path, auto&& extract) {
    auto text = tessera::ReadFileToString(path);
    if (!text) {
      std::fprintf(stderr, "skipping %s: %s\n", path.c_str(), text.status().message().c_str());
      return;
    }
    json j = json::parse(*text, nullptr, false);
    if (!j.is_discarded()) extract(j);
  };
  add_from(shared + "/tokenizers/reference/Qwen3-4B.encode.json", [&](const json& j) {
    for (const json& c : j) {
      if (c.contains("text") && c["text"].is_string()) {
        std::string s = c["text"].get<std::string>();
        if (LooksLikeProse(s)) sentences.push_back(s);
      }
    }
  });
  add_from(shared + "/models/stories260k/reference_greedy.json", [&](const json& j) {
    if (!j.contains("cases")) return;
    for (const json& c : j["cases"]) {
      if (c.contains("text") && c["text"].is_string()) sentences.push_back(c["text"]);
    }
  });
  std::vector<std::string> paragraphs;
  if (sentences.empty()) return paragraphs;
  size_t total = 0;
  std::string paragraph;
  for (size_t i = 0; total < target_bytes; ++i) {
    if (!paragraph.empty()) paragraph += ' ';
    paragraph += sentences[i % sentences.size()];
    if (paragraph.size() >= 600) {
      paragraph += '\n';
      total += paragraph.size();
      paragraphs.push_back(std::move(paragraph));
      paragraph.clear();
    }
  }
  return paragraphs;
}

double EncodeSeconds(const tessera::Tokenizer& tok, const std::vector<std::string>& paragraphs,
                     size_t* token_count) {
  auto start = Clock::now();
  size_t tokens = 0;
  for (const std::string& p : paragraphs) {
    auto ids = tok.Encode(p);
    if (!ids) {
      std::fprintf(stderr, "encode failed: %s\n", ids.status().message().c_str());
      std::exit(1);
    }
    tokens += ids->size();
  }
  *token_count = tokens;
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string shared = std::getenv("TESSERA_SHARED_DIR") ? std::getenv("TESSERA_SHARED_DIR")
                                                         : TESSERA_SHARED_DIR_DEFAULT;
  double mb = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--mb") {
      mb = std::atof(argv[i + 1]);
    } else if (flag == "--shared") {
      shared = argv[i + 1];
    } else {
      std::fprintf(stderr, "usage: tokenizer_bench [--mb N] [--shared DIR]\n");
      return 2;
    }
  }
  auto paragraphs = BuildParagraphs(shared, static_cast<size_t>(mb * 1e6));
  if (paragraphs.empty()) {
    std::fprintf(stderr, "no corpus text found under %s\n", shared.c_str());
    return 1;
  }
  size_t bytes = 0;
  for (const auto& p : paragraphs) bytes += p.size();
  std::printf("corpus: %.2f MB of English prose in %zu paragraphs\n", bytes / 1e6,
              paragraphs.size());

  const std::pair<const char*, std::string> tokenizers[] = {
      {"Qwen2.5", shared + "/tokenizers/Qwen2.5-1.5B-Instruct/tokenizer.json"},
      {"Llama-3", shared + "/tokenizers/Meta-Llama-3-8B/tokenizer.json"},
      {"Gemma-3", shared + "/tokenizers/gemma-3-1b-it/tokenizer.json"},
      {"stories260k", shared + "/models/stories260k/tokenizer.json"},
  };
  for (const auto& [name, path] : tokenizers) {
    auto load_start = Clock::now();
    auto tok = tessera::Tokenizer::FromFile(path);
    if (!tok) {
      std::fprintf(stderr, "%s: %s\n", name, tok.status().message().c_str());
      continue;
    }
    double load = std::chrono::duration<double>(Clock::now() - load_start).count();
    size_t tokens = 0;
    double cold = EncodeSeconds(*tok, paragraphs, &tokens);
    double warm = std::min(EncodeSeconds(*tok, paragraphs, &tokens),
                           EncodeSeconds(*tok, paragraphs, &tokens));
    std::printf("%-12s load %.2f s | cold %.1f MB/s | warm %.1f MB/s | %.2f bytes/token\n", name,
                load, bytes / 1e6 / cold, bytes / 1e6 / warm,
                static_cast<double>(bytes) / static_cast<double>(tokens));
  }
  return 0;
}
