#include "chat/tool_calls.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "format/json_util.h"
#include "format/ordered_json.h"

namespace tessera {

namespace {

using nlohmann::ordered_json;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

std::string CompactJson(const ordered_json& j) {
  return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// A JSON value of at most max_depth, or a discarded value.
ordered_json ParseBounded(std::string_view text, size_t max_depth) {
  // dump() recurses, so nesting is bounded as the text is parsed.
  auto parsed = ParseOrderedJson(text, JsonParseLimits{.max_depth = max_depth});
  if (!parsed) return ordered_json(ordered_json::value_t::discarded);
  return std::move(*parsed);
}

// {"name": "f", "arguments"|"parameters": {...} or "<json object>"} → name and compact
// arguments. A missing arguments member means no arguments.
bool ExtractJsonCall(std::string_view object_text, size_t max_depth, std::string* name,
                     std::string* arguments) {
  ordered_json j = ParseBounded(object_text, max_depth);
  if (j.is_discarded() || !j.is_object()) return false;
  auto n = j.find("name");
  if (n == j.end() || !n->is_string() || n->get_ref<const std::string&>().empty()) return false;
  auto a = j.find("arguments");
  if (a == j.end()) a = j.find("parameters");
  ordered_json args = ordered_json::object();
  if (a != j.end()) {
    if (a->is_string()) {
      args = ParseBounded(a->get_ref<const std::string&>(), max_depth);
    } else {
      args = *a;
    }
    if (args.is_discarded() || !args.is_object()) return false;
  }
  *name = n->get<std::string>();
  *arguments = CompactJson(args);
  return true;
}

// `*s` begins with `open` ("<function=") and a one-line, non-empty name up to '>': the name,
// and *s moves past the '>'.
bool TakeTag(std::string_view open, std::string_view* s, std::string_view* name) {
  if (!s->starts_with(open)) return false;
  size_t gt = s->find('>', open.size());
  if (gt == open.size() || gt == std::string_view::npos) return false;
  *name = s->substr(open.size(), gt - open.size());
  if (name->find('\n') != std::string_view::npos) return false;
  s->remove_prefix(gt + 1);
  return true;
}

uint8_t TypeBitOfName(const ordered_json& name) {
  if (!name.is_string()) return 0;
  const std::string& n = name.get_ref<const std::string&>();
  if (n == "string") return kJsonString;
  if (n == "integer") return kJsonInteger;
  if (n == "number") return kJsonNumber;
  if (n == "boolean") return kJsonBoolean;
  if (n == "null") return kJsonNull;
  if (n == "object") return kJsonObject;
  if (n == "array") return kJsonArray;
  return 0;
}

uint8_t TypeBitOfValue(const ordered_json& v) {
  if (v.is_string()) return kJsonString;
  if (v.is_number_integer()) return kJsonInteger;
  if (v.is_number()) return kJsonNumber;
  if (v.is_boolean()) return kJsonBoolean;
  if (v.is_null()) return kJsonNull;
  if (v.is_object()) return kJsonObject;
  if (v.is_array()) return kJsonArray;
  return 0;
}

// The types a parameter schema declares (bits), looking `depth` levels into anyOf/oneOf.
uint8_t DeclaredTypes(const ordered_json& schema, int depth) {
  if (!schema.is_object()) return 0;
  uint8_t bits = 0;
  if (auto t = schema.find("type"); t != schema.end()) {
    if (t->is_array()) {
      for (const ordered_json& n : *t) bits |= TypeBitOfName(n);
    } else {
      bits |= TypeBitOfName(*t);
    }
    return bits;
  }
  if (auto c = schema.find("const"); c != schema.end()) return TypeBitOfValue(*c);
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    for (const ordered_json& v : *e) bits |= TypeBitOfValue(v);
    return bits;
  }
  if (depth == 0) return 0;
  for (const char* key : {"anyOf", "oneOf"}) {
    auto branches = schema.find(key);
    if (branches == schema.end() || !branches->is_array()) continue;
    for (const ordered_json& b : *branches) {
      const uint8_t got = DeclaredTypes(b, depth - 1);
      if (got == 0) return 0;  // a branch of any type: undeclared
      bits |= got;
    }
  }
  return bits;
}

// A kQwen3Xml parameter's text as the value of its declared types (ToolCallParserOptions).
ordered_json XmlParameterValue(std::string_view text, uint8_t types, size_t max_depth) {
  if (types == 0) {
    ordered_json v = ParseBounded(text, max_depth);
    if (v.is_discarded() || v.is_string()) v = std::string(text);
    return v;
  }
  if ((types & kJsonNull) && (text == "null" || text == "None")) return nullptr;
  if (types & kJsonBoolean) {
    if (text == "true" || text == "True") return true;
    if (text == "false" || text == "False") return false;
  }
  if (types & (kJsonInteger | kJsonNumber | kJsonObject | kJsonArray)) {
    const ordered_json v = ParseBounded(text, max_depth);
    if ((types & kJsonInteger) && v.is_number_integer()) return v;
    if ((types & kJsonNumber) && v.is_number()) return v;
    if ((types & kJsonObject) && v.is_object()) return v;
    if ((types & kJsonArray) && v.is_array()) return v;
  }
  if (types & kJsonString) return std::string(text);
  return XmlParameterValue(text, 0, max_depth);  // fits no declared type: read as undeclared
}

// <function=f>\n<parameter=x>\nvalue\n</parameter>\n...</function> (the text between
// <tool_call> and </tool_call>).
bool ExtractXmlCall(std::string_view body, size_t max_depth, const ToolParameterTypes& types,
                    std::string* name, std::string* arguments) {
  constexpr std::string_view kFunction = "<function=";
  constexpr std::string_view kFunctionEnd = "</function>";
  constexpr std::string_view kParameter = "<parameter=";
  constexpr std::string_view kParameterEnd = "</parameter>";
  std::string_view s = TrimSpace(body);
  std::string_view fname;
  if (!TakeTag(kFunction, &s, &fname)) return false;
  const auto declared = types.find(fname);
  ordered_json args = ordered_json::object();
  for (;;) {
    s = TrimSpace(s);
    std::string_view pname;
    if (s.starts_with(kParameter)) {
      if (!TakeTag(kParameter, &s, &pname)) return false;
      size_t end = s.find(kParameterEnd);
      if (end == std::string_view::npos) return false;
      std::string_view value = s.substr(0, end);
      s.remove_prefix(end + kParameterEnd.size());
      // The template writes "\n" + value + "\n".
      if (value.starts_with('\n')) value.remove_prefix(1);
      if (value.ends_with('\n')) value.remove_suffix(1);
      uint8_t bits = 0;
      if (declared != types.end()) {
        if (auto p = declared->second.find(std::string(pname)); p != declared->second.end()) {
          bits = p->second;
        }
      }
      args[std::string(pname)] = XmlParameterValue(value, bits, max_depth);
    } else if (s.starts_with(kFunctionEnd)) {
      s.remove_prefix(kFunctionEnd.size());
      if (!TrimSpace(s).empty()) return false;
      break;
    } else {
      return false;
    }
  }
  *name = std::string(fname);
  *arguments = CompactJson(args);
  return true;
}

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

ToolParameterTypes ParameterTypesOfTools(std::string_view tools_json) {
  return ParameterTypesOfToolArray(ordered_json::parse(tools_json, nullptr, false));
}

ToolParameterTypes ParameterTypesOfToolArray(const ordered_json& tools) {
  ToolParameterTypes out;
  if (!tools.is_array()) return out;
  for (const ordered_json& t : tools) {
    if (!t.is_object()) continue;
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) continue;
    auto name = fn->find("name");
    auto params = fn->find("parameters");
    if (name == fn->end() || !name->is_string() || params == fn->end() || !params->is_object())
      continue;
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) continue;
    auto& types = out[name->get<std::string>()];
    for (auto it = props->begin(); it != props->end(); ++it) {
      types[it.key()] = DeclaredTypes(it.value(), /*depth=*/2);
    }
  }
  return out;
}

