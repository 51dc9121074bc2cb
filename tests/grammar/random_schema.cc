#include "random_schema.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessera::test {
namespace {

using nlohmann::json;

class SchemaGenerator {
 public:
  explicit SchemaGenerator(std::mt19937& rng) : rng_(rng) {}

  json Root() {
    json s = Any(0);
    if (!s.is_object()) s = {{"anyOf", json::array({s})}};
    s["$defs"] = {
        {"node",
         {{"type", "object"},
          {"properties",
           {{"v", {{"type", "integer"}, {"minimum", 0}, {"maximum", 9}}},
            {"next", {{"anyOf", json::array({{{"$ref", "#/$defs/node"}}, {{"type", "null"}}})}}},
            {"kids", {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}}}}},
          {"required", json::array({"v"})},
          {"additionalProperties", false}}},
        {"color", {{"enum", json::array({"red", "green", "blue"})}}}};
    return s;
  }

 private:
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng_); }

  json Annotate(json s) {
    if (s.is_object() && Coin(0.2)) s["description"] = "generated";
    if (s.is_object() && Coin(0.05)) s["title"] = "t";
    return s;
  }

  json Any(int depth) {
    int kind = depth >= 3 ? Int(0, 7) : Int(0, 14);
    switch (kind) {
      case 0:
        return Annotate(Typed("string", depth));
      case 1:
        return Annotate(Typed("integer", depth));
      case 2:
        return Annotate(Typed("number", depth));
      case 3:
        return Annotate(Typed("boolean", depth));
      case 4:
        return Annotate(Typed("null", depth));
      case 5:
        return Annotate(Enum());
      case 6:
        return Annotate({{"const", Literal(1)}});
      case 7:
        return Annotate({{"$ref", Coin() ? "#/$defs/color" : "#/$defs/node"}});
      case 8:
      case 9:
        return Annotate(Typed("object", depth));
      case 10:
        return Annotate(Typed("array", depth));
      case 11: {
        json branches = json::array();
        for (int i = Int(1, 3); i > 0; --i) branches.push_back(Any(depth + 1));
        return {{"anyOf", branches}};
      }
      case 12: {  // oneOf with branches of distinct types, so exactly one can match
        std::vector<std::string> types = {"string", "boolean", "null",
                                          "object", "array",   "integer"};
        std::shuffle(types.begin(), types.end(), rng_);
        json branches = json::array();
        for (int i = Int(1, 3); i > 0; --i) branches.push_back(Typed(types[i], depth + 1));
        return {{"oneOf", branches}};
      }
      case 13: {
        json s = Typed("string", depth);
        s["type"] = json::array({"string", "null"});
        if (Coin()) s["type"].push_back("integer");
        return s;
      }
      default:
        return Coin() ? json::object() : json(true);
    }
  }

  json Literal(int depth) {
    switch (Int(0, depth > 0 ? 6 : 4)) {
      case 0:
        return Pick<std::string>({"a", "xyz", "", "é\"q", "tab\t"});
      case 1:
        return Int(-20, 2000);
      case 2:
        return Pick<double>({1.5, -0.25, 3e10});
      case 3:
        return Coin();
      case 4:
        return nullptr;
      case 5:
        return {{"k", Literal(depth - 1)}};
      default:
        return json::array({Literal(depth - 1), Literal(depth - 1)});
    }
  }

  template <typename T>
  T Pick(std::vector<T> options) {
    return options[Int(0, static_cast<int>(options.size()) - 1)];
  }

  json Enum() {
    json values = json::array();
    for (int i = Int(1, 4); i > 0; --i) values.push_back(Literal(1));
    return {{"enum", values}};
  }

  json Typed(const std::string& type, int depth) {
    json s = {{"type", type}};
    if (type == "string") {
      if (Coin(0.3)) {
        s["pattern"] = Pick<std::string>({"^[a-z]{2,4}$", "^\\d{3}-\\d{2}$", "^(foo|bar)+$", "ab",
                                          "^[A-Z][a-z]*$", "^[^@ ]+@[a-z]+\\.com$", "x?y*z",
                                          "^\\w+( \\w+)?$", "^-?\\d+(\\.\\d{1,2})?$"});
      } else {
        int min = Int(0, 3);
        if (Coin()) s["minLength"] = min;
        if (Coin()) s["maxLength"] = min + Int(0, 12);
      }
    } else if (type == "integer") {
      int lo = Int(-50, 50);
      if (Coin()) s[Coin() ? "minimum" : "exclusiveMinimum"] = lo;
      if (Coin()) s[Coin() ? "maximum" : "exclusiveMaximum"] = lo + Int(2, 1000);
    } else if (type == "number") {
      double lo = Int(-50, 50) - 0.5;
      if (Coin()) s[Coin() ? "minimum" : "exclusiveMinimum"] = lo;
      if (Coin()) s[Coin() ? "maximum" : "exclusiveMaximum"] = lo + Int(2, 100) + 0.25;
    } else if (type == "object") {
      static const std::vector<std::string> names = {"a", "b", "name", "x y", "é", "id", "q\"t"};
      json props = json::object();
      json required = json::array();
      if (depth < 3) {
        for (int i = Int(0, 4); i > 0; --i) {
          std::string name = Pick(names);
          props[name] = Any(depth + 1);
          if (Coin(0.6) && std::find(required.begin(), required.end(), name) == required.end()) {
            required.push_back(name);
          }
        }
      }
      if (!props.empty()) s["properties"] = props;
      if (!required.empty()) s["required"] = required;
      int extra = Int(0, 3);
      if (extra == 1) s["additionalProperties"] = false;
      if (extra == 2) s["additionalProperties"] = true;
      if (extra == 3 && props.empty()) s["additionalProperties"] = Typed("integer", depth + 1);
    } else if (type == "array") {
      if (Coin(0.8)) s["items"] = depth < 3 ? Any(depth + 1) : Typed("integer", depth + 1);
      int min = Int(0, 2);
      if (Coin()) s["minItems"] = min;
      if (Coin()) s["maxItems"] = min + Int(0, 3);
    }
    return s;
  }

  std::mt19937& rng_;
};

}  // namespace

json RandomSchema(std::mt19937& rng) {
  return SchemaGenerator(rng).Root();
}

}  // namespace tessera::test
