// JSON Schema (the subset OpenAI structured outputs use) compiled to the node graph the matcher
// walks. Every refusal names the keyword and the JSON pointer of the schema it sits in.
#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "grammar/grammar.h"
#include "grammar/grammar_internal.h"
#include "grammar/pattern.h"

namespace tessera {
namespace {

using grammar_internal::kMaxFrames;
using grammar_internal::kMaxIntDigits;
using grammar_internal::kUnsatisfiable;
using grammar_internal::Node;
using grammar_internal::NodeKind;
using grammar_internal::Property;
using json = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 32;
constexpr size_t kMaxNodes = 20000;
constexpr size_t kMaxLiteralBytes = 64 * 1024;
constexpr uint64_t kMaxMinCount = 1u << 16;  // minItems / minLength: forced output stays sane
constexpr int64_t kIntLimit = 999'999'999'999'999'999;  // kMaxIntDigits nines

const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {"title",    "description", "$schema", "default",
                                          "examples", "$id",         "$comment"};
  return k;
}
const std::set<std::string>& Supported() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "items",
                                          "minItems",
                                          "maxItems",
                                          "enum",
                                          "const",
                                          "pattern",
                                          "minLength",
                                          "maxLength",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "anyOf",
                                          "oneOf",
                                          "$ref",
                                          "$defs",
                                          "definitions"};
  return k;
}