ToolCallParser::ToolCallParser(ToolCallSyntax syntax, ToolCallParserOptions options)
    : syntax_(syntax), options_(std::move(options)) {
  switch (syntax_) {
    case ToolCallSyntax::kHermes:
    case ToolCallSyntax::kQwen3Xml:
      open_markers_ = {"<tool_call>"};
      break;
    case ToolCallSyntax::kLlama3Json:
      open_markers_ = {"<|python_tag|>"};
      bare_allowed_ = true;
      break;
    case ToolCallSyntax::kGemmaJson:
      open_markers_ = {"```tool_call", "```json"};
      bare_allowed_ = true;
      break;
    case ToolCallSyntax::kNone:
      break;
  }
  if (options_.max_json_depth == 0) options_.max_json_depth = 1;
}

ToolCallEvents ToolCallParser::Feed(std::string_view text) {
  ToolCallEvents out;
  buf_.append(text);
  Process(/*at_end=*/false, &out);
  return out;
}

ToolCallEvents ToolCallParser::Finish() {
  ToolCallEvents out;
  Process(/*at_end=*/true, &out);
  return out;
}

void ToolCallParser::Process(bool at_end, ToolCallEvents* out) {
  for (;;) {
    bool progressed = false;
    if (state_ == State::kText) {
      progressed = StepText(at_end, out);
    } else if (kind_ == BodyKind::kXml) {
      progressed = StepXmlBody(at_end, out);
    } else {
      progressed = StepBody(at_end, out);
    }
    if (!progressed) return;
  }
}

