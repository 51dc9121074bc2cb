#include "schema_validator.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace tessera::test {
namespace {

// JSON Schema's `pattern`: an ECMA-262 regular expression found anywhere in the string
// (unanchored), checked with PCRE2, an engine independent of the grammar's own automaton.
bool PatternFound(const std::string& pattern, const std::string& text) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                 PCRE2_UTF, &error, &offset, nullptr);
  if (re == nullptr) return false;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  const int rc =
      pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return rc >= 0;
}

using nlohmann::json;

bool Fail(std::string* why, const std::string& what) {
  *why = what;
  return false;
}

size_t Codepoints(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool IsType(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

const json* Resolve(const json& root, const std::string& ref) {
  const json* node = &root;
  std::string rest = ref.substr(1);
  size_t pos = 0;
  while (pos < rest.size()) {
    size_t end = rest.find('/', pos + 1);
    if (end == std::string::npos) end = rest.size();
    std::string key = rest.substr(pos + 1, end - pos - 1);
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
    pos = end;
  }
  return node;
}

}  // namespace

bool ValidateJson(const json& v, const json& schema, const json& root, std::string* why) {
  if (schema.is_boolean()) return schema.get<bool>() || Fail(why, "false schema");
  if (schema.contains("$ref")) {
    const json* target = Resolve(root, schema["$ref"].get<std::string>());
    if (target == nullptr) return Fail(why, "bad $ref");
    return ValidateJson(v, *target, root, why);
  }
  if (schema.contains("type")) {
    const json& t = schema["type"];
    bool ok = false;
    if (t.is_string()) ok = IsType(v, t.get<std::string>());
    for (const json& name : t.is_array() ? t : json::array()) ok = ok || IsType(v, name);
    if (!ok) return Fail(why, "type " + t.dump() + " vs " + v.dump());
  }
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found = found || e == v;
    if (!found) return Fail(why, "not in enum: " + v.dump());
  }
  if (schema.contains("const") && schema["const"] != v) return Fail(why, "not const");
  if (schema.contains("anyOf")) {
    bool any = false;
    std::string ignored;
    for (const json& s : schema["anyOf"]) any = any || ValidateJson(v, s, root, &ignored);
    if (!any) return Fail(why, "no anyOf branch: " + v.dump());
  }
  if (schema.contains("oneOf")) {
    int matches = 0;
    std::string ignored;
    for (const json& s : schema["oneOf"]) matches += ValidateJson(v, s, root, &ignored) ? 1 : 0;
    if (matches != 1) return Fail(why, "oneOf matched " + std::to_string(matches));
  }
  if (v.is_object()) {
    const json props = schema.value("properties", json::object());
    for (const json& name : schema.value("required", json::array())) {
      if (!v.contains(name.get<std::string>())) return Fail(why, "missing " + name.dump());
    }
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props.contains(it.key())) {
        if (!ValidateJson(it.value(), props[it.key()], root, why)) return false;
      } else if (schema.contains("additionalProperties")) {
        if (!ValidateJson(it.value(), schema["additionalProperties"], root, why)) {
          *why = "additional property " + it.key() + ": " + *why;
          return false;
        }
      }
    }
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) {
      return Fail(why, "minItems");
    }
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) {
      return Fail(why, "maxItems");
    }
    if (schema.contains("items")) {
      for (const json& item : v) {
        if (!ValidateJson(item, schema["items"], root, why)) return false;
      }
    }
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (schema.contains("minLength") && Codepoints(s) < schema["minLength"].get<size_t>()) {
      return Fail(why, "minLength: " + v.dump());
    }
    if (schema.contains("maxLength") && Codepoints(s) > schema["maxLength"].get<size_t>()) {
      return Fail(why, "maxLength: " + v.dump());
    }
    if (schema.contains("pattern") && !PatternFound(schema["pattern"].get<std::string>(), s)) {
      return Fail(why, "pattern: " + v.dump());
    }
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (schema.contains("minimum") && d < schema["minimum"].get<double>()) {
      return Fail(why, "minimum: " + v.dump());
    }
    if (schema.contains("maximum") && d > schema["maximum"].get<double>()) {
      return Fail(why, "maximum: " + v.dump());
    }
    if (schema.contains("exclusiveMinimum") && d <= schema["exclusiveMinimum"].get<double>()) {
      return Fail(why, "exclusiveMinimum: " + v.dump());
    }
    if (schema.contains("exclusiveMaximum") && d >= schema["exclusiveMaximum"].get<double>()) {
      return Fail(why, "exclusiveMaximum: " + v.dump());
    }
  }
  return true;
}

}  // namespace tessera::test
