// The grammar of a tool call in the XML form Qwen3.5 writes:
//   <function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n ... </function>
// built from the JSON grammars of the functions' parameter schemas: each function's object
// node becomes an XML object (Node::xml), and a parameter declared a string becomes a raw
// string (Node::raw), written as it is on one line. The reply parser reads a parameter's text
// as the type its function declares (chat/tool_calls.h), so a raw string is only made where
// the schema says "string" itself, or string or null (a nullable string: the text null or
// None reads as null, which the schema allows too); a parameter that may be a string or
// something else, or a string the parser could not tell from its schema, is refused.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_internal.h"
#include "grammar/pattern.h"

namespace tessera {
namespace {

using grammar_internal::kMaxFrames;
using grammar_internal::kMaxStacks;
using grammar_internal::kUnsatisfiable;
using grammar_internal::kXmlForbidden;
using grammar_internal::Node;
using grammar_internal::NodeKind;
using grammar_internal::Property;
using json = nlohmann::ordered_json;

// Appends g's nodes and patterns to `out`, every index shifted; returns where g's nodes start.
uint32_t Append(const Grammar& g, Grammar* out) {
  const uint32_t base = static_cast<uint32_t>(out->nodes.size());
  const int32_t pattern_base = static_cast<int32_t>(out->patterns.size());
  auto shift = [base](int32_t* i) {
    if (*i >= 0) *i += static_cast<int32_t>(base);
  };
  for (Node n : g.nodes) {
    shift(&n.item);
    shift(&n.free_value);
    for (Property& p : n.props) p.node += base;
    for (uint32_t& b : n.branches) b += base;
    if (n.pattern >= 0) n.pattern += pattern_base;
    out->nodes.push_back(std::move(n));
  }
  out->patterns.insert(out->patterns.end(), g.patterns.begin(), g.patterns.end());
  return base;
}

bool IsStringLiteral(const std::string& literal) {
  return !literal.empty() && literal[0] == '"';
}

// Whether node `id` may produce a JSON string, and whether it produces nothing else.
void StringKinds(const Grammar& g, uint32_t id, bool* some, bool* only) {
  const Node& n = g.nodes[id];
  switch (n.kind) {
    case NodeKind::kString:
      *some = true;
      return;
    case NodeKind::kLiterals:
      for (const std::string& l : n.literals) {
        if (IsStringLiteral(l)) {
          *some = true;
        } else {
          *only = false;
        }
      }
      return;
    case NodeKind::kUnion:
      for (uint32_t b : n.branches) StringKinds(g, b, some, only);
      return;
    default:
      *only = false;
  }
}

// The parameter's own schema declares a string (as the reply parser reads declarations): type
// "string" (or ["string"]), or no type and a string const or an enum of strings only.
bool DeclaresString(const json* schema) {
  if (schema == nullptr || !schema->is_object()) return false;
  if (auto t = schema->find("type"); t != schema->end()) {
    if (t->is_string()) return t->get<std::string>() == "string";
    return t->is_array() && t->size() == 1 && (*t)[0] == "string";
  }
  if (auto c = schema->find("const"); c != schema->end()) return c->is_string();
  if (auto e = schema->find("enum"); e != schema->end() && e->is_array() && !e->empty()) {
    return std::all_of(e->begin(), e->end(), [](const json& v) { return v.is_string(); });
  }
  return false;
}

// The parameter's own schema declares a string or null, nothing else: "type": ["string",
// "null"], anyOf / oneOf of a string schema (DeclaresString) and {"type": "null"}, or an enum
// of strings and null.
bool DeclaresNullableString(const json* schema) {
  if (schema == nullptr || !schema->is_object()) return false;
  if (auto t = schema->find("type"); t != schema->end()) {
    if (!t->is_array()) return false;
    std::set<std::string> types;
    for (const json& x : *t) {
      if (!x.is_string()) return false;
      types.insert(x.get<std::string>());
    }
    return types == std::set<std::string>{"string", "null"};
  }
  if (auto e = schema->find("enum"); e != schema->end() && e->is_array()) {
    bool strings = false, null = false;
    for (const json& v : *e) {
      if (!v.is_string() && !v.is_null()) return false;
      (v.is_null() ? null : strings) = true;
    }
    return strings && null;
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto branches = schema->find(key);
    if (branches == schema->end() || !branches->is_array()) continue;
    bool strings = false, null = false;
    for (const json& b : *branches) {
      if (DeclaresString(&b)) {
        strings = true;
      } else if (b.is_object() && b.contains("type") && b["type"] == "null") {
        null = true;
      } else {
        return false;
      }
    }
    return strings && null;
  }
  return false;
}

// The string form of a nullable string node: of a union, its one string branch beside null;
// of literals, those that are strings (as a new node). Nullopt for any other node.
std::optional<uint32_t> StringPartOfNullable(Grammar* g, uint32_t id) {
  const Node n = g->nodes[id];
  auto is_null = [g](uint32_t b) {
    const Node& c = g->nodes[b];
    return c.kind == NodeKind::kLiterals && c.literals == std::vector<std::string>{"null"};
  };
  if (n.kind == NodeKind::kUnion) {
    std::optional<uint32_t> string_branch;
    bool null = false;
    for (uint32_t b : n.branches) {
      if (is_null(b)) {
        null = true;
        continue;
      }
      bool some = false, only = true;
      StringKinds(*g, b, &some, &only);
      if (!some || !only || string_branch) return std::nullopt;
      string_branch = b;
    }
    return null ? string_branch : std::nullopt;
  }
  if (n.kind == NodeKind::kLiterals) {
    Node strings = n;
    std::erase(strings.literals, std::string("null"));
    if (strings.literals.size() + 1 != n.literals.size() || strings.literals.empty()) {
      return std::nullopt;
    }
    g->nodes.push_back(std::move(strings));
    return static_cast<uint32_t>(g->nodes.size() - 1);
  }
  return std::nullopt;
}

// Holds a text the reply parser would end a parameter or the call at.
bool HoldsForbidden(std::string_view s) {
  for (std::string_view f : kXmlForbidden) {
    if (s.find(f) != std::string_view::npos) return true;
  }
  return false;
}

// A raw string as a parameter value may hold: one line, no control character but tab, no
// forbidden text.
bool RawWritable(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 && c != '\t') return false;
  }
  return !HoldsForbidden(s);
}

