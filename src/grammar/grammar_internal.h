// Internals shared by the schema compiler, the pattern compiler and the matcher. Not part of
// the public API (see grammar.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar_internal {

// Documents nest at most this many frames (the root frame plus one per open value); recursive
// $refs are cut here. A value is started only when its shallowest completion still fits, so
// the cut never leaves a dead end.
inline constexpr uint32_t kMaxFrames = 40;
inline constexpr uint32_t kUnsatisfiable = 0xffffffffu;
// Integers (and the integer part of numbers) have at most this many digits, so a model cannot
// emit digits forever and every value fits an int64.
inline constexpr int kMaxIntDigits = 18;
inline constexpr int kMaxFractionDigits = 15;
inline constexpr int kMaxExponentDigits = 2;
// The XML form of tool calls (Node::xml).
inline constexpr std::string_view kXmlValueEnd = "\n</parameter>\n";
inline constexpr std::string_view kXmlClose = "</function>";
// Texts no string of an XML call may hold: the reply parser would end the parameter or the
// call there. Neither has '<' anywhere but at its start, which keeps their matching simple.
inline constexpr std::string_view kXmlForbidden[2] = {"</parameter>", "</tool_call>"};
inline constexpr size_t kMaxStacks = kMaxGrammarAlternatives;

// A DFA over the printable ASCII characters a pattern string may contain.
struct PatternDfa {
  static constexpr int kColumns = 128;
  std::vector<int32_t> next;             // [state * kColumns + byte], -1 = no transition
  std::vector<uint8_t> accepting;        // per state
  std::vector<uint32_t> dist_to_accept;  // characters still needed, per state
};

enum class NodeKind : uint8_t {
  kRoot,
  kObject,
  kArray,
  kString,
  kInteger,
  kNumber,
  kLiterals,
  kUnion
};

struct Property {
  std::string key_json;  // the key as it is written, quotes included
  uint32_t node = 0;
  bool required = false;
};

struct Node {
  NodeKind kind = NodeKind::kUnion;
  // kObject: declared properties in schema order, or (when `props` is empty) free string keys
  // whose values follow `free_value` (-1: no keys at all).
  std::vector<Property> props;
  int32_t free_value = -1;
  // kObject in the XML form of tool calls (xml_tool_calls.cc): `xml_prefix`, then properties
  // written <parameter=KEY>\nVALUE\n</parameter>\n (key_json holds "<parameter=KEY>\n"), then
  // "</function>". No free keys.
  bool xml = false;
  std::string xml_prefix;
  // kArray
  int32_t item = -1;  // -1: no items possible
  uint32_t min_items = 0, max_items = UINT32_MAX;
  // kString
  uint32_t min_len = 0, max_len = UINT32_MAX;
  int32_t pattern = -1;  // index into Grammar::patterns
  // An XML parameter's string: its characters as they are (no quotes, no escapes), on one line
  // (tab allowed, no other control character); it ends before the newline that closes the
  // parameter.
  bool raw = false;
  // A string of an XML call (raw or JSON): its bytes never hold kXmlForbidden (progress kept
  // in Frame::value, a byte per text).
  bool xml_guard = false;
  // kInteger / kNumber: the integers a value (or a number's integer part) may take, and for
  // numbers the real bounds that decide whether a fraction may follow.
  int64_t int_lo = 0, int_hi = 0;
  bool bounded = false;  // numbers: any of minimum/maximum given (then no exponent)
  double lo = 0, hi = 0;
  bool lo_exclusive = false, hi_exclusive = false, has_lo = false, has_hi = false;
  // kLiterals: serialized JSON values, sorted bytewise, distinct.
  std::vector<std::string> literals;
  // kUnion: the alternatives, flattened (never a union) after compilation.
  std::vector<uint32_t> branches;
  // Fewest frames a completion of this value needs (kUnsatisfiable: none exists).
  uint32_t min_frames = kUnsatisfiable;
};

// The value the JSON pointer `pointer` names within `root` (RFC 6901: "" is the root, "/a/0"
// its member "a"'s first item, "~0" and "~1" escape '~' and '/'); nullptr when there is none
// or `pointer` is not a pointer. Shared by $ref resolution and the XML tool-call relaxation.
const nlohmann::ordered_json* ResolvePointer(const nlohmann::ordered_json& root,
                                             std::string_view pointer);

}  // namespace tessera::grammar_internal

namespace tessera {

struct Grammar {
  std::vector<grammar_internal::Node> nodes;
  std::vector<grammar_internal::PatternDfa> patterns;
  uint32_t root = 0;        // the kRoot node
  uint32_t key_string = 0;  // a free string node, for free object keys
};

}  // namespace tessera
