#include "server/decision_format.h"

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

bool OnlyKeys(const ojson& o, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : o.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) return false;
  }
  return true;
}

bool IsScalar(const ojson& v) {
  return v.is_string() || v.is_number() || v.is_boolean();
}

std::string DescriptionOf(const ojson& o) {
  auto it = o.find("description");
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

// An option: its value as JSON, and the text it is scored as (a string as itself, any other
// value as its JSON).
worker::DecisionOption Option(const ojson& value, std::string description) {
  return {value.dump(), value.is_string() ? value.get<std::string>() : value.dump(),
          std::move(description)};
}

// The choice one value schema describes: an enum, a oneOf/anyOf of consts, or a boolean.
std::optional<worker::ResponseFormat> ValueChoice(const ojson& v) {
  if (!v.is_object()) return std::nullopt;
  worker::ResponseFormat d;
  d.kind = worker::ResponseFormatKind::kDecision;
  d.question = DescriptionOf(v);
  if (v.contains("enum")) {
    if (!OnlyKeys(v, {"enum", "type", "title", "description"})) return std::nullopt;
    const ojson& values = v["enum"];
    if (!values.is_array()) return std::nullopt;
    for (const ojson& e : values) {
      if (!IsScalar(e)) return std::nullopt;
      d.options.push_back(Option(e, ""));
    }
    return d;
  }
  for (const char* key : {"oneOf", "anyOf"}) {
    if (!v.contains(key)) continue;
    if (!OnlyKeys(v, {key, "type", "title", "description"})) return std::nullopt;
    const ojson& alternatives = v[key];
    if (!alternatives.is_array()) return std::nullopt;
    for (const ojson& a : alternatives) {
      if (!a.is_object() || !a.contains("const") || !IsScalar(a["const"]) ||
          !OnlyKeys(a, {"const", "description", "title", "type"})) {
        return std::nullopt;
      }
      d.options.push_back(Option(a["const"], DescriptionOf(a)));
    }
    return d;
  }
  if (v.value("type", ojson()) == "boolean" && OnlyKeys(v, {"type", "title", "description"})) {
    d.options = {Option(true, ""), Option(false, "")};
    return d;
  }
  return std::nullopt;
}

}  // namespace

std::optional<worker::ResponseFormat> DecisionFormat(const ojson& format) {
  if (!format.is_object() || format.value("type", ojson()) != "json_schema") return std::nullopt;
  auto js = format.find("json_schema");
  if (js == format.end() || !js->is_object()) return std::nullopt;
  auto schema = js->find("schema");
  if (schema == js->end() || !schema->is_object()) return std::nullopt;
  std::optional<worker::ResponseFormat> d = ValueChoice(*schema);
  const ojson& s = *schema;
  if (!d && s.value("type", ojson()) == "object" &&
      OnlyKeys(
          s, {"type", "properties", "required", "additionalProperties", "title", "description"}) &&
      s.contains("properties") && s["properties"].is_object() && s["properties"].size() == 1) {
    const std::string property = s["properties"].begin().key();
    const bool closed =
        !s.contains("additionalProperties") || s["additionalProperties"] == ojson(false);
    const bool required = !s.contains("required") || s["required"] == ojson::array({property});
    if (closed && required) {
      d = ValueChoice(s["properties"].begin().value());
      if (d) {
        d->property = property;
        if (d->question.empty()) d->question = DescriptionOf(s);
      }
    }
  }
  if (d && js->contains("description") && (*js)["description"].is_string()) {
    d->question = (*js)["description"].get<std::string>();  // the question, when given there
  }
  return d;
}

}  // namespace tessera::server