void ToolCallParser::Release(size_t n, ToolCallEvents* out) {
  n = std::min(n, buf_.size());
  if (n == 0) return;
  if (out->empty() || out->back().kind != ToolCallEvent::Kind::kContent) out->emplace_back();
  out->back().content.append(buf_, 0, n);
  buf_.erase(0, n);
}

void ToolCallParser::StartBody(BodyKind kind, size_t scan_from, std::string_view close) {
  state_ = State::kBody;
  kind_ = kind;
  close_ = std::string(close);
  scan_ = scan_from;
  phase_ = Phase::kLeadingSpace;
  depth_ = 0;
  in_string_ = false;
  escape_ = false;
}

void ToolCallParser::Malformed(size_t upto, ToolCallEvents* out) {
  Release(std::max<size_t>(upto, 1), out);
  state_ = State::kText;
  after_call_ = false;
  at_start_ = false;
}

std::string ToolCallParser::MakeId(size_t index) const {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t state = options_.seed ^ (0xD1B54A32D192ED03ull * (index + 1));
  std::string id = options_.id_prefix;
  for (int i = 0; i < 24; ++i) id += kAlphabet[SplitMix64(&state) % 62];
  return id;
}

void ToolCallParser::EmitCall(std::string name, std::string arguments, ToolCallEvents* out) {
  ToolCall call;
  call.id = MakeId(calls_.size());
  call.name = std::move(name);
  call.arguments = std::move(arguments);
  ToolCallDelta head;
  head.index = calls_.size();
  head.id = call.id;
  head.name = call.name;
  ToolCallDelta args;
  args.index = calls_.size();
  args.arguments = call.arguments;
  for (ToolCallDelta* d : {&head, &args}) {
    ToolCallEvent e;
    e.kind = ToolCallEvent::Kind::kToolCall;
    e.call = std::move(*d);
    out->push_back(std::move(e));
  }
  calls_.push_back(std::move(call));
}

