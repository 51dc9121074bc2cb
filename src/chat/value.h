// Value: the dynamic value type of the Jinja interpreter, with Python semantics for
// truthiness, equality, ordering, str() and repr(), and JSON conversion that keeps key order.
//
//   Value v = Value::FromJson(nlohmann::ordered_json::parse(R"({"a": [1, 2.5]})"));
//   std::string s = v.ToPythonStr();           // "{'a': [1, 2.5]}"
//   bool t = v.Truthy();                       // true: a non-empty dict
//
// Internal to tessera_chat: operations that fail (bad types, limits) throw TemplateError, which
// the public Template API converts to a Status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::jinja {

// Thrown inside the interpreter and caught at the public API. line/column are filled in by the
// innermost expression or statement that was running when it was thrown.
struct TemplateError {
  std::string message;
  int line = 0;
  int column = 0;
  bool raised_by_template = false;  // raise_exception(): message is the template's own text
};

[[noreturn]] void Fail(std::string message);

class Value;
struct ListData;
struct DictData;
struct CallableData;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // undefined
  static Value Undefined(std::string name = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(std::vector<Value> items, bool is_tuple = false);
  static Value Dict();
  static Value Namespace();
  static Value Callable(std::string name, std::function<Value(CallArgs&)> fn);
  static Value FromJson(const nlohmann::ordered_json& j, int depth = 0);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // Python numbers: bool counts as an integer in arithmetic.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_tuple() const;
  bool is_namespace() const;

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return is_bool() ? (bool_ ? 1 : 0) : int_; }
  double as_double() const { return is_float() ? float_ : static_cast<double>(as_int()); }
  const std::string& str() const { return str_; }  // string contents, or undefined's name
  ListData& list() const { return *list_; }
  DictData& dict() const { return *dict_; }
  CallableData& callable() const { return *callable_; }
  long dict_use_count() const { return dict_.use_count(); }
  // In-place updates without building a temporary (the for loop's hot path).
  void AssignInt(int64_t i) {
    if (kind_ > Kind::kFloat) *this = Value();
    kind_ = Kind::kInt;
    int_ = i;
  }
  void AssignBool(bool b) {
    if (kind_ > Kind::kFloat) *this = Value();
    kind_ = Kind::kBool;
    bool_ = b;
  }

  bool Truthy() const;
  std::string ToPythonStr() const;  // str(): what {{ v }} prints
  std::string ToPythonRepr() const;
  std::string TypeName() const;  // Python type name for error messages
  // json.dumps(v, ensure_ascii=False, indent=indent, sort_keys=sort_keys, separators=...);
  // indent < 0 means none; empty separators mean Python's defaults for that indent.
  std::string ToJson(int indent, bool sort_keys, std::string item_sep = {},
                     std::string key_sep = {}) const;

 private:
  void AppendRepr(std::string* out, int depth) const;
  struct JsonStyle {
    int indent;
    bool sort_keys;
    std::string item_sep;
    std::string key_sep;
  };
  void AppendJson(std::string* out, const JsonStyle& style, int level) const;

  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<CallableData> callable_;
};

// Containers release their children iteratively (see value.cc), so destroying a deeply nested
// value built by a hostile template cannot overflow the stack.
struct ListData {
  ListData() = default;
  ListData(const ListData&) = delete;
  ListData& operator=(const ListData&) = delete;
  ~ListData();
  std::vector<Value> items;
  bool is_tuple = false;
};

// An insertion-ordered string-keyed map (Python dict order).
struct DictData {
  DictData() = default;
  DictData(const DictData&) = delete;
  DictData& operator=(const DictData&) = delete;
  ~DictData();
  std::vector<std::pair<std::string, Value>> items;
  std::unordered_map<std::string, size_t> index;
  bool is_namespace = false;

  const Value* Find(const std::string& key) const;
  void Set(const std::string& key, Value value);
};

struct CallableData {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

// Python ==.
bool ValuesEqual(const Value& a, const Value& b);
// Python <, >: returns <0, 0, >0; throws for unorderable types.
int CompareValues(const Value& a, const Value& b);

// Python float repr: 1.0, 0.1, 1e+16, 1.5e-05, inf, nan.
std::string FormatPythonFloat(double d);
// Python repr of a str: 'abc', "it's", with escapes.
std::string PythonStringRepr(std::string_view s);

}  // namespace tessera::jinja
