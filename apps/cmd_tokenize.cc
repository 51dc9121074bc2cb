// `tessera tokenize` and `tessera detokenize`: JSON Lines in, JSON Lines out.
//
//   echo '"Hello world"' | tessera tokenize --model models/qwen      ->  [9707,1879]
//   echo '[9707,1879]'   | tessera detokenize --model models/qwen    ->  "Hello world"
//   echo '"Hello world"' | tessera tokenize --model qwen2.5-0.5b-q8_0.gguf  (the file's own
//                          tokenizer, rebuilt from its tokenizer.ggml.* keys as `serve` does)
//
// Blank lines (only spaces/tabs/CR) are skipped and produce no output line. The first bad line
// stops the run with a one-line error naming it on stderr and exit code 1.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_args.h"
#include "commands.h"
#include "format/gguf.h"
#include "format/json_util.h"
#include "runtime/gguf_loading.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

using nlohmann::json;

bool IsBlank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

int LineError(const char* command, size_t line_number, const std::string& message) {
  std::fprintf(stderr, "tessera %s: line %zu: %s\n", command, line_number, message.c_str());
  return 1;
}

// A folder holding tokenizer.json, or a GGUF file (its tokenizer.ggml.* metadata).
Expected<Tokenizer> LoadTokenizer(const std::string& model) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model, ec)) {
    return Tokenizer::FromFile(model + "/tokenizer.json");
  }
  TS_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(model));
  TS_ASSIGN_OR_RETURN(GgufTokenizerData data, ReadGgufTokenizerData(file));
  auto tokenizer = TokenizerFromGguf(data);
  if (!tokenizer) return tokenizer.status().WithContext(model);
  return tokenizer;
}

}  // namespace

int RunTokenizeCommand(int argc, char** argv) {
  CliArgs args("tokenize");
  args.AddString("model", "folder holding tokenizer.json, or a GGUF file", /*required=*/true);
  args.AddFlag("add-special", "apply the post-processor (e.g. prepend <bos>)");
  args.AddFlag("split-special", "encode special-token strings as ordinary text");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("tokenize", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    std::printf(
        "Reads one JSON string per line on stdin; writes one JSON array of ids per line.\n");
    return 0;
  }
  auto tokenizer = LoadTokenizer(args.GetString("model"));
  if (!tokenizer) return ReportError("tokenize", tokenizer.status());
  EncodeOptions options;
  options.add_special_tokens = args.GetFlag("add-special");
  options.split_special_tokens = args.GetFlag("split-special");

  std::string line;
  size_t line_number = 0;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (IsBlank(line)) continue;
    if (NestsDeeperThan(line, kMaxCliJsonDepth)) {
      return LineError(
          "tokenize", line_number,
          "the line nests deeper than " + std::to_string(kMaxCliJsonDepth) + " levels");
    }
    json value = json::parse(line, nullptr, false);
    if (value.is_discarded() || !value.is_string()) {
      return LineError("tokenize", line_number,
                       "expected a JSON string such as \"Hello\" (valid JSON, UTF-8)");
    }
    auto ids = tokenizer->Encode(value.get_ref<const std::string&>(), options);
    if (!ids) return LineError("tokenize", line_number, ids.status().message());
    std::string out = "[";
    for (size_t i = 0; i < ids->size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string((*ids)[i]);
    }
    out += "]\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

int RunDetokenizeCommand(int argc, char** argv) {
  CliArgs args("detokenize");
  args.AddString("model", "folder holding tokenizer.json, or a GGUF file", /*required=*/true);
  args.AddFlag("skip-special", "drop special tokens (e.g. <|im_end|>) from the text");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("detokenize", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    std::printf(
        "Reads one JSON array of ids per line on stdin; writes one JSON string per line.\n");
    return 0;
  }
  auto tokenizer = LoadTokenizer(args.GetString("model"));
  if (!tokenizer) return ReportError("detokenize", tokenizer.status());
  bool skip_special = args.GetFlag("skip-special");

  std::string line;
  size_t line_number = 0;
  std::vector<int32_t> ids;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (IsBlank(line)) continue;
    // An element is echoed with dump(), which recurses: nesting is bounded first.
    if (NestsDeeperThan(line, kMaxCliJsonDepth)) {
      return LineError(
          "detokenize", line_number,
          "the line nests deeper than " + std::to_string(kMaxCliJsonDepth) + " levels");
    }
    json value = json::parse(line, nullptr, false);
    if (value.is_discarded() || !value.is_array()) {
      return LineError("detokenize", line_number, "expected a JSON array of token ids like [1,2]");
    }
    ids.clear();
    for (size_t i = 0; i < value.size(); ++i) {
      const json& v = value[i];
      bool ok = v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX;
      if (v.is_number_unsigned()) ok = v.get<uint64_t>() <= INT32_MAX;
      if (!ok) {
        return LineError("detokenize", line_number,
                         "element " + std::to_string(i) + " is " + v.dump() +
                             ", expected a token id (integer 0.." +
                             std::to_string(tokenizer->vocab_size() - 1) + ")");
      }
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    auto text = tokenizer->Decode(ids, skip_special);
    if (!text) return LineError("detokenize", line_number, text.status().message());
    // Decoded text is valid UTF-8 (invalid byte tokens become U+FFFD); replace is a backstop.
    std::string out = json(*text).dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace tessera
