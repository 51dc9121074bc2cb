#include "grammar/tool_call_schema.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "grammar/grammar.h"

namespace tessera {
namespace {

using ojson = nlohmann::ordered_json;

// A function's parameter schema. None, or an empty schema: no parameters at all (a call's
// arguments are an object; the reply parser reads nothing else as a call).
ojson ParametersOf(const ojson& fn) {
  if (!fn.contains("parameters") || fn["parameters"].is_null() ||
      (fn["parameters"].is_object() && fn["parameters"].empty())) {
    return {{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
  }
  return fn["parameters"];
}

// Whether a parameter schema says its top is an object (a type or properties).
bool DeclaresObject(const ojson& params) {
  if (!params.is_object()) return false;
  if (params.contains("properties")) return true;
  const auto t = params.find("type");
  return t != params.end() && *t == "object";
}

// `schema` moved to `at` (a JSON pointer) of a larger document: its local references
// ("#/$defs/x", "#") point into it there. Values (enum, const, default, examples) are data.
ojson Rebased(const ojson& schema, const std::string& at) {
  if (schema.is_array()) {
    ojson out = ojson::array();
    for (const ojson& v : schema) out.push_back(Rebased(v, at));
    return out;
  }
  if (!schema.is_object()) return schema;
  ojson out = ojson::object();
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& k = it.key();
    if (k == "$ref" && it->is_string() && it->get<std::string>().starts_with("#")) {
      out[k] = "#" + at + it->get<std::string>().substr(1);
    } else if (k == "enum" || k == "const" || k == "default" || k == "examples") {
      out[k] = *it;
    } else {
      out[k] = Rebased(*it, at);
    }
  }
  return out;
}

// One call alternative: {"name": <a const, or an enum of several>, key: <arguments>}.
struct CallAlternative {
  ojson name;
  ojson arguments;
};

// The alternatives as one schema, each one's arguments rebased to where they land.
ojson CallSchema(const std::vector<CallAlternative>& alternatives, std::string_view key_view) {
  const std::string key(key_view);
  ojson out = ojson::array();
  for (size_t i = 0; i < alternatives.size(); ++i) {
    const std::string at =
        (alternatives.size() == 1 ? "" : "/anyOf/" + std::to_string(i)) + "/properties/" + key;
    ojson props = ojson::object();
    props["name"] = alternatives[i].name;
    props[key] = Rebased(alternatives[i].arguments, at);
    out.push_back({{"type", "object"},
                   {"properties", std::move(props)},
                   {"required", {"name", key}},
                   {"additionalProperties", false}});
  }
  if (out.size() == 1) return out[0];
  return {{"anyOf", std::move(out)}};
}

}  // namespace

bool ToolsWellFormed(const ojson& tools) {
  return tools.is_array() && std::all_of(tools.begin(), tools.end(), [](const ojson& t) {
           if (!t.is_object()) return false;
           const auto fn = t.find("function");
           if (fn == t.end() || !fn->is_object()) return false;
           const auto name = fn->find("name");
           return name != fn->end() && name->is_string();
         });
}

ojson ForcedToolCallSchema(const ojson& tools, std::string_view only,
                           std::string_view arguments_key) {
  std::vector<CallAlternative> alternatives;
  for (const ojson& t : tools) {
    const ojson& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    alternatives.push_back({{{"const", name}}, ParametersOf(fn)});
  }
  return CallSchema(alternatives, arguments_key);
}

Expected<ojson> AutoToolCallSchema(const ojson& tools, std::string_view arguments_key) {
  std::vector<CallAlternative> strict, guided;
  ojson free_names = ojson::array();
  for (const ojson& t : tools) {
    const ojson& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    ojson params = ParametersOf(fn);
    if (IsStrictTool(t)) {
      strict.push_back({{{"const", name}}, std::move(params)});
    } else if (DeclaresObject(params) && CompileJsonSchema(params)) {
      guided.push_back({{{"const", name}}, std::move(params)});
    } else {
      free_names.push_back(name);
    }
  }
  const bool loose = !guided.empty() || !free_names.empty();
  if (strict.size() + (loose ? 1 : 0) > kMaxGrammarAlternatives) {
    return InvalidArgument("too many strict functions");
  }
  if (strict.size() + guided.size() + (free_names.empty() ? 0 : 1) > kMaxGrammarAlternatives) {
    for (const CallAlternative& g : guided) free_names.push_back(g.name["const"]);
    guided.clear();
  }
  std::vector<CallAlternative> alternatives = std::move(strict);
  for (CallAlternative& g : guided) alternatives.push_back(std::move(g));
  if (!free_names.empty()) {
    ojson name = free_names.size() == 1 ? ojson{{"const", free_names[0]}}
                                        : ojson{{"enum", std::move(free_names)}};
    alternatives.push_back({std::move(name), {{"type", "object"}}});
  }
  return CallSchema(alternatives, arguments_key);
}

}  // namespace tessera
