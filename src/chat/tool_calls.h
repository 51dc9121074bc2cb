// Tool calls on the model side of a chat: a streaming parser that turns the model's reply, in the
// markup its chat template teaches (ToolCallSyntax, chosen once per model in
// chat/tool_call_syntax.h), back into content and OpenAI-shaped tool-call events, and the
// forced-call text an engine prefills for tool_choice "required" or a named function.
//
//   ToolCallSyntax syntax = model.tool_call_syntax().syntax;          // kHermes for Qwen2.5/3
//   ToolCallParserOptions opts;
//   opts.seed = request_seed;                                          // ids call_<24 chars>
//   ToolCallParser parser(syntax, opts);
//   for (const std::string& piece : detokenized_pieces) {
//     for (const ToolCallEvent& e : parser.Feed(piece)) {
//       if (e.kind == ToolCallEvent::Kind::kContent) SendContentDelta(e.content);
//       else SendToolCallDelta(e.call);                                  // delta.tool_calls[0]
//     }
//   }
//   ToolCallEvents tail = parser.Finish();                              // flushes held bytes
//   const std::vector<ToolCall>& calls = parser.calls();                // final list
//
//   // Or on a whole reply:
//   ParsedReply r = ParseToolCalls(ToolCallSyntax::kHermes, text);      // r.content, r.calls
//
//   // tool_choice {"type":"function","function":{"name":"get_weather"}}:
//   auto forced = ForcedToolCallText(ToolCallSyntax::kHermes, "get_weather");
//   // prefill forced->prefix = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ",
//   // generate one JSON object under the parameters' schema, then append forced->suffix
//   // = "}\n</tool_call>".
//
// Syntaxes (what the model writes; text before, between and after calls is content):
//   kHermes     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, any number of them
//               (Qwen2.5, Qwen3, MiniCPM-V 4.5, Hermes). "parameters" is accepted for
//               "arguments".
//   kLlama3Json a JSON object {"name": "f", "parameters": {...}} (or "arguments") at the start
//               of the reply, or after <|python_tag|> anywhere; several joined by ';'.
//   kGemmaJson  Gemma has no tool tokens. Accepted: the kLlama3Json bare object at the start of
//               the reply, and a fenced block ```tool_call\n{...}\n``` or ```json\n{...}\n```
//               anywhere whose object has a string "name" and an object "arguments" or
//               "parameters". Python-call blocks (```tool_code\nf(x=1)\n```) are not parsed:
//               they stay content.
//   kQwen3Xml   <tool_call>\n<function=f>\n<parameter=x>\nvalue\n</parameter>\n</function>\n
//               </tool_call> (Qwen3.5, Qwen3-Coder). A parameter's text is read as the type
//               its function declares for it (ToolCallParserOptions::xml_parameter_types: a
//               string parameter stays a string even when it reads "42" or "true"); an
//               undeclared one that parses as JSON other than a string (number, true,
//               object, ...) becomes that value, any other text a JSON string.
//   kNone       no parsing: everything is content.
//
// Event timing: content is released as soon as it cannot be the start of markup (at most the
// length of the longest marker is held back). A tool call is emitted when its closing markup
// has been read and its JSON validated, as two deltas: {index, id, name, arguments: ""} and
// then {index, arguments: <the whole arguments JSON>}. So a client never sees a call that
// later turns out malformed, and any split of the same text yields the same tool-call events
// (content may be split differently). A bare JSON call (kLlama3Json, kGemmaJson) has no closing
// marker: it is emitted when the next non-space byte (';' or content) or the end arrives.
// Malformed markup (unterminated, invalid JSON, no "name", a call over max_call_bytes, JSON
// nested deeper than max_json_depth) is content: the markup up to the point where it went
// wrong (the whole object when its JSON is invalid, everything held when it is unterminated or
// too long) is released as content and scanning resumes after it, so each byte is scanned a
// bounded number of times and memory stays under max_call_bytes plus one fed piece.
// Whitespace between and after calls is dropped; whitespace before a bare JSON call at the
// start of the reply too.
//
// `arguments` of a finished call is compact JSON (nlohmann dump, key order kept, invalid UTF-8
// replaced); an "arguments" value that is a string holding a JSON object (double-encoded) is
// decoded first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "chat/tool_call_syntax.h"