std::string Where(const std::string& pointer) {
  return pointer.empty() ? "/" : pointer;
}
std::string EscapePointerToken(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

class Compiler {
 public:
  explicit Compiler(const json& document) : document_(document) {}

  Expected<std::shared_ptr<const Grammar>> Compile() {
    auto grammar = std::make_shared<Grammar>();
    grammar->root = NewNode(NodeKind::kRoot);
    MakeAnyNodes();
    TS_ASSIGN_OR_RETURN(uint32_t top, CompileAt(document_, "", 0));
    nodes_[grammar->root].item = static_cast<int32_t>(top);
    FlattenUnions();
    ComputeMinFrames();
    if (nodes_[grammar->root].min_frames > kMaxFrames) {
      return InvalidArgument("schema: no JSON value satisfies the schema within " +
                             std::to_string(kMaxFrames - 1) + " levels of nesting");
    }
    grammar->nodes = std::move(nodes_);
    grammar->patterns = std::move(patterns_);
    grammar->key_string = free_string_;
    return std::shared_ptr<const Grammar>(std::move(grammar));
  }

  // A grammar whose document is any JSON object.
  std::shared_ptr<const Grammar> JsonObject() {
    auto grammar = std::make_shared<Grammar>();
    grammar->root = NewNode(NodeKind::kRoot);
    MakeAnyNodes();
    nodes_[grammar->root].item = static_cast<int32_t>(free_object_);
    FlattenUnions();
    ComputeMinFrames();
    grammar->nodes = std::move(nodes_);
    grammar->key_string = free_string_;
    return grammar;
  }

 private:
  static Status Error(ErrorCode code, const std::string& what, const std::string& pointer) {
    return Status(code, "schema: " + what + " at " + Where(pointer));
  }
  static Status Bad(const std::string& what, const std::string& pointer) {
    return Error(ErrorCode::kInvalidArgument, what, pointer);
  }

  uint32_t NewNode(NodeKind kind) {
    nodes_.emplace_back();
    nodes_.back().kind = kind;
    return static_cast<uint32_t>(nodes_.size() - 1);
  }

  void MakeAnyNodes() {
    any_ = NewNode(NodeKind::kUnion);
    free_object_ = NewNode(NodeKind::kObject);
    nodes_[free_object_].free_value = static_cast<int32_t>(any_);
    uint32_t array = NewNode(NodeKind::kArray);
    nodes_[array].item = static_cast<int32_t>(any_);
    free_string_ = NewNode(NodeKind::kString);
    uint32_t number = NewNode(NodeKind::kNumber);
    nodes_[number].int_lo = -kIntLimit;
    nodes_[number].int_hi = kIntLimit;
    uint32_t literals = NewNode(NodeKind::kLiterals);
    nodes_[literals].literals = {"false", "null", "true"};
    nodes_[any_].branches = {free_object_, array, free_string_, number, literals};
  }

  Expected<uint32_t> CompileAt(const json& schema, const std::string& pointer, int depth) {
    auto it = memo_.find(pointer);
    if (it != memo_.end()) return it->second;
    if (depth > kMaxSchemaDepth) {
      return Error(ErrorCode::kResourceExhausted,
                   "schema nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels",
                   pointer);
    }
    if (nodes_.size() >= kMaxNodes) {
      return Error(ErrorCode::kResourceExhausted, "schema is too large", pointer);
    }
    uint32_t id = NewNode(NodeKind::kUnion);
    memo_[pointer] = id;
    TS_RETURN_IF_ERROR(CompileInto(id, schema, pointer, depth));
    return id;
  }

  Status CheckKeywords(const json& schema, const std::string& pointer) {
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      if (Annotations().count(it.key()) || Supported().count(it.key())) continue;
      return Error(ErrorCode::kUnsupported, "unsupported keyword '" + it.key() + "'", pointer);
    }
    for (const char* defs : {"$defs", "definitions"}) {
      if (schema.contains(defs) && !schema[defs].is_object()) {
        return Bad(std::string("'") + defs + "' must be an object", pointer);
      }
    }
    return Status::Ok();
  }

  // Only annotations, $defs and `allowed` may sit beside a combining keyword.
  Status OnlyAlongside(const json& schema, const std::string& keyword,
                       const std::set<std::string>& allowed, const std::string& pointer) {
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      const std::string& k = it.key();
      if (k == keyword || allowed.count(k) || Annotations().count(k) || k == "$defs" ||
          k == "definitions") {
        continue;
      }
      return Error(ErrorCode::kUnsupported,
                   "unsupported keyword '" + k + "' alongside '" + keyword + "'", pointer);
    }
    return Status::Ok();
  }

  Status CompileInto(uint32_t id, const json& schema, const std::string& pointer, int depth) {
    if (schema.is_boolean()) {
      if (schema.get<bool>()) nodes_[id].branches = {any_};
      return Status::Ok();  // false: a union of nothing
    }
    if (!schema.is_object()) return Bad("a schema must be an object or a boolean", pointer);
    TS_RETURN_IF_ERROR(CheckKeywords(schema, pointer));
    if (schema.contains("$ref")) return CompileRef(id, schema, pointer, depth);
    bool any_of = schema.contains("anyOf"), one_of = schema.contains("oneOf");
    if (any_of || one_of) {
      // oneOf is generated like anyOf: exactly-one is not enforced (docs/structured_outputs.md).
      const std::string keyword = any_of ? "anyOf" : "oneOf";
      TS_RETURN_IF_ERROR(OnlyAlongside(schema, keyword, {}, pointer));
      const json& list = schema[keyword];
      if (!list.is_array() || list.empty()) {
        return Bad("'" + keyword + "' must be a non-empty array", pointer);
      }
      for (size_t i = 0; i < list.size(); ++i) {
        TS_ASSIGN_OR_RETURN(
            uint32_t branch,
            CompileAt(list[i], pointer + "/" + keyword + "/" + std::to_string(i), depth + 1));
        nodes_[id].branches.push_back(branch);
      }
      return Status::Ok();
    }
    TS_ASSIGN_OR_RETURN(std::vector<std::string> types, Types(schema, pointer));
    TS_RETURN_IF_ERROR(CheckKeywordTypes(schema, pointer));
    if (schema.contains("enum") || schema.contains("const")) {
      return CompileLiterals(id, schema, types, pointer);
    }
    if (types.size() == 1) return CompileTyped(id, types[0], schema, pointer, depth);
    for (const std::string& type : types) {
      uint32_t branch = NewNode(NodeKind::kUnion);
      TS_RETURN_IF_ERROR(CompileTyped(branch, type, schema, pointer, depth));
      nodes_[id].branches.push_back(branch);
    }
    return Status::Ok();
  }

  Status CompileRef(uint32_t id, const json& schema, const std::string& pointer, int depth) {
    TS_RETURN_IF_ERROR(OnlyAlongside(schema, "$ref", {}, pointer));
    if (!schema["$ref"].is_string()) return Bad("'$ref' must be a string", pointer);
    const std::string ref = schema["$ref"].get<std::string>();
    if (ref.empty() || ref[0] != '#') {
      return Error(ErrorCode::kUnsupported, "'$ref' '" + ref + "' is not a local reference (#/...)",
                   pointer);
    }
    const std::string target = ref.substr(1);
    if (!target.empty() && target[0] != '/') {
      return Bad("'$ref' '" + ref + "' is not a JSON pointer", pointer);
    }
    const json* node = grammar_internal::ResolvePointer(document_, target);
    if (node == nullptr) return Bad("unresolvable '$ref' '" + ref + "'", pointer);
    TS_ASSIGN_OR_RETURN(uint32_t resolved, CompileAt(*node, target, depth + 1));
    nodes_[id].branches = {resolved};
    return Status::Ok();
  }

  Expected<std::vector<std::string>> Types(const json& schema, const std::string& pointer) {
    static const std::set<std::string> known = {"object", "array",   "string", "integer",
                                                "number", "boolean", "null"};
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const json& t = schema["type"];
      std::vector<json> list =
          t.is_array() ? std::vector<json>(t.begin(), t.end()) : std::vector<json>{t};
      if (list.empty()) return Bad("'type' must not be an empty list", pointer);
      for (const json& name : list) {
        if (!name.is_string() || !known.count(name.get<std::string>())) {
          return Bad(
              "'type' must be one of object, array, string, integer, number, boolean, "
              "null (or a list of them)",
              pointer);
        }
        if (std::find(types.begin(), types.end(), name.get<std::string>()) == types.end()) {
          types.push_back(name.get<std::string>());
        }
      }
      return types;
    }
    // No type: generate the kinds the keywords describe (a subset of what the schema allows).
    auto has = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys) {
        if (schema.contains(k)) return true;
      }
      return false;
    };
    if (has({"enum", "const"})) return types;  // the literals decide
    if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
    if (has({"items", "minItems", "maxItems"})) types.push_back("array");
    if (has({"pattern", "minLength", "maxLength"})) types.push_back("string");
    if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
      types.push_back("number");
    }
    if (types.empty()) {
      types = {"object", "array", "string", "number", "boolean", "null"};
    }
    return types;
  }

  Status CheckKeywordTypes(const json& schema, const std::string& pointer) {
    for (const char* k : {"minItems", "maxItems", "minLength", "maxLength"}) {
      if (schema.contains(k) && !(schema[k].is_number_integer() && schema[k].get<int64_t>() >= 0)) {
        return Bad(std::string("'") + k + "' must be a non-negative integer", pointer);
      }
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (!schema.contains(k)) continue;
      if (schema[k].is_boolean()) {
        return Error(ErrorCode::kUnsupported,
                     std::string("'") + k + "' as a boolean (draft 4) is not supported", pointer);
      }
      if (!schema[k].is_number() || !std::isfinite(schema[k].get<double>())) {
        return Bad(std::string("'") + k + "' must be a number", pointer);
      }
    }
    if (schema.contains("properties") && !schema["properties"].is_object()) {
      return Bad("'properties' must be an object", pointer);
    }
    if (schema.contains("required")) {
      const json& r = schema["required"];
      if (!r.is_array()) return Bad("'required' must be an array of strings", pointer);
      for (const json& name : r) {
        if (!name.is_string()) return Bad("'required' must be an array of strings", pointer);
      }
    }
    if (schema.contains("additionalProperties") && !schema["additionalProperties"].is_boolean() &&
        !schema["additionalProperties"].is_object()) {
      return Bad("'additionalProperties' must be a boolean or a schema", pointer);
    }
    if (schema.contains("items")) {
      if (schema["items"].is_array()) {
        return Error(ErrorCode::kUnsupported, "'items' as an array (tuple validation)", pointer);
      }
      if (!schema["items"].is_boolean() && !schema["items"].is_object()) {
        return Bad("'items' must be a schema", pointer);
      }
    }
    if (schema.contains("pattern") && !schema["pattern"].is_string()) {
      return Bad("'pattern' must be a string", pointer);
    }
    if (schema.contains("enum") && (!schema["enum"].is_array() || schema["enum"].empty())) {
      return Bad("'enum' must be a non-empty array", pointer);
    }
    return Status::Ok();
  }

  static bool HasType(const json& value, const std::string& type) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    if (type == "integer") {
      if (value.is_number_integer()) return true;
      if (!value.is_number_float()) return false;
      double d = value.get<double>();
      return std::isfinite(d) && d == std::floor(d);
    }
    if (type == "number") return value.is_number();
    if (type == "boolean") return value.is_boolean();
    return value.is_null();
  }

  Status CompileLiterals(uint32_t id, const json& schema, const std::vector<std::string>& types,
                         const std::string& pointer) {
    // enum/const decide the value; beside them only `type` (which filters them) is understood.
    TS_RETURN_IF_ERROR(OnlyAlongside(schema, schema.contains("enum") ? "enum" : "const",
                                     {"type", "enum", "const"}, pointer));
    std::vector<json> values;
    if (schema.contains("enum")) values.assign(schema["enum"].begin(), schema["enum"].end());
    if (schema.contains("const")) {
      if (schema.contains("enum")) {
        bool listed = std::find(values.begin(), values.end(), schema["const"]) != values.end();
        values.clear();
        if (listed) values.push_back(schema["const"]);
      } else {
        values.push_back(schema["const"]);
      }
    }
    Node& node = nodes_[id];
    node.kind = NodeKind::kLiterals;
    size_t bytes = 0;
    for (const json& v : values) {
      bool typed = types.empty();
      for (const std::string& t : types) typed = typed || HasType(v, t);
      if (!typed) continue;
      std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
      // An integral float such as 2.0 is written as 2, which an integer type also accepts.
      if (v.is_number_float() && std::isfinite(v.get<double>()) &&
          v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 1e15) {
        text = std::to_string(static_cast<int64_t>(v.get<double>()));
      }
      bytes += text.size();
      if (bytes > kMaxLiteralBytes) {
        return Error(ErrorCode::kResourceExhausted, "'enum'/'const' values are too large", pointer);
      }
      node.literals.push_back(std::move(text));
    }
    std::sort(node.literals.begin(), node.literals.end());
    node.literals.erase(std::unique(node.literals.begin(), node.literals.end()),
                        node.literals.end());
    return Status::Ok();
  }

  Status CompileTyped(uint32_t id, const std::string& type, const json& schema,
                      const std::string& pointer, int depth) {
    if (type == "object") return CompileObject(id, schema, pointer, depth);
    if (type == "array") return CompileArray(id, schema, pointer, depth);
    if (type == "string") return CompileString(id, schema, pointer);
    if (type == "integer" || type == "number") return CompileNumeric(id, type, schema, pointer);
    Node& node = nodes_[id];
    node.kind = NodeKind::kLiterals;
    node.literals = type == "boolean" ? std::vector<std::string>{"false", "true"}
                                      : std::vector<std::string>{"null"};
    return Status::Ok();
  }

  Status CompileObject(uint32_t id, const json& schema, const std::string& pointer, int depth) {
    std::set<std::string> required;
    if (schema.contains("required")) {
      for (const json& name : schema["required"]) required.insert(name.get<std::string>());
    }
    std::vector<Property> props;
    if (schema.contains("properties")) {
      // ordered_json keeps the schema's member order: properties are generated in that order.
      for (auto it = schema["properties"].begin(); it != schema["properties"].end(); ++it) {
        Property p;
        p.key_json = json(it.key()).dump(-1, ' ', false, json::error_handler_t::replace);
        p.required = required.erase(it.key()) > 0;
        TS_ASSIGN_OR_RETURN(
            p.node, CompileAt(it.value(), pointer + "/properties/" + EscapePointerToken(it.key()),
                              depth + 1));
        props.push_back(std::move(p));
      }
    }
    if (!required.empty()) {
      return Bad("required property '" + *required.begin() + "' is not in 'properties'", pointer);
    }
    int32_t free_value = -1;
    if (props.empty()) {
      const json* extra =
          schema.contains("additionalProperties") ? &schema["additionalProperties"] : nullptr;
      if (extra == nullptr || (extra->is_boolean() && extra->get<bool>())) {
        free_value = static_cast<int32_t>(any_);
      } else if (extra->is_object()) {
        TS_ASSIGN_OR_RETURN(uint32_t v,
                            CompileAt(*extra, pointer + "/additionalProperties", depth + 1));
        free_value = static_cast<int32_t>(v);
      }
    }
    Node& node = nodes_[id];
    node.kind = NodeKind::kObject;
    node.props = std::move(props);
    node.free_value = free_value;
    return Status::Ok();
  }

  static Expected<std::pair<uint32_t, uint32_t>> Counts(const json& schema, const char* min_key,
                                                        const char* max_key,
                                                        const std::string& pointer) {
    uint64_t lo = schema.contains(min_key) ? schema[min_key].get<uint64_t>() : 0;
    uint64_t hi = schema.contains(max_key) ? schema[max_key].get<uint64_t>() : UINT32_MAX;
    if (lo > kMaxMinCount) {
      return Error(ErrorCode::kResourceExhausted,
                   std::string("'") + min_key + "' larger than " + std::to_string(kMaxMinCount),
                   pointer);
    }
    if (lo > hi) {
      return Bad(std::string("'") + min_key + "' is greater than '" + max_key + "'", pointer);
    }
    return std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(lo),
                                         static_cast<uint32_t>(std::min<uint64_t>(hi, UINT32_MAX)));
  }

  Status CompileArray(uint32_t id, const json& schema, const std::string& pointer, int depth) {
    TS_ASSIGN_OR_RETURN(auto counts, Counts(schema, "minItems", "maxItems", pointer));
    int32_t item = static_cast<int32_t>(any_);
    if (schema.contains("items")) {
      const json& items = schema["items"];
      if (items.is_boolean()) {
        item = items.get<bool>() ? static_cast<int32_t>(any_) : -1;
      } else {
        TS_ASSIGN_OR_RETURN(uint32_t v, CompileAt(items, pointer + "/items", depth + 1));
        item = static_cast<int32_t>(v);
      }
    }
    Node& node = nodes_[id];
    node.kind = NodeKind::kArray;
    node.item = item;
    node.min_items = counts.first;
    node.max_items = counts.second;
    return Status::Ok();
  }

  Status CompileString(uint32_t id, const json& schema, const std::string& pointer) {
    TS_ASSIGN_OR_RETURN(auto counts, Counts(schema, "minLength", "maxLength", pointer));
    int32_t pattern = -1;
    if (schema.contains("pattern")) {
      if (schema.contains("minLength")) {
        return Error(ErrorCode::kUnsupported, "'minLength' together with 'pattern'", pointer);
      }
      auto dfa = CompilePattern(schema["pattern"].get<std::string>());
      if (!dfa) {
        return Status(dfa.status().code(),
                      "schema: 'pattern' " + dfa.status().message() + " at " + Where(pointer));
      }
      if (dfa->dist_to_accept[0] > counts.second) {
        return Bad("'pattern' has no match within 'maxLength'", pointer);
      }
      patterns_.push_back(std::move(dfa).value());
      pattern = static_cast<int32_t>(patterns_.size() - 1);
    }
    Node& node = nodes_[id];
    node.kind = NodeKind::kString;
    node.min_len = counts.first;
    node.max_len = counts.second;
    node.pattern = pattern;
    return Status::Ok();
  }

  Status CompileNumeric(uint32_t id, const std::string& type, const json& schema,
                        const std::string& pointer) {
    Node& node = nodes_[id];
    node.kind = type == "integer" ? NodeKind::kInteger : NodeKind::kNumber;
    auto get = [&](const char* k) { return schema[k].get<double>(); };
    // The tighter of the inclusive and exclusive bound on each side.
    auto take_lo = [&](double v, bool exclusive) {
      if (!node.has_lo || v > node.lo || (v == node.lo && exclusive)) {
        node.lo = v, node.lo_exclusive = exclusive, node.has_lo = true;
      }
    };
    auto take_hi = [&](double v, bool exclusive) {
      if (!node.has_hi || v < node.hi || (v == node.hi && exclusive)) {
        node.hi = v, node.hi_exclusive = exclusive, node.has_hi = true;
      }
    };
    if (schema.contains("minimum")) take_lo(get("minimum"), false);
    if (schema.contains("exclusiveMinimum")) take_lo(get("exclusiveMinimum"), true);
    if (schema.contains("maximum")) take_hi(get("maximum"), false);
    if (schema.contains("exclusiveMaximum")) take_hi(get("exclusiveMaximum"), true);
    node.bounded = node.has_lo || node.has_hi;
    const double limit = static_cast<double>(kIntLimit);
    double int_lo = -limit, int_hi = limit;
    if (node.has_lo) int_lo = node.lo_exclusive ? std::floor(node.lo) + 1 : std::ceil(node.lo);
    if (node.has_hi) int_hi = node.hi_exclusive ? std::ceil(node.hi) - 1 : std::floor(node.hi);
    int_lo = std::max(int_lo, -limit);
    int_hi = std::min(int_hi, limit);
    if (int_lo > int_hi) {
      if (node.has_lo && node.has_hi &&
          (node.lo > node.hi || (node.lo == node.hi && (node.lo_exclusive || node.hi_exclusive)))) {
        return Bad("'minimum' is greater than 'maximum'", pointer);
      }
      return Error(ErrorCode::kUnsupported,
                   type == "integer" ? std::string("'minimum'/'maximum' admit no integer")
                                     : std::string("number bounds ('minimum'/'maximum') that "
                                                   "contain no integer"),
                   pointer);
    }
    node.int_lo = static_cast<int64_t>(int_lo);
    node.int_hi = static_cast<int64_t>(int_hi);
    static_assert(kMaxIntDigits == 18);
    return Status::Ok();
  }

  // Replaces every union's branches by the non-union nodes they reach (so the matcher never
  // expands a union into a union, and cycles of $ref aliases disappear).
  void FlattenUnions() {
    for (uint32_t id = 0; id < nodes_.size(); ++id) {
      if (nodes_[id].kind != NodeKind::kUnion) continue;
      std::vector<uint32_t> leaves, todo = nodes_[id].branches;
      std::set<uint32_t> seen = {id};
      while (!todo.empty()) {
        uint32_t b = todo.back();
        todo.pop_back();
        if (!seen.insert(b).second) continue;
        if (nodes_[b].kind == NodeKind::kUnion) {
          todo.insert(todo.end(), nodes_[b].branches.begin(), nodes_[b].branches.end());
        } else {
          leaves.push_back(b);
        }
      }
      std::sort(leaves.begin(), leaves.end());
      flattened_[id] = std::move(leaves);
    }
    for (auto& [id, leaves] : flattened_) nodes_[id].branches = std::move(leaves);
    // References to a union of one alternative go straight to it.
    auto direct = [&](int32_t* ref) {
      if (*ref >= 0 && nodes_[*ref].kind == NodeKind::kUnion && nodes_[*ref].branches.size() == 1) {
        *ref = static_cast<int32_t>(nodes_[*ref].branches[0]);
      }
    };
    for (Node& node : nodes_) {
      direct(&node.item);
      direct(&node.free_value);
      for (Property& p : node.props) {
        int32_t ref = static_cast<int32_t>(p.node);
        direct(&ref);
        p.node = static_cast<uint32_t>(ref);
      }
    }
  }

  uint32_t Frames(int32_t id) const { return id < 0 ? kUnsatisfiable : nodes_[id].min_frames; }

  // Fewest frames to complete each node: a fixpoint from "unsatisfiable" downwards. Values
  // beyond kMaxFrames count as unsatisfiable, which bounds the number of rounds.
  void ComputeMinFrames() {
    auto plus_one = [](uint32_t v) { return v >= kMaxFrames ? kUnsatisfiable : v + 1; };
    bool changed = true;
    while (changed) {
      changed = false;
      for (Node& node : nodes_) {
        uint32_t v = kUnsatisfiable;
        switch (node.kind) {
          case NodeKind::kRoot:
            v = plus_one(Frames(node.item));
            break;
          case NodeKind::kObject: {
            uint32_t deepest = 0;
            for (const Property& p : node.props) {
              if (p.required) deepest = std::max(deepest, nodes_[p.node].min_frames);
            }
            v = deepest == kUnsatisfiable ? kUnsatisfiable : plus_one(deepest);
            break;
          }
          case NodeKind::kArray:
            v = node.min_items == 0 ? 1 : plus_one(Frames(node.item));
            break;
          case NodeKind::kString:
          case NodeKind::kInteger:
          case NodeKind::kNumber:
            v = 1;
            break;
          case NodeKind::kLiterals:
            v = node.literals.empty() ? kUnsatisfiable : 1;
            break;
          case NodeKind::kUnion:
            for (uint32_t b : node.branches) v = std::min(v, nodes_[b].min_frames);
            break;
        }
        if (v < node.min_frames) {
          node.min_frames = v;
          changed = true;
        }
      }
    }
  }

  const json& document_;
  std::vector<Node> nodes_;
  std::vector<grammar_internal::PatternDfa> patterns_;
  std::map<std::string, uint32_t> memo_;
  std::map<uint32_t, std::vector<uint32_t>> flattened_;
  uint32_t any_ = 0, free_object_ = 0, free_string_ = 0;
};

}  // namespace