Status Refuse(const std::string& function, const std::string& what) {
  return InvalidArgument("tools: function '" + function + "': " + what +
                         " (the qwen3_xml tool-call format writes parameters as text)");
}

// The raw (XML) form of string node `id` (a kString or string literals), as a new node.
Expected<uint32_t> RawValue(Grammar* g, uint32_t id, const std::string& function,
                            const std::string& key) {
  Node raw = g->nodes[id];
  if (raw.kind == NodeKind::kString) {
    raw.raw = true;
  } else if (raw.kind == NodeKind::kLiterals) {
    std::set<std::string> texts;
    for (const std::string& l : raw.literals) {
      const json v = json::parse(l, nullptr, false);
      if (!v.is_string() || !RawWritable(v.get<std::string>())) {
        return Refuse(function, "an allowed value of parameter '" + key +
                                    "' holds a line break, a control character, "
                                    "</parameter> or </tool_call>");
      }
      texts.insert(v.get<std::string>());
    }
    raw.literals.assign(texts.begin(), texts.end());  // sorted bytewise, distinct
  } else {
    return Refuse(function, "parameter '" + key + "' is a string in several alternative forms");
  }
  raw.min_frames = 1;
  g->nodes.push_back(std::move(raw));
  return static_cast<uint32_t>(g->nodes.size() - 1);
}

// Nodes [base, end) and the last `patterns` patterns of `g`, one function's JSON grammar:
// every string is guarded against the forbidden texts (Node::xml_guard); a pattern string
// never holds '<' (its automaton loses those transitions, so the guard can never cut a match
// short: a dead end); literals and keys holding a forbidden text are refused.
Status GuardStrings(Grammar* g, uint32_t base, int32_t patterns, const std::string& function) {
  for (size_t i = g->patterns.size() - static_cast<size_t>(patterns); i < g->patterns.size(); ++i) {
    grammar_internal::PatternDfa& dfa = g->patterns[i];
    for (size_t d = 0; d < dfa.accepting.size(); ++d) {
      dfa.next[d * grammar_internal::PatternDfa::kColumns + '<'] = -1;
    }
    if (!PruneToAcceptance(dfa).ok()) {
      return Refuse(function, "a 'pattern' has no match without '<'");
    }
  }
  for (size_t i = base; i < g->nodes.size(); ++i) {
    Node& n = g->nodes[i];
    if (n.kind == NodeKind::kString) {
      n.xml_guard = true;
      if (n.pattern >= 0 &&
          g->patterns[static_cast<size_t>(n.pattern)].dist_to_accept[0] > n.max_len) {
        return Refuse(function, "a 'pattern' has no match without '<' within 'maxLength'");
      }
    }
    for (const std::string& l : n.literals) {
      if (HoldsForbidden(l)) return Refuse(function, "an enum or const value holds " + l);
    }
    for (const Property& p : n.props) {
      if (HoldsForbidden(p.key_json))
        return Refuse(function, "a property name holds " + p.key_json);
    }
  }
  return Status::Ok();
}

