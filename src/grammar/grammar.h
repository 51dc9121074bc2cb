// Structured outputs: OpenAI `response_format` enforced by constrained decoding. A Grammar is
// compiled once per request from the response_format; a GrammarMatcher follows one sequence
// and, before each decode step, fills a bitmask of the token ids that keep the output a prefix
// of a JSON document the schema accepts (the engine sets the logits of the others to -inf).
//
//   TS_ASSIGN_OR_RETURN(auto vocab, TokenVocabulary::Create(token_bytes, special_ids, eos_ids));
//   TS_ASSIGN_OR_RETURN(auto grammar, CompileResponseFormat(request["response_format"]));
//   GrammarMatcher matcher(grammar, vocab);
//   std::vector<uint64_t> mask(vocab->mask_words());
//   while (...) {
//     matcher.FillMask(mask);                 // bit i of mask[i / 64]: token i is allowed
//     int32_t token = Sample(logits, mask);
//     TS_RETURN_IF_ERROR(matcher.Accept(token));
//     if (matcher.IsTerminated()) break;     // an end-of-sequence token was accepted
//   }
//
// Output rules (docs/structured_outputs.md): compact JSON with at most one space after ':'
// and ','; object keys in schema order, only declared properties; strings escape with the
// standard JSON escapes (\uXXXX except surrogates); every reachable state has a completion.
#pragma once
#include <array>
#include <bitset>

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

struct Grammar;  // immutable once compiled; shared between matchers

// anyOf alternatives a matcher follows at once (a call that may be any of N functions is N
// alternatives until its name tells them apart); further ones are dropped, so callers refuse
// more.
inline constexpr size_t kMaxGrammarAlternatives = 64;

// {"type":"json_object"} or {"type":"json_schema","json_schema":{"name":...,"schema":{...},
// "strict":bool}}. Unsupported keywords and malformed schemas are InvalidArgument or
// Unsupported errors whose message names the keyword and its JSON pointer.
Expected<std::shared_ptr<const Grammar>> CompileResponseFormat(
    const nlohmann::ordered_json& format);
Expected<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::ordered_json& schema);
// Any JSON object.
std::shared_ptr<const Grammar> JsonObjectGrammar();

// A tool call in the XML form of Qwen3.5 (chat/tool_calls.h, kQwen3Xml), from an OpenAI
// `tools` array: with `name_opening`, each function's text starts with name_opening + NAME +
// ">\n" (one of the functions, or `only`); without, `only` names the one function and its
// text starts at its first parameter. Then its parameters in schema order, required ones
// always, each <parameter=KEY>\nVALUE\n</parameter>\n, and "</function>". A parameter declared
// a string ("type": "string", or an enum or const of strings) or a nullable string is its raw
// text on one line (never holding "</parameter>"); any other is compact JSON that is not a
// string. Refused (InvalidArgument): a parameter that may be a string but is not declared one
// alone, names holding '>' or a newline, parameters that are not one object schema. With
// `relax_non_strict` (tool_choice auto, where only strict functions promise their schemas), a
// function without "strict": true whose schema is refused takes its declared parameters, each
// optional, as raw text on one line instead (the reply parser still reads them as declared).
Expected<std::shared_ptr<const Grammar>> CompileXmlToolCalls(
    const nlohmann::ordered_json& tools, std::string_view only,
    std::optional<std::string_view> name_opening, bool relax_non_strict = false);

// Whether an OpenAI tool ({"type": "function", "function": {...}}) declares "strict": true, the
// one promise that its arguments follow its schema.
bool IsStrictTool(const nlohmann::ordered_json& tool);

// The decoded bytes of every token of one model, with per-token classes and tries precomputed.
// Build once per model and share.
class TokenVocabulary {
 public:
  // token_bytes[id]: the raw bytes the token adds to the text (byte-level tokens decoded to
  // bytes, not to sanitized UTF-8). Special ids are never allowed, except the eos ids, which
  // are allowed exactly when the document is complete. Empty tokens are never allowed.
  static Expected<std::shared_ptr<const TokenVocabulary>> Create(
      std::vector<std::string> token_bytes, std::span<const int32_t> special_ids,
      std::span<const int32_t> eos_ids);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  size_t mask_words() const { return (bytes_.size() + 63) / 64; }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  bool is_eos(int32_t id) const;
  // Sets, in `mask` (mask_words() words), the bits of the ordinary tokens whose first byte
  // other than space, tab, CR or LF is not `opener` (a token of whitespace alone is left out),
  // and of the eos ids: the tokens that begin a reply that does not open with `opener` (e.g.
  // text rather than a tool call written as a bare JSON object).
  void MarkTextOpeners(char opener, std::span<uint64_t> mask) const;