bool ToolCallParser::StepText(bool at_end, ToolCallEvents* out) {
  if (buf_.empty()) return false;
  if (open_markers_.empty() && !bare_allowed_) {
    Release(buf_.size(), out);
    return false;
  }
  if (after_call_ || (at_start_ && bare_allowed_)) {
    size_t ws = 0;
    while (ws < buf_.size() && IsSpace(buf_[ws])) ++ws;
    if (ws == buf_.size()) {
      if (!at_end) return false;
      if (after_call_) {
        buf_.clear();
      } else {
        Release(buf_.size(), out);
      }
      return false;
    }
    if (at_start_ && bare_allowed_ && buf_[ws] == '{') {
      at_start_ = false;
      StartBody(BodyKind::kBare, ws, "");
      return true;
    }
    if (after_call_) {
      std::string_view rest(buf_);
      rest.remove_prefix(ws);
      bool partial = false;
      for (const std::string& m : open_markers_) {
        if (rest.starts_with(m)) {
          buf_.erase(0, ws);  // whitespace between two calls
          after_call_ = false;
          at_start_ = false;
          return true;
        }
        if (std::string_view(m).starts_with(rest)) partial = true;
      }
      if (partial && !at_end) return false;
    }
    after_call_ = false;
    at_start_ = false;
  }
  // The earliest opening marker.
  size_t best = std::string::npos;
  const std::string* marker = nullptr;
  for (const std::string& m : open_markers_) {
    size_t p = buf_.find(m);
    if (p < best) {
      best = p;
      marker = &m;
    }
  }
  if (marker != nullptr) {
    Release(best, out);
    if (kind_for_marker(*marker) == BodyKind::kXml) {
      StartBody(BodyKind::kXml, marker->size(), "</tool_call>");
    } else if (kind_for_marker(*marker) == BodyKind::kBare) {
      StartBody(BodyKind::kBare, marker->size(), "");
    } else {
      StartBody(BodyKind::kClosed, marker->size(),
                syntax_ == ToolCallSyntax::kGemmaJson ? "```" : "</tool_call>");
    }
    return true;
  }
  if (at_end) {
    Release(buf_.size(), out);
    return false;
  }
  // Hold back the longest tail that could still become a marker.
  size_t hold = 0;
  for (const std::string& m : open_markers_) {
    for (size_t len = std::min(m.size() - 1, buf_.size()); len > hold; --len) {
      if (std::string_view(buf_).substr(buf_.size() - len) == std::string_view(m).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  Release(buf_.size() - hold, out);
  return false;
}

ToolCallParser::BodyKind ToolCallParser::kind_for_marker(const std::string& marker) const {
  if (syntax_ == ToolCallSyntax::kQwen3Xml) return BodyKind::kXml;
  if (marker == "<|python_tag|>") return BodyKind::kBare;
  return BodyKind::kClosed;
}

bool ToolCallParser::StepBody(bool at_end, ToolCallEvents* out) {
  const size_t max_depth = options_.max_json_depth;
  while (scan_ < buf_.size()) {
    if (scan_ >= options_.max_call_bytes) {  // checked per byte: the same for any split
      Malformed(options_.max_call_bytes, out);
      return true;
    }
    const char c = buf_[scan_];
    if (phase_ == Phase::kLeadingSpace) {
      if (IsSpace(c)) {
        ++scan_;
        continue;
      }
      if (c != '{') {
        Malformed(scan_, out);
        return true;
      }
      obj_begin_ = scan_;
      depth_ = 1;
      phase_ = Phase::kObject;
      ++scan_;
      continue;
    }
    if (phase_ == Phase::kObject) {
      ++scan_;
      if (in_string_) {
        if (escape_) {
          escape_ = false;
        } else if (c == '\\') {
          escape_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
        continue;
      }
      if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        if (++depth_ > max_depth) {
          Malformed(scan_, out);
          return true;
        }
      } else if (c == '}' || c == ']') {
        if (--depth_ == 0) {
          obj_end_ = scan_;
          std::string_view obj = std::string_view(buf_).substr(obj_begin_, obj_end_ - obj_begin_);
          if (!ExtractJsonCall(obj, max_depth, &pending_name_, &pending_arguments_)) {
            Malformed(obj_end_, out);
            return true;
          }
          phase_ = Phase::kAfterObject;
        }
      }
      continue;
    }
    // kAfterObject
    if (IsSpace(c)) {
      ++scan_;
      continue;
    }
    if (kind_ == BodyKind::kBare) {
      EmitCall(std::move(pending_name_), std::move(pending_arguments_), out);
      if (c == ';') {
        buf_.erase(0, scan_);  // keeps the ';', released if the next call is malformed
        StartBody(BodyKind::kBare, 1, "");
      } else {
        buf_.erase(0, obj_end_);
        state_ = State::kText;
        after_call_ = true;
      }
      return true;
    }
    std::string_view rest = std::string_view(buf_).substr(scan_);
    if (rest.starts_with(close_)) {
      EmitCall(std::move(pending_name_), std::move(pending_arguments_), out);
      buf_.erase(0, scan_ + close_.size());
      state_ = State::kText;
      after_call_ = true;
      return true;
    }
    if (!std::string_view(close_).starts_with(rest)) {
      Malformed(scan_, out);
      return true;
    }
    break;  // a partial closing marker: wait for more
  }
  if (at_end) {
    if (phase_ == Phase::kAfterObject && kind_ == BodyKind::kBare) {
      EmitCall(std::move(pending_name_), std::move(pending_arguments_), out);
      buf_.clear();  // trailing whitespace
      state_ = State::kText;
      return true;
    }
    Malformed(buf_.size(), out);  // unterminated: all of it is content
    return true;
  }
  return false;
}

bool ToolCallParser::StepXmlBody(bool at_end, ToolCallEvents* out) {
  size_t close = buf_.find(close_, scan_);
  if (close != std::string::npos && close + close_.size() > options_.max_call_bytes) {
    close = std::string::npos;  // too long, whatever the split
  }
  if (close == std::string::npos) {
    if (at_end || buf_.size() > options_.max_call_bytes) {
      Malformed(at_end ? buf_.size() : options_.max_call_bytes, out);
      return true;
    }
    // The marker may start in the last close_.size() - 1 bytes.
    if (buf_.size() >= close_.size()) scan_ = std::max(scan_, buf_.size() - close_.size() + 1);
    return false;
  }
  const size_t marker_len = std::string_view("<tool_call>").size();
  std::string_view body = std::string_view(buf_).substr(marker_len, close - marker_len);
  std::string name;
  std::string arguments;
  const size_t end = close + close_.size();
  if (!ExtractXmlCall(body, options_.max_json_depth, options_.xml_parameter_types, &name,
                      &arguments)) {
    Malformed(end, out);
    return true;
  }
  EmitCall(std::move(name), std::move(arguments), out);
  buf_.erase(0, end);
  state_ = State::kText;
  after_call_ = true;
  return true;
}

ParsedReply ParseToolCalls(ToolCallSyntax syntax, std::string_view text,
                           const ToolCallParserOptions& options) {
  ToolCallParser parser(syntax, options);
  ParsedReply reply;
  for (ToolCallEvents events : {parser.Feed(text), parser.Finish()}) {
    for (const ToolCallEvent& e : events) reply.content += e.content;
  }
  reply.calls = parser.calls();
  return reply;
}

Expected<ForcedToolCall> ForcedToolCallText(ToolCallSyntax syntax, std::string_view function_name) {
  ForcedToolCall f;
  std::string name(function_name);
  if (syntax == ToolCallSyntax::kQwen3Xml) {
    if (name.find_first_of(">\n") != std::string::npos) {
      return InvalidArgument(
          "a function name for the qwen3_xml syntax cannot hold '>' or a newline");
    }
    f.suffix = "</function>\n</tool_call>";
    if (name.empty()) {
      f.prefix = "<tool_call>\n<function=";
      f.after_name = ">\n";
    } else {
      f.prefix = "<tool_call>\n<function=" + name + ">\n";
    }
    return f;
  }
  std::string open;
  std::string args_key;
  switch (syntax) {
    case ToolCallSyntax::kHermes:
      open = "<tool_call>\n";
      args_key = "arguments";
      f.suffix = "}\n</tool_call>";
      break;
    case ToolCallSyntax::kLlama3Json:
      args_key = "parameters";
      f.suffix = "}";
      break;
    case ToolCallSyntax::kGemmaJson:
      args_key = "arguments";
      f.suffix = "}";
      break;
    default:
      return Unsupported(std::string("no forced tool call for the '") + ToolCallSyntaxName(syntax) +
                         "' tool-call syntax");
  }
  std::string quoted = CompactJson(ordered_json(name));  // "\"name\"", escaped
  std::string escaped = quoted.substr(1, quoted.size() - 2);
  std::string after_name = "\", \"" + args_key + "\": ";
  if (name.empty()) {
    f.prefix = open + "{\"name\": \"";
    f.after_name = std::move(after_name);
  } else {
    f.prefix = open + "{\"name\": \"" + escaped + after_name;
  }
  return f;
}

}  // namespace tessera