// The XML object node of one function, `prefix` matched first.
Expected<uint32_t> FunctionNode(Grammar* out, const std::string& name, const json& parameters,
                                const std::string& prefix) {
  Node xml;
  xml.kind = NodeKind::kObject;
  xml.xml = true;
  xml.xml_prefix = prefix;
  // No parameters (null or {}): an empty call. Otherwise one object schema, whose declared
  // properties are the call's (free keys are not written).
  if (!parameters.is_null() && !(parameters.is_object() && parameters.empty())) {
    auto compiled = CompileJsonSchema(parameters);
    if (!compiled) return Refuse(name, compiled.status().message());
    const Grammar& g = **compiled;
    const uint32_t base = Append(g, out);
    const int32_t top = out->nodes[base + g.root].item;
    if (top < 0 || out->nodes[static_cast<size_t>(top)].kind != NodeKind::kObject) {
      return Refuse(name, "the parameters schema is not one object schema");
    }
    if (out->key_string == 0) out->key_string = base + g.key_string;
    TS_RETURN_IF_ERROR(GuardStrings(out, base, static_cast<int32_t>(g.patterns.size()), name));
    const json* declared = nullptr;
    if (parameters.is_object() && parameters.contains("properties")) {
      declared = &parameters["properties"];
    }
    const std::vector<Property> props = out->nodes[static_cast<size_t>(top)].props;
    for (const Property& p : props) {
      const std::string key = json::parse(p.key_json).get<std::string>();
      if (key.empty() || key.find_first_of(">\n") != std::string::npos) {
        return Refuse(name, "parameter name '" + key + "' is empty or holds '>' or a newline");
      }
      Property x;
      x.key_json = "<parameter=" + key + ">\n";
      x.required = p.required;
      x.node = p.node;
      bool some = false, only = true;
      StringKinds(*out, p.node, &some, &only);
      if (some) {
        const json* schema =
            declared != nullptr && declared->contains(key) ? &(*declared)[key] : nullptr;
        uint32_t string_node = p.node;
        if (!only || !DeclaresString(schema)) {
          std::optional<uint32_t> part;
          if (DeclaresNullableString(schema)) part = StringPartOfNullable(out, p.node);
          if (!part) {
            return Refuse(name, "parameter '" + key +
                                    "' may be a string but is not declared as a string alone "
                                    "or a nullable string (\"type\": \"string\" or "
                                    "[\"string\", \"null\"], an enum or const of strings)");
          }
          string_node = *part;
        }
        TS_ASSIGN_OR_RETURN(x.node, RawValue(out, string_node, name, key));
      }
      xml.props.push_back(std::move(x));
    }
  }
  uint32_t deepest = 0;
  for (const Property& p : xml.props) {
    if (p.required) deepest = std::max(deepest, out->nodes[p.node].min_frames);
  }
  xml.min_frames = deepest >= kMaxFrames ? kUnsatisfiable : deepest + 1;
  out->nodes.push_back(std::move(xml));
  return static_cast<uint32_t>(out->nodes.size() - 1);
}