  struct Trie {
    struct Edge {
      uint8_t byte;
      uint32_t child;
    };
    struct TrieNode {
      uint32_t edge_begin = 0, edge_end = 0;    // into edges
      uint32_t token_begin = 0, token_end = 0;  // into tokens: ids ending at this node
    };
    std::vector<TrieNode> nodes;  // nodes[0] is the root (the empty prefix)
    std::vector<Edge> edges;
    std::vector<int32_t> tokens;
  };

 private:
  friend class GrammarMatcher;
  TokenVocabulary() = default;
  enum TokenKind : uint8_t { kOrdinary, kNever, kEos };
  std::vector<std::string> bytes_;
  std::vector<uint8_t> kind_;  // TokenKind per id
  std::vector<int32_t> eos_ids_;
  size_t max_token_bytes_ = 0;
  Trie all_;  // every ordinary token
  // Tokens that stay inside a free string's content whatever came before them, so they are
  // allowed there by their character count alone, without a trie walk; the other ordinary
  // tokens are walked.
  struct PlainSet {
    std::vector<uint64_t> mask;
    std::vector<int32_t> by_chars;  // fewest characters first
    std::vector<uint32_t> chars;    // parallel to by_chars
    uint32_t max_chars = 0;
    Trie others;  // the ordinary tokens not in the set
    // The set's tokens by first byte: ids by_first_byte[first[c], first[c + 1]) begin with c.
    std::vector<int32_t> by_first_byte;
    std::array<uint32_t, 257> first{};
  };
  // JSON strings: complete UTF-8, no quote, backslash or control byte.
  PlainSet plain_;
  // The strings of XML calls (Node::xml_guard; used when no partial forbidden text is
  // pending), whose shortcut tokens hold no '<': JSON strings' (plain_ without '<') and raw
  // strings' (complete UTF-8, no control byte but tab).
  PlainSet json_guarded_, raw_;
};

// Follows one sequence. Copy it to fork a sequence (n > 1): a copy is a few small vectors.
class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                 std::shared_ptr<const TokenVocabulary> vocabulary);

  // Advances by one token; InvalidArgument (state unchanged) when the token is not allowed.
  Status Accept(int32_t token);
  // Advances by raw bytes (tests, forced prefixes); InvalidArgument when not allowed.
  Status AcceptBytes(std::string_view bytes);
  // mask.size() must be vocabulary->mask_words(); bit i set = token i allowed.
  void FillMask(std::span<uint64_t> mask);
  // The text so far is a whole document the schema accepts (eos ids are allowed).
  bool IsComplete() const;
  // Some byte may still extend the text.
  bool CanContinue() const;
  // An eos token was accepted; nothing more is allowed.
  bool IsTerminated() const { return terminated_; }

  // A set of parse stacks (more than one while anyOf alternatives are still open), stored flat.
  struct Frame {
    uint32_t node = 0;
    uint8_t phase = 0;
    uint8_t flags = 0;
    uint8_t aux = 0;   // UTF-8 continuation bytes / hex digits still expected
    uint8_t aux2 = 0;  // lowest allowed next UTF-8 byte, or hex digit state
    uint32_t a = 0;    // property position / item count / characters / literal range start
    uint32_t b = 0;    // property being matched / literal range end / DFA state
    uint32_t c = 0;    // bytes of the key or literal matched / digit counts
    uint64_t value = 0;
    bool operator==(const Frame&) const = default;
  };
  struct StackSet {
    std::vector<Frame> frames;
    std::vector<uint32_t> ends;  // stack i is frames[ends[i-1] .. ends[i])
    void Clear() { frames.clear(), ends.clear(); }
    bool Empty() const { return ends.empty(); }
  };

 private:
  bool Advance(const StackSet& in, int byte, StackSet* out) const;
  void StepStack(std::vector<Frame>& stack, int byte, StackSet* out, int forks) const;
  void AddStack(const std::vector<Frame>& stack, StackSet* out) const;
  void Walk(const TokenVocabulary::Trie& trie, uint32_t node, size_t depth,
            std::span<uint64_t> mask);
  // Every stack is inside a free string's content (no pattern), all of one kind (JSON, JSON in
  // an XML call, raw): the token set of that kind, in *remaining_chars how many characters the
  // string may still take, and in *pending the bytes that would continue a partial forbidden
  // text of an XML call (the set's tokens beginning with one of them are walked).
  const TokenVocabulary::PlainSet* InFreeStringContent(uint32_t* remaining_chars,
                                                       std::bitset<256>* pending) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  StackSet state_;
  bool terminated_ = false;
  // Scratch for FillMask's trie walk: one stack set per depth, reused across calls.
  std::vector<StackSet> walk_sets_;
  mutable std::vector<Frame> scratch_;
};

}  // namespace tessera
