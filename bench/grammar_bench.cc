// grammar_bench: cost of the structured-outputs token mask (GrammarMatcher::FillMask) per
// decode step over the real Qwen2.5 vocabulary (151,665 tokens), for a few schemas.
//
//   build/bench/grammar_bench [--shared DIR] [--walks 20] [--steps 200] [--seed 1] [--slow MS]
//
// Each walk starts a matcher and repeatedly fills the mask (timed in thread CPU time) and accepts a
// uniformly random allowed token (not timed), for up to --steps steps or until an eos is picked.
// Uniform picks inside a free string rarely close it, so walks spend most steps in long free-text
// values, the case the plain-text fast path is for (not XML tool calls' raw strings, which
// are walked).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/tokenizer_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// CPU time of this thread: on a shared machine, wall time would also count the slices other
// processes take from us.
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

struct Schema {
  const char* name;
  const char* response_format;  // or, with xml_tools, an OpenAI tools array
  bool xml_tools = false;       // a forced Qwen3.5 XML tool call (CompileXmlToolCalls)
};

const Schema kSchemas[] = {
    {"json_object", R"({"type":"json_object"})"},
    {"extraction", R"({"type":"json_schema","json_schema":{"name":"person","strict":true,
      "schema":{"type":"object","properties":{"name":{"type":"string"},
      "age":{"type":"integer","minimum":0,"maximum":150},
      "email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,3}$"},
      "role":{"enum":["admin","user","guest"]},"score":{"type":"number"},
      "tags":{"type":"array","items":{"type":"string","maxLength":20},"maxItems":5},
      "address":{"type":["object","null"],"properties":{"street":{"type":"string"},
      "city":{"type":"string"}},"required":["street","city"],"additionalProperties":false}},
      "required":["name","age","role","tags","address"],"additionalProperties":false}}})"},
    {"long_text", R"({"type":"json_schema","json_schema":{"name":"answer","schema":
      {"type":"object","properties":{"answer":{"type":"string"},
      "confidence":{"type":"number","minimum":0,"maximum":1}},
      "required":["answer","confidence"],"additionalProperties":false}}})"},
    {"recursive_anyof", R"({"type":"json_schema","json_schema":{"name":"tree","schema":
      {"$ref":"#/$defs/node","$defs":{"node":{"type":"object","properties":{
      "value":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":8},{"type":"null"}]},
      "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":3}},
      "required":["value"],"additionalProperties":false}}}}})"},
    {"xml_tool_call", R"([{"type":"function","function":{"name":"write_note","parameters":
      {"type":"object","properties":{"title":{"type":"string","maxLength":40},
      "body":{"type":"string"},"priority":{"type":"integer","minimum":1,"maximum":5},
      "tags":{"type":"array","items":{"type":"string"},"maxItems":4}},
      "required":["title","body","priority"]}}}])",
     true},
};

}  // namespace

int main(int argc, char** argv) {
  std::string shared = TESSERA_SHARED_DIR_DEFAULT;
  if (const char* env = std::getenv("TESSERA_SHARED_DIR")) shared = env;
  int walks = 20, max_steps = 200;
  double slow_ms = 0;  // --slow MS: print the text before every step slower than MS
  unsigned seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--shared") {
      shared = value;
    } else if (flag == "--walks") {
      walks = std::atoi(value);
    } else if (flag == "--steps") {
      max_steps = std::atoi(value);
    } else if (flag == "--seed") {
      seed = static_cast<unsigned>(std::atoi(value));
    } else if (flag == "--slow") {
      slow_ms = std::atof(value);
    }
  }
  const std::string path = shared + "/tokenizers/Qwen2.5-1.5B-Instruct/tokenizer.json";
  auto tokenizer = tessera::Tokenizer::FromFile(path);
  if (!tokenizer) {
    std::fprintf(stderr, "grammar_bench: %s\n", tokenizer.status().message().c_str());
    return 1;
  }
  std::vector<int32_t> eos;
  for (const char* name : {"<|im_end|>", "<|endoftext|>"}) {
    if (auto id = tokenizer->TokenToId(name)) eos.push_back(*id);
  }
  Clock::time_point t0 = Clock::now();
  auto vocab = tessera::VocabularyFromTokenizer(*tokenizer, eos);
  if (!vocab) {
    std::fprintf(stderr, "grammar_bench: %s\n", vocab.status().message().c_str());
    return 1;
  }
  std::printf("vocabulary: %d tokens, built in %.0f ms\n", (*vocab)->size(), Ms(Clock::now() - t0));
  std::printf("%-16s %8s %8s %9s %9s %9s\n", "schema", "walks", "steps", "mean_ms", "p99_ms",
              "max_ms");
  std::mt19937 rng(seed);
  std::vector<uint64_t> mask((*vocab)->mask_words());
  std::vector<int32_t> allowed;
  for (const Schema& s : kSchemas) {
    t0 = Clock::now();
    auto grammar =
        s.xml_tools ? tessera::CompileXmlToolCalls(nlohmann::ordered_json::parse(s.response_format),
                                                   "write_note", std::nullopt)
                    : tessera::CompileResponseFormat(json::parse(s.response_format));
    if (!grammar) {
      std::fprintf(stderr, "grammar_bench: %s: %s\n", s.name, grammar.status().message().c_str());
      return 1;
    }
    double compile_ms = Ms(Clock::now() - t0);
    std::vector<double> times;
    for (int w = 0; w < walks; ++w) {
      tessera::GrammarMatcher matcher(*grammar, *vocab);
      std::string text;
      for (int step = 0; step < max_steps && !matcher.IsTerminated(); ++step) {
        const double start = ThreadCpuMs();
        matcher.FillMask(mask);
        times.push_back(ThreadCpuMs() - start);
        if (slow_ms > 0 && times.back() > slow_ms) {
          std::printf("  %.2f ms after: %s\n", times.back(), text.c_str());
        }
        allowed.clear();
        for (size_t i = 0; i < mask.size(); ++i) {
          for (uint64_t word = mask[i]; word != 0; word &= word - 1) {
            allowed.push_back(static_cast<int32_t>(i * 64 + __builtin_ctzll(word)));
          }
        }
        if (allowed.empty()) {
          std::fprintf(stderr, "grammar_bench: %s: empty mask (dead end)\n", s.name);
          return 1;
        }
        int32_t token = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        text += (*vocab)->bytes(token);
        if (auto st = matcher.Accept(token); !st.ok()) {
          std::fprintf(stderr, "grammar_bench: %s: %s\n", s.name, st.message().c_str());
          return 1;
        }
      }
    }
    std::vector<double> sorted = times;
    std::sort(sorted.begin(), sorted.end());
    double mean = 0;
    for (double t : times) mean += t;
    mean /= static_cast<double>(times.size());
    std::printf("%-16s %8d %8zu %9.3f %9.3f %9.3f   (compile %.2f ms)\n", s.name, walks,
                times.size(), mean, sorted[sorted.size() * 99 / 100], sorted.back(), compile_ms);
  }
  return 0;
}
