#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/utf8.h"

namespace tessera::jinja {

namespace {
// Values from JSON and nested reprs are bounded so hostile input cannot exhaust the stack.
constexpr int kMaxNesting = 512;
}  // namespace

void Fail(std::string message) {
  throw TemplateError{std::move(message)};
}

Value Value::Undefined(std::string name) {
  Value v;
  v.str_ = std::move(name);
  return v;
}
Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}
Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}
Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}
Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.str_ = std::move(s);
  return v;
}
Value Value::List(std::vector<Value> items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<ListData>();
  v.list_->items = std::move(items);
  v.list_->is_tuple = is_tuple;
  return v;
}
Value Value::Dict() {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<DictData>();
  return v;
}
Value Value::Namespace() {
  Value v = Dict();
  v.dict_->is_namespace = true;
  return v;
}
Value Value::Callable(std::string name, std::function<Value(CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.callable_ = std::make_shared<CallableData>();
  v.callable_->name = std::move(name);
  v.callable_->fn = std::move(fn);
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxNesting) Fail("context JSON is nested too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Float(static_cast<double>(u));
      return Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e, depth + 1));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Dict();
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.dict().Set(it.key(), FromJson(it.value(), depth + 1));
      }
      return d;
    }
    default:
      return None();  // binary and discarded values do not come from parsed text
  }
}

bool Value::is_tuple() const {
  return is_list() && list_->is_tuple;
}
bool Value::is_namespace() const {
  return is_dict() && dict_->is_namespace;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0.0;
    case Kind::kString:
      return !str_.empty();
    case Kind::kList:
      return !list_->items.empty();
    case Kind::kDict:
      return dict_->is_namespace || !dict_->items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return list_->is_tuple ? "tuple" : "list";
    case Kind::kDict:
      return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

std::string FormatPythonFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci looks like "-1.2345e+02": split into sign, digits and exponent.
  bool negative = !sci.empty() && sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -5 + 1 && exponent < 16) {
    // Fixed notation, as Python's repr uses for 1e-4 <= |d| < 1e16.
    if (exponent >= 0) {
      size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() <= int_len) {
        out += digits + std::string(int_len - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, int_len) + "." + digits.substr(int_len);
      }
    } else {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

std::string PythonStringRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

std::string Value::ToPythonStr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return str_;
    default: {
      std::string out;
      AppendRepr(&out, 0);
      return out;
    }
  }
}

std::string Value::ToPythonRepr() const {
  std::string out;
  AppendRepr(&out, 0);
  return out;
}

void Value::AppendRepr(std::string* out, int depth) const {
  if (depth > kMaxNesting) Fail("value is nested too deeply to print");
  switch (kind_) {
    case Kind::kUndefined:
      break;
    case Kind::kNone:
      *out += "None";
      break;
    case Kind::kBool:
      *out += bool_ ? "True" : "False";
      break;
    case Kind::kInt:
      *out += std::to_string(int_);
      break;
    case Kind::kFloat:
      *out += FormatPythonFloat(float_);
      break;
    case Kind::kString:
      *out += PythonStringRepr(str_);
      break;
    case Kind::kList: {
      *out += list_->is_tuple ? '(' : '[';
      for (size_t i = 0; i < list_->items.size(); ++i) {
        if (i) *out += ", ";
        list_->items[i].AppendRepr(out, depth + 1);
      }
      if (list_->is_tuple && list_->items.size() == 1) *out += ',';
      *out += list_->is_tuple ? ')' : ']';
      break;
    }
    case Kind::kDict: {
      if (dict_->is_namespace) *out += "<Namespace ";
      *out += '{';
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) *out += ", ";
        first = false;
        *out += PythonStringRepr(k) + ": ";
        v.AppendRepr(out, depth + 1);
      }
      *out += '}';
      if (dict_->is_namespace) *out += '>';
      break;
    }
    case Kind::kCallable:
      *out += "<function " + callable_->name + ">";
      break;
  }
}

namespace {

// json.dumps string escaping with ensure_ascii=False: only quote, backslash and C0 controls.
void AppendJsonString(std::string* out, std::string_view s) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

void AppendNewlineIndent(std::string* out, int indent, int level) {
  *out += '\n';
  out->append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
}

}  // namespace

std::string Value::ToJson(int indent, bool sort_keys, std::string item_sep,
                          std::string key_sep) const {
  // Python's json.dumps uses ", " between items unless an indent is given, then ",".
  if (item_sep.empty()) item_sep = indent >= 0 ? "," : ", ";
  if (key_sep.empty()) key_sep = ": ";
  std::string out;
  AppendJson(&out, JsonStyle{indent, sort_keys, item_sep, key_sep}, 0);
  return out;
}