// The property names of the object schemas `schema` stands for: its own properties, those of
// what a local $ref points at, and of its anyOf / oneOf / allOf branches (a few levels).
void CollectPropertyNames(const json& root, const json& schema, int depth,
                          std::vector<std::string>* names) {
  if (depth > 4 || !schema.is_object()) return;
  if (auto r = schema.find("$ref"); r != schema.end() && r->is_string()) {
    const std::string& ref = r->get_ref<const std::string&>();
    if (const json* target =
            ref.empty() || ref[0] != '#'
                ? nullptr
                : grammar_internal::ResolvePointer(root, std::string_view(ref).substr(1))) {
      CollectPropertyNames(root, *target, depth + 1, names);
    }
  }
  if (auto p = schema.find("properties"); p != schema.end() && p->is_object()) {
    for (auto it = p->begin(); it != p->end(); ++it) {
      if (std::find(names->begin(), names->end(), it.key()) == names->end()) {
        names->push_back(it.key());
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (auto b = schema.find(key); b != schema.end() && b->is_array()) {
      for (const json& branch : *b) CollectPropertyNames(root, branch, depth + 1, names);
    }
  }
}

// A non-strict function's parameters when its own schema is refused (relax_non_strict): each
// parameter it declares (at its top, behind a $ref or in its branches) whose name the format
// can write, optional, as a string (raw text).
json RelaxedParameters(const json& parameters) {
  std::vector<std::string> names;
  CollectPropertyNames(parameters, parameters, 0, &names);
  json props = json::object();
  for (const std::string& name : names) {
    if (!name.empty() && name.find_first_of(">\n") == std::string::npos && !HoldsForbidden(name)) {
      props[name] = {{"type", "string"}};
    }
  }
  return {{"type", "object"}, {"properties", std::move(props)}};
}

}  // namespace

bool IsStrictTool(const nlohmann::ordered_json& tool) {
  const auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object()) return false;
  const auto strict = fn->find("strict");
  return strict != fn->end() && strict->is_boolean() && strict->get<bool>();
}

Expected<std::shared_ptr<const Grammar>> CompileXmlToolCalls(
    const nlohmann::ordered_json& tools, std::string_view only,
    std::optional<std::string_view> name_opening, bool relax_non_strict) {
  if (!tools.is_array()) return InvalidArgument("tools must be an array");
  auto grammar = std::make_shared<Grammar>();
  std::vector<uint32_t> functions;
  for (const json& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string()) {
      return InvalidArgument("tools: each tool needs a function with a string name");
    }
    const json& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    if (name.empty() || name.find_first_of(">\n") != std::string::npos) {
      return InvalidArgument(
          "tools: a function name for the qwen3_xml format cannot be empty "
          "or hold '>' or a newline: '" +
          name + "'");
    }
    std::string prefix;
    if (name_opening) prefix = std::string(*name_opening) + name + ">\n";
    const json parameters = fn.contains("parameters") ? fn["parameters"] : json();
    const size_t nodes = grammar->nodes.size(), patterns = grammar->patterns.size();
    const uint32_t key_string = grammar->key_string;
    Expected<uint32_t> node = FunctionNode(grammar.get(), name, parameters, prefix);
    if (!node && relax_non_strict && !IsStrictTool(t)) {
      grammar->nodes.resize(nodes);  // drop what the refused schema appended
      grammar->patterns.resize(patterns);
      grammar->key_string = key_string;
      node = FunctionNode(grammar.get(), name, RelaxedParameters(parameters), prefix);
    }
    if (!node) return node.status();
    functions.push_back(*node);
  }
  if (functions.empty()) {
    return InvalidArgument("tools: no function named '" + std::string(only) + "'");
  }
  if (functions.size() > kMaxStacks) {
    return InvalidArgument("tools: at most " + std::to_string(kMaxStacks) +
                           " functions can be constrained at once (under tool_choice required, "
                           "or auto with a strict function, the qwen3_xml format constrains "
                           "every function); name one with tool_choice, or send fewer tools");
  }
  if (functions.size() > 1 && !name_opening) {
    return InvalidArgument("tools: several functions need their names in the call");
  }
  uint32_t item = functions[0];
  if (functions.size() > 1) {
    Node any;
    any.kind = NodeKind::kUnion;
    any.branches = functions;
    any.min_frames = kUnsatisfiable;
    for (uint32_t f : functions)
      any.min_frames = std::min(any.min_frames, grammar->nodes[f].min_frames);
    grammar->nodes.push_back(std::move(any));
    item = static_cast<uint32_t>(grammar->nodes.size() - 1);
  }
  Node root;
  root.kind = NodeKind::kRoot;
  root.item = static_cast<int32_t>(item);
  const uint32_t below = grammar->nodes[item].min_frames;
  root.min_frames = below >= kMaxFrames ? kUnsatisfiable : below + 1;
  if (root.min_frames > kMaxFrames) {
    return InvalidArgument("tools: no call satisfies the parameters within " +
                           std::to_string(kMaxFrames - 1) + " levels of nesting");
  }
  grammar->nodes.push_back(std::move(root));
  grammar->root = static_cast<uint32_t>(grammar->nodes.size() - 1);
  return std::shared_ptr<const Grammar>(std::move(grammar));
}

}  // namespace tessera