const nlohmann::ordered_json* grammar_internal::ResolvePointer(const nlohmann::ordered_json& root,
                                                               std::string_view pointer) {
  const nlohmann::ordered_json* node = &root;
  size_t pos = 0;
  while (pos < pointer.size()) {
    if (pointer[pos] != '/') return nullptr;
    size_t end = pointer.find('/', pos + 1);
    if (end == std::string_view::npos) end = pointer.size();
    std::string token;
    for (size_t i = pos + 1; i < end; ++i) {
      if (pointer[i] == '~' && i + 1 < end && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
        token += pointer[++i] == '0' ? '~' : '/';
      } else {
        token += pointer[i];
      }
    }
    if (node->is_object() && node->contains(token)) {
      node = &(*node)[token];
    } else if (node->is_array() && !token.empty() &&
               token.find_first_not_of("0123456789") == std::string::npos && token.size() < 9 &&
               std::stoul(token) < node->size()) {
      node = &(*node)[std::stoul(token)];
    } else {
      return nullptr;
    }
    pos = end;
  }
  return node;
}

Expected<std::shared_ptr<const Grammar>> CompileJsonSchema(const nlohmann::ordered_json& schema) {
  return Compiler(schema).Compile();
}

std::shared_ptr<const Grammar> JsonObjectGrammar() {
  static const std::shared_ptr<const Grammar> grammar = Compiler(json()).JsonObject();
  return grammar;
}

Expected<std::shared_ptr<const Grammar>> CompileResponseFormat(
    const nlohmann::ordered_json& format) {
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string()) {
    return InvalidArgument("response_format must be an object with a string 'type'");
  }
  const std::string type = format["type"].get<std::string>();
  if (type == "json_object") return JsonObjectGrammar();
  if (type != "json_schema") {
    return InvalidArgument("response_format type '" + type +
                           "' is not supported (json_object, json_schema)");
  }
  if (!format.contains("json_schema") || !format["json_schema"].is_object()) {
    return InvalidArgument("response_format json_schema must be an object");
  }
  const json& spec = format["json_schema"];
  if (!spec.contains("name") || !spec["name"].is_string()) {
    return InvalidArgument("response_format json_schema.name must be a string");
  }
  if (spec.contains("strict") && !spec["strict"].is_boolean() && !spec["strict"].is_null()) {
    return InvalidArgument("response_format json_schema.strict must be a boolean");
  }
  if (!spec.contains("schema")) return JsonObjectGrammar();  // OpenAI: any JSON object
  if (!spec["schema"].is_object()) {
    return InvalidArgument("response_format json_schema.schema must be an object");
  }
  return CompileJsonSchema(spec["schema"]);
}

}  // namespace tessera