void Value::AppendJson(std::string* out, const JsonStyle& style, int level) const {
  if (level > kMaxNesting) Fail("value is nested too deeply for tojson");
  const int indent = style.indent;
  const std::string& item_sep = style.item_sep;
  switch (kind_) {
    case Kind::kNone:
      *out += "null";
      break;
    case Kind::kBool:
      *out += bool_ ? "true" : "false";
      break;
    case Kind::kInt:
      *out += std::to_string(int_);
      break;
    case Kind::kFloat:
      if (std::isnan(float_)) {
        *out += "NaN";
      } else if (std::isinf(float_)) {
        *out += float_ < 0 ? "-Infinity" : "Infinity";
      } else {
        *out += FormatPythonFloat(float_);
      }
      break;
    case Kind::kString:
      AppendJsonString(out, str_);
      break;
    case Kind::kList: {
      if (list_->items.empty()) {
        *out += "[]";
        break;
      }
      *out += '[';
      for (size_t i = 0; i < list_->items.size(); ++i) {
        if (i) *out += item_sep;
        if (indent >= 0) AppendNewlineIndent(out, indent, level + 1);
        list_->items[i].AppendJson(out, style, level + 1);
      }
      if (indent >= 0) AppendNewlineIndent(out, indent, level);
      *out += ']';
      break;
    }
    case Kind::kDict: {
      if (dict_->is_namespace) Fail("Object of type Namespace is not JSON serializable");
      if (dict_->items.empty()) {
        *out += "{}";
        break;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : dict_->items) entries.push_back(&e);
      if (style.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      *out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) *out += item_sep;
        if (indent >= 0) AppendNewlineIndent(out, indent, level + 1);
        AppendJsonString(out, entries[i]->first);
        *out += style.key_sep;
        entries[i]->second.AppendJson(out, style, level + 1);
      }
      if (indent >= 0) AppendNewlineIndent(out, indent, level);
      *out += '}';
      break;
    }
    case Kind::kUndefined:
      Fail("Object of type Undefined is not JSON serializable");
    case Kind::kCallable:
      Fail("Object of type function is not JSON serializable");
  }
}

namespace {

// Values whose last owner is being destroyed, drained by the outermost destructor.
thread_local std::vector<Value>* g_pending_release = nullptr;

void ReleaseIteratively(std::vector<Value>& values) {
  if (g_pending_release != nullptr) {
    for (Value& v : values) g_pending_release->push_back(std::move(v));
    values.clear();
    return;
  }
  std::vector<Value> work = std::move(values);
  g_pending_release = &work;
  while (!work.empty()) {
    Value v = std::move(work.back());
    work.pop_back();
    // v is destroyed here; a container it owned last pushes its children onto `work`.
  }
  g_pending_release = nullptr;
}

}  // namespace

ListData::~ListData() {
  ReleaseIteratively(items);
}

DictData::~DictData() {
  std::vector<Value> values;
  values.reserve(items.size());
  for (auto& kv : items) values.push_back(std::move(kv.second));
  ReleaseIteratively(values);
}

const Value* DictData::Find(const std::string& key) const {
  auto it = index.find(key);
  return it == index.end() ? nullptr : &items[it->second].second;
}

void DictData::Set(const std::string& key, Value value) {
  auto it = index.find(key);
  if (it != index.end()) {
    items[it->second].second = std::move(value);
    return;
  }
  index.emplace(key, items.size());
  items.emplace_back(key, std::move(value));
}

namespace {
bool ValuesEqualAt(const Value& a, const Value& b, int depth);
int CompareValuesAt(const Value& a, const Value& b, int depth);
}  // namespace

bool ValuesEqual(const Value& a, const Value& b) {
  return ValuesEqualAt(a, b, 0);
}
int CompareValues(const Value& a, const Value& b) {
  return CompareValuesAt(a, b, 0);
}

namespace {

bool ValuesEqualAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) Fail("values are nested too deeply to compare");
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      if (&a.list() == &b.list()) return true;
      const auto& x = a.list().items;
      const auto& y = b.list().items;
      if (x.size() != y.size() || a.is_tuple() != b.is_tuple()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!ValuesEqualAt(x[i], y[i], depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (&a.dict() == &b.dict()) return true;
      if (a.is_namespace() || b.is_namespace()) return false;
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !ValuesEqualAt(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::kCallable:
      return &a.callable() == &b.callable();
    default:
      return false;
  }
}

int CompareValuesAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) Fail("values are nested too deeply to compare");
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());  // UTF-8 byte order equals code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.list().items;
    const auto& y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!ValuesEqualAt(x[i], y[i], depth + 1)) return CompareValuesAt(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  Fail("'<' not supported between instances of '" + a.TypeName() + "' and '" + b.TypeName() + "'");
}

}  // namespace

}  // namespace tessera::jinja