namespace tessera {

struct ToolCall {
  std::string id;  // "call_" + 24 characters [A-Za-z0-9]
  std::string name;
  std::string arguments;  // compact JSON object text
};

// One entry of OpenAI's delta.tool_calls.
struct ToolCallDelta {
  size_t index = 0;       // position of the call in the reply
  std::string id;         // set on the first delta of a call only
  std::string name;       // set on the first delta of a call only
  std::string arguments;  // a fragment of the arguments JSON
  friend bool operator==(const ToolCallDelta&, const ToolCallDelta&) = default;
};

// What one Feed or Finish released, in reply order: content text or one tool-call delta.
struct ToolCallEvent {
  enum class Kind { kContent, kToolCall };
  Kind kind = Kind::kContent;
  std::string content;  // kContent
  ToolCallDelta call;   // kToolCall
  friend bool operator==(const ToolCallEvent&, const ToolCallEvent&) = default;
};
using ToolCallEvents = std::vector<ToolCallEvent>;

// The JSON types a function declares for its parameters, as bits of JsonTypeBit (0: not
// declared): how a kQwen3Xml parameter's text is read. Per function name, per parameter name.
enum JsonTypeBit : uint8_t {
  kJsonString = 1,
  kJsonInteger = 2,
  kJsonNumber = 4,
  kJsonBoolean = 8,
  kJsonNull = 16,
  kJsonObject = 32,
  kJsonArray = 64,
};
using ToolParameterTypes = std::map<std::string, std::map<std::string, uint8_t>, std::less<>>;
// From an OpenAI `tools` array (JSON text): each function's parameters' "type" (a name or a
// list), else the types of its "enum"/"const" values or of its "anyOf"/"oneOf" branches.
// Malformed input gives what could be read (the request was validated before).
ToolParameterTypes ParameterTypesOfTools(std::string_view tools_json);
// The same from the array already parsed.
ToolParameterTypes ParameterTypesOfToolArray(const nlohmann::ordered_json& tools);

struct ToolCallParserOptions {
  uint64_t seed = 0;  // ids are a function of (seed, call index)
  // kQwen3Xml: a parameter's text becomes a value of its declared type when it reads as one
  // (integer, number, boolean as true/True/false/False, null as null/None, object, array;
  // tried in that order), else a string when strings are allowed. Undeclared: JSON when it
  // parses as a non-string, else a string.
  ToolParameterTypes xml_parameter_types;
  std::string id_prefix = "call_";
  size_t max_call_bytes = 1u << 20;  // a call's markup longer than this is content
  size_t max_json_depth = 64;        // deeper JSON in a call is malformed (content)
};

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallSyntax syntax, ToolCallParserOptions options = {});

  // Feeds the next piece of the reply (any split, even inside a UTF-8 sequence).
  ToolCallEvents Feed(std::string_view text);
  // The reply is complete: releases held bytes; unfinished markup becomes content.
  ToolCallEvents Finish();

  const std::vector<ToolCall>& calls() const { return calls_; }
  ToolCallSyntax syntax() const { return syntax_; }

 private:
  enum class State { kText, kBody };
  enum class BodyKind { kClosed, kBare, kXml };
  enum class Phase { kLeadingSpace, kObject, kAfterObject };

  void Process(bool at_end, ToolCallEvents* out);
  // Each returns false when it needs more input.
  bool StepText(bool at_end, ToolCallEvents* out);
  bool StepBody(bool at_end, ToolCallEvents* out);
  bool StepXmlBody(bool at_end, ToolCallEvents* out);
  BodyKind kind_for_marker(const std::string& marker) const;
  void StartBody(BodyKind kind, size_t scan_from, std::string_view close);
  // The markup up to `upto` (at least one byte) is content; scanning resumes after it.
  void Malformed(size_t upto, ToolCallEvents* out);
  void EmitCall(std::string name, std::string arguments, ToolCallEvents* out);
  void Release(size_t n, ToolCallEvents* out);
  std::string MakeId(size_t index) const;

  ToolCallSyntax syntax_;
  ToolCallParserOptions options_;
  std::vector<std::string> open_markers_;
  std::string buf_;  // unreleased bytes; in kBody it starts at the call's markup
  State state_ = State::kText;
  bool at_start_ = true;     // nothing but whitespace released or parsed so far
  bool after_call_ = false;  // whitespace after a call is dropped before markup or the end
  bool bare_allowed_ = false;
  // kBody
  BodyKind kind_ = BodyKind::kClosed;
  std::string close_;  // closing marker (kClosed, kXml)
  Phase phase_ = Phase::kLeadingSpace;
  size_t scan_ = 0;  // next byte of buf_ to scan
  size_t obj_begin_ = 0;
  size_t obj_end_ = 0;
  size_t depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  std::string pending_name_;  // a validated object waiting for its closing markup
  std::string pending_arguments_;
  std::vector<ToolCall> calls_;
};

struct ParsedReply {
  std::string content;
  std::vector<ToolCall> calls;
};

// Feed(text) + Finish() in one step.
ParsedReply ParseToolCalls(ToolCallSyntax syntax, std::string_view text,
                           const ToolCallParserOptions& options = {});

// What the engine prefills to force a call. With a function name: `prefix` ends where the
// arguments object begins (the grammar then produces one JSON object) and `after_name` is
// empty. Without one (tool_choice "required"): `prefix` ends inside the name's JSON string; the
// grammar produces a name, then `after_name` (e.g. "\", \"arguments\": "), then the object.
// `suffix` closes the call. kQwen3Xml arguments are not JSON: prefix and suffix frame the
// <parameter=...> blocks instead. kNone: Unsupported. The name is escaped as a JSON string.
struct ForcedToolCall {
  std::string prefix;
  std::string after_name;
  std::string suffix;
};
Expected<ForcedToolCall> ForcedToolCallText(ToolCallSyntax syntax,
                                            std::string_view function_name = {});

}  // namespace tessera
