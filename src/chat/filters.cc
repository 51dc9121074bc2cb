// Jinja2's built-in filters and tests, with transformers' tojson (no HTML escaping,
// ensure_ascii=False by default).

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "base/utf8.h"
#include "chat/builtins.h"
#include "chat/lexer.h"

namespace tessera::jinja {

namespace {

using FilterFn = Value (*)(Runtime&, const Value&, CallArgs&);
using TestFn = bool (*)(Runtime&, const Value&, CallArgs&);

std::string ToStr(const Value& v) {
  return v.ToPythonStr();
}

int64_t ArgInt(const std::string& fn, const Value& v) {
  if (!v.is_int() && !v.is_bool()) Fail(fn + ": expected an integer argument, got " + v.TypeName());
  return v.as_int();
}

// json.dumps(ensure_ascii=True) escapes every non-ASCII code point as \uXXXX (surrogate
// pairs above the BMP); only string contents can hold such characters.
std::string EscapeNonAscii(const std::string& json) {
  std::string out;
  size_t pos = 0;
  while (pos < json.size()) {
    size_t start = pos;
    char32_t cp;
    NextCodepoint(json, &pos, &cp);
    if (pos == start) pos = start + 1;
    if (cp < 0x80) {
      out.append(json, start, pos - start);
      continue;
    }
    auto hex = [&](uint32_t u) {
      char buf[16];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u & 0xFFFFu);
      out += buf;
    };
    if (cp >= 0x10000) {
      uint32_t v = static_cast<uint32_t>(cp) - 0x10000;
      hex(0xD800 + (v >> 10));
      hex(0xDC00 + (v & 0x3FF));
    } else {
      hex(static_cast<uint32_t>(cp));
    }
  }
  return out;
}

Value FilterToJson(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  Value indent = a.Get(1, Value::None());
  int indent_n = -1;
  if (indent.is_int())
    indent_n = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 64));
  else if (!indent.is_none())
    Fail("tojson: indent must be an integer or none");
  std::string item_sep, key_sep;
  Value seps = a.Get(2, Value::None());
  if (seps.is_list()) {
    if (seps.list().items.size() != 2 || !seps.list().items[0].is_string() ||
        !seps.list().items[1].is_string()) {
      Fail("tojson: separators must be a pair of strings");
    }
    item_sep = seps.list().items[0].str();
    key_sep = seps.list().items[1].str();
  }
  std::string json = v.ToJson(indent_n, a.Get(3, Value::Bool(false)).Truthy(), item_sep, key_sep);
  rt.CheckStringSize(json.size());
  if (a.Get(0, Value::Bool(false)).Truthy()) json = EscapeNonAscii(json);
  return Value::String(std::move(json));
}

Value FilterTrim(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("trim", args, {"chars"});
  Value chars = a.Get(0, Value::None());
  std::string s = ToStr(v);
  if (chars.is_none()) return Value::String(std::string(StripPythonSpace(s, true, true)));
  CallArgs strip_args{{chars}, {}};
  return GetAttribute(rt, Value::String(s), "strip").callable().fn(strip_args);
}

Value FilterLength(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("length", args, {});
  return Value::Int(LengthOf(v));
}

Value FilterUpper(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("upper", args, {});
  return Value::String(PythonUpper(ToStr(v)));
}
Value FilterLower(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("lower", args, {});
  return Value::String(PythonLower(ToStr(v)));
}

// Jinja2's title: words start after whitespace, '-', '(', '{', '[' or '<'.
Value FilterTitle(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("title", args, {});
  std::string s = ToStr(v), out;
  bool word_start = true;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    bool boundary = std::isspace(u) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (boundary) {
      out += c;
      word_start = true;
    } else {
      out += static_cast<char>(word_start ? std::toupper(u) : std::tolower(u));
      word_start = false;
    }
  }
  return Value::String(out);
}

Value FilterCapitalize(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("capitalize", args, {});
  std::string s = PythonLower(ToStr(v));
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return Value::String(s);
}

Value FilterFirst(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("first", args, {});
  std::vector<Value> items = IterateValue(v);
  if (items.empty()) return Value::Undefined("first() of an empty sequence");
  return items.front();
}

Value FilterLast(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("last", args, {});
  std::vector<Value> items = IterateValue(v);
  if (items.empty()) return Value::Undefined("last() of an empty sequence");
  return items.back();
}

Value AttributePath(Runtime& rt, const Value& v, const Value& attribute) {
  if (attribute.is_int()) return GetItem(rt, v, attribute);
  std::string path = ToStr(attribute);
  Value cur = v;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = GetItem(rt, cur, numeric ? Value::Int(std::atoll(part.c_str())) : Value::String(part));
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

Value FilterJoin(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("join", args, {"d", "attribute"});
  std::string sep = ToStr(a.Get(0, Value::String("")));
  std::string out;
  bool first = true;
  for (const Value& item : IterateValue(v)) {
    if (!first) out += sep;
    first = false;
    out += ToStr(a.present[1] ? AttributePath(rt, item, a.values[1]) : item);
    rt.CheckStringSize(out.size());
  }
  return Value::String(out);
}

Value FilterItems(Runtime& rt, const Value& v, CallArgs& args) {
  BindArgs("items", args, {});
  if (v.is_undefined()) return Value::List({});
  if (!v.is_dict() || v.is_namespace()) Fail("Can only get item pairs from a mapping.");
  CallArgs none;
  return GetAttribute(rt, v, "items").callable().fn(none);
}

Value FilterList(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("list", args, {});
  return Value::List(IterateValue(v));
}

// Arguments after the filter/test name, for map/select/reject.
CallArgs RestArgs(CallArgs& args, size_t skip) {
  CallArgs rest;
  for (size_t i = skip; i < args.positional.size(); ++i)
    rest.positional.push_back(args.positional[i]);
  rest.keyword = args.keyword;
  return rest;
}

Value FilterMap(Runtime& rt, const Value& v, CallArgs& args) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (auto& [k, val] : args.keyword) {
    if (k == "attribute")
      attribute = &val;
    else if (k == "default")
      fallback = &val;
  }
  for (const Value& item : IterateValue(v)) {
    rt.Step();
    if (attribute) {
      Value got = AttributePath(rt, item, *attribute);
      out.push_back(got.is_undefined() && fallback ? *fallback : got);
    } else {
      if (args.positional.empty()) Fail("map: expected a filter name or attribute=");
      CallArgs rest = RestArgs(args, 1);
      out.push_back(CallFilter(rt, ToStr(args.positional[0]), item, rest));
    }
  }
  return Value::List(std::move(out));
}

Value SelectOrReject(Runtime& rt, const Value& v, CallArgs& args, bool by_attribute,
                     bool keep_when) {
  std::vector<Value> out;
  size_t skip = by_attribute ? 1 : 0;
  if (by_attribute && args.positional.empty()) Fail("selectattr/rejectattr: missing attribute");
  for (const Value& item : IterateValue(v)) {
    rt.Step();
    Value subject = by_attribute ? AttributePath(rt, item, args.positional[0]) : item;
    bool result;
    if (args.positional.size() > skip) {
      CallArgs rest = RestArgs(args, skip + 1);
      result = CallTest(rt, ToStr(args.positional[skip]), subject, rest);
    } else {
      result = subject.Truthy();
    }
    if (result == keep_when) out.push_back(item);
  }
  return Value::List(std::move(out));
}

Value FilterSelect(Runtime& rt, const Value& v, CallArgs& a) {
  return SelectOrReject(rt, v, a, false, true);
}
Value FilterReject(Runtime& rt, const Value& v, CallArgs& a) {
  return SelectOrReject(rt, v, a, false, false);
}
Value FilterSelectAttr(Runtime& rt, const Value& v, CallArgs& a) {
  return SelectOrReject(rt, v, a, true, true);
}
Value FilterRejectAttr(Runtime& rt, const Value& v, CallArgs& a) {
  return SelectOrReject(rt, v, a, true, false);
}

Value FilterDefault(Runtime&, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("default", args, {"default_value", "boolean"});
  bool boolean = a.Get(1, Value::Bool(false)).Truthy();
  if (v.is_undefined() || (boolean && !v.Truthy())) return a.Get(0, Value::String(""));
  return v;
}

Value FilterReplace(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("replace", args, {"old", "new", "count"});
  CallArgs method{
      {a.Get(0, Value::String("")), a.Get(1, Value::String("")), a.Get(2, Value::Int(-1))}, {}};
  if (method.positional[2].is_none()) method.positional[2] = Value::Int(-1);
  return GetAttribute(rt, Value::String(ToStr(v)), "replace").callable().fn(method);
}

Value FilterSplit(Runtime& rt, const Value& v, CallArgs& args) {
  return GetAttribute(rt, Value::String(ToStr(v)), "split").callable().fn(args);
}

Value FilterString(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("string", args, {});
  return Value::String(ToStr(v));
}

Value FilterInt(Runtime&, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("int", args, {"default", "base"});
  Value fallback = a.Get(0, Value::Int(0));
  if (v.is_int() || v.is_bool()) return Value::Int(v.as_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double()) || std::fabs(v.as_double()) > 9.2e18) return fallback;
    return Value::Int(static_cast<int64_t>(v.as_double()));
  }
  if (v.is_string()) {
    std::string s(StripPythonSpace(v.str(), true, true));
    int base = static_cast<int>(a.Get(1, Value::Int(10)).as_int());
    if (base < 2 || base > 36) base = 10;
    char* end = nullptr;
    errno = 0;
    long long n = std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && end && *end == '\0' && errno == 0) return Value::Int(n);
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::Int(static_cast<int64_t>(d));
    }
  }
  return fallback;
}

Value FilterFloat(Runtime&, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("float", args, {"default"});
  if (v.is_number()) return Value::Float(v.as_double());
  if (v.is_string()) {
    std::string s(StripPythonSpace(v.str(), true, true));
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value::Float(d);
  }
  return a.Get(0, Value::Float(0.0));
}

Value FilterRound(Runtime&, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("round", args, {"precision", "method"});
  int64_t precision = std::clamp<int64_t>(ArgInt("round", a.Get(0, Value::Int(0))), -20, 20);
  std::string method = ToStr(a.Get(1, Value::String("common")));
  if (!v.is_number()) Fail("round: expected a number, got " + v.TypeName());
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  if (method == "common")
    x = std::nearbyint(x);  // Python's round(): half to even
  else if (method == "floor")
    x = std::floor(x);
  else if (method == "ceil")
    x = std::ceil(x);
  else
    Fail("round: method must be 'common', 'ceil' or 'floor'");
  return Value::Float(x / scale);
}

Value FilterReverse(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("reverse", args, {});
  if (v.is_string()) {
    std::vector<std::string> cps = SplitCodepoints(v.str());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value::String(out);
  }
  std::vector<Value> items = IterateValue(v);
  std::reverse(items.begin(), items.end());
  return Value::List(std::move(items));
}

// Sort key comparison; strings compare case-insensitively unless case_sensitive.
int CompareForSort(const Value& a, const Value& b, bool case_sensitive) {
  if (!case_sensitive && a.is_string() && b.is_string()) {
    return CompareValues(Value::String(PythonLower(a.str())), Value::String(PythonLower(b.str())));
  }
  return CompareValues(a, b);
}

Value FilterDictSort(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) Fail("dictsort: expected a mapping, got " + v.TypeName());
  bool cs = a.Get(0, Value::Bool(false)).Truthy();
  bool by_value = ToStr(a.Get(1, Value::String("key"))) == "value";
  bool reverse = a.Get(2, Value::Bool(false)).Truthy();
  CallArgs none;
  std::vector<Value> pairs = GetAttribute(rt, v, "items").callable().fn(none).list().items;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    int c = CompareForSort(x.list().items[by_value], y.list().items[by_value], cs);
    return reverse ? c > 0 : c < 0;
  });
  return Value::List(std::move(pairs));
}

Value FilterSort(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool reverse = a.Get(0, Value::Bool(false)).Truthy();
  bool cs = a.Get(1, Value::Bool(false)).Truthy();
  std::vector<Value> items = IterateValue(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    keyed.emplace_back(a.present[2] ? AttributePath(rt, item, a.values[2]) : item, item);
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    int c = CompareForSort(x.first, y.first, cs);
    return reverse ? c > 0 : c < 0;
  });
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::List(std::move(out));
}

Value FilterIndent(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("indent", args, {"width", "first", "blank"});
  Value width = a.Get(0, Value::Int(4));
  std::string pad =
      width.is_string()
          ? width.str()
          : std::string(static_cast<size_t>(std::clamp<int64_t>(ArgInt("indent", width), 0, 1024)),
                        ' ');
  bool first = a.Get(1, Value::Bool(false)).Truthy();
  bool blank = a.Get(2, Value::Bool(false)).Truthy();
  CallArgs none;
  std::vector<Value> lines = GetAttribute(rt, Value::String(ToStr(v) + "\n"), "splitlines")
                                 .callable()
                                 .fn(none)
                                 .list()
                                 .items;
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].str();
    if (i > 0) {
      out += '\n';
      if (blank || !line.empty()) out += pad;
    }
    out += line;
    rt.CheckStringSize(out.size());
  }
  if (first) out = pad + out;
  return Value::String(out);
}

Value FilterUnique(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("unique", args, {"case_sensitive", "attribute"});
  bool cs = a.Get(0, Value::Bool(false)).Truthy();
  std::vector<Value> out, seen;
  for (const Value& item : IterateValue(v)) {
    Value key = a.present[1] ? AttributePath(rt, item, a.values[1]) : item;
    if (!cs && key.is_string()) key = Value::String(PythonLower(key.str()));
    bool dup = false;
    for (const Value& s : seen) {
      rt.Step();
      if (ValuesEqual(s, key)) {
        dup = true;
        break;
      }
    }
    if (!dup) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::List(std::move(out));
}

Value FilterAbs(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("abs", args, {});
  if (v.is_float()) return Value::Float(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) Fail("integer overflow in abs");
    return Value::Int(std::llabs(v.as_int()));
  }
  Fail("bad operand type for abs(): '" + v.TypeName() + "'");
}

Value FilterSafe(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("safe", args, {});
  return v;
}

Value FilterEscape(Runtime&, const Value& v, CallArgs& args) {
  BindArgs("escape", args, {});
  std::string out;
  for (char c : ToStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::String(out);
}

Value FilterWordCount(Runtime& rt, const Value& v, CallArgs& args) {
  BindArgs("wordcount", args, {});
  CallArgs none;
  Value words = GetAttribute(rt, Value::String(ToStr(v)), "split").callable().fn(none);
  return Value::Int(static_cast<int64_t>(words.list().items.size()));
}

Value MinMax(Runtime& rt, const Value& v, CallArgs& args, bool want_max) {
  BoundArgs a = BindArgs(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  bool cs = a.Get(0, Value::Bool(false)).Truthy();
  std::vector<Value> items = IterateValue(v);
  if (items.empty()) return Value::Undefined("min/max of an empty sequence");
  size_t best = 0;
  auto key = [&](size_t i) {
    return a.present[1] ? AttributePath(rt, items[i], a.values[1]) : items[i];
  };
  for (size_t i = 1; i < items.size(); ++i) {
    int c = CompareForSort(key(i), key(best), cs);
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}
Value FilterMax(Runtime& rt, const Value& v, CallArgs& a) {
  return MinMax(rt, v, a, true);
}
Value FilterMin(Runtime& rt, const Value& v, CallArgs& a) {
  return MinMax(rt, v, a, false);
}

Value FilterSum(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("sum", args, {"attribute", "start"});
  Value total = a.Get(1, Value::Int(0));
  for (const Value& item : IterateValue(v)) {
    Value x = a.present[0] ? AttributePath(rt, item, a.values[0]) : item;
    if (!x.is_number() || !total.is_number()) Fail("sum: items must be numbers");
    if (x.is_float() || total.is_float()) {
      total = Value::Float(total.as_double() + x.as_double());
    } else {
      int64_t r;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &r)) Fail("integer overflow in sum");
      total = Value::Int(r);
    }
  }
  return total;
}

Value FilterCenter(Runtime& rt, const Value& v, CallArgs& args) {
  BoundArgs a = BindArgs("center", args, {"width"});
  std::string s = ToStr(v);
  int64_t width = ArgInt("center", a.Get(0, Value::Int(80)));
  rt.CheckStringSize(static_cast<size_t>(std::max<int64_t>(width, 0)));
  int64_t len = LengthOf(Value::String(s));
  if (width <= len) return Value::String(s);
  int64_t total = width - len;
  int64_t left = total / 2 + (total & width & 1);  // CPython's centering rule
  return Value::String(std::string(static_cast<size_t>(left), ' ') + s +
                       std::string(static_cast<size_t>(total - left), ' '));
}

const std::map<std::string, FilterFn>& Filters() {
  static const std::map<std::string, FilterFn> filters = {
      {"tojson", FilterToJson},
      {"trim", FilterTrim},
      {"length", FilterLength},
      {"count", FilterLength},
      {"upper", FilterUpper},
      {"lower", FilterLower},
      {"title", FilterTitle},
      {"capitalize", FilterCapitalize},
      {"first", FilterFirst},
      {"last", FilterLast},
      {"join", FilterJoin},
      {"items", FilterItems},
      {"list", FilterList},
      {"map", FilterMap},
      {"select", FilterSelect},
      {"reject", FilterReject},
      {"selectattr", FilterSelectAttr},
      {"rejectattr", FilterRejectAttr},
      {"default", FilterDefault},
      {"d", FilterDefault},
      {"replace", FilterReplace},
      {"split", FilterSplit},
      {"string", FilterString},
      {"int", FilterInt},
      {"float", FilterFloat},
      {"round", FilterRound},
      {"reverse", FilterReverse},
      {"dictsort", FilterDictSort},
      {"sort", FilterSort},
      {"indent", FilterIndent},
      {"unique", FilterUnique},
      {"abs", FilterAbs},
      {"safe", FilterSafe},
      {"e", FilterEscape},
      {"escape", FilterEscape},
      {"forceescape", FilterEscape},
      {"wordcount", FilterWordCount},
      {"max", FilterMax},
      {"min", FilterMin},
      {"sum", FilterSum},
      {"center", FilterCenter},
  };
  return filters;
}

// ---- tests ----

const Value& TestArg(const std::string& name, CallArgs& args) {
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    Fail("test '" + name + "' takes exactly one argument");
  }
  return args.positional[0];
}

bool NoArgs(const char* name, CallArgs& args) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    Fail(std::string("test '") + name + "' takes no arguments");
  }
  return true;
}

bool TestDefined(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("defined", a) && !v.is_undefined();
}
bool TestUndefined(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("undefined", a) && v.is_undefined();
}
bool TestNone(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("none", a) && v.is_none();
}
bool TestString(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("string", a) && v.is_string();
}
bool TestNumber(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("number", a) && v.is_number();
}
bool TestInteger(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("integer", a) && v.is_int();
}
bool TestFloat(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("float", a) && v.is_float();
}
bool TestBoolean(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("boolean", a) && v.is_bool();
}
bool TestMapping(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("mapping", a) && v.is_dict() && !v.is_namespace();
}
bool TestIterable(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("iterable", a) &&
         (v.is_list() || v.is_string() || v.is_undefined() || (v.is_dict() && !v.is_namespace()));
}
bool TestSequence(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("sequence", a) &&
         (v.is_list() || v.is_string() || (v.is_dict() && !v.is_namespace()));
}
bool TestCallable(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("callable", a) && v.is_callable();
}
bool TestTrue(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("true", a) && v.is_bool() && v.as_bool();
}
bool TestFalse(Runtime&, const Value& v, CallArgs& a) {
  return NoArgs("false", a) && v.is_bool() && !v.as_bool();
}
bool TestOdd(Runtime&, const Value& v, CallArgs& a) {
  NoArgs("odd", a);
  if (!v.is_int() && !v.is_bool()) Fail("test 'odd' needs an integer, got " + v.TypeName());
  return v.as_int() % 2 != 0;
}
bool TestEven(Runtime&, const Value& v, CallArgs& a) {
  NoArgs("even", a);
  if (!v.is_int() && !v.is_bool()) Fail("test 'even' needs an integer, got " + v.TypeName());
  return v.as_int() % 2 == 0;
}
bool TestDivisibleBy(Runtime&, const Value& v, CallArgs& a) {
  const Value& n = TestArg("divisibleby", a);
  if (!v.is_number() || !n.is_number()) Fail("test 'divisibleby' needs numbers");
  if (v.is_float() || n.is_float()) {
    if (n.as_double() == 0) Fail("float modulo by zero");
    return std::fmod(v.as_double(), n.as_double()) == 0;
  }
  if (n.as_int() == 0) Fail("integer modulo by zero");
  if (n.as_int() == -1) return true;
  return v.as_int() % n.as_int() == 0;
}
bool TestEq(Runtime&, const Value& v, CallArgs& a) {
  return ValuesEqual(v, TestArg("eq", a));
}
bool TestNe(Runtime&, const Value& v, CallArgs& a) {
  return !ValuesEqual(v, TestArg("ne", a));
}
bool TestLt(Runtime&, const Value& v, CallArgs& a) {
  return CompareValues(v, TestArg("lt", a)) < 0;
}
bool TestLe(Runtime&, const Value& v, CallArgs& a) {
  return CompareValues(v, TestArg("le", a)) <= 0;
}
bool TestGt(Runtime&, const Value& v, CallArgs& a) {
  return CompareValues(v, TestArg("gt", a)) > 0;
}
bool TestGe(Runtime&, const Value& v, CallArgs& a) {
  return CompareValues(v, TestArg("ge", a)) >= 0;
}
bool TestIn(Runtime&, const Value& v, CallArgs& a) {
  return ContainsValue(TestArg("in", a), v);
}
bool TestSameAs(Runtime&, const Value& v, CallArgs& a) {
  const Value& other = TestArg("sameas", a);
  if (v.kind() != other.kind()) return false;
  if (v.is_list()) return &v.list() == &other.list();
  if (v.is_dict()) return &v.dict() == &other.dict();
  return ValuesEqual(v, other);
}
bool TestLowerCase(Runtime&, const Value& v, CallArgs& a) {
  NoArgs("lower", a);
  return v.is_string() && PythonLower(v.str()) == v.str();
}
bool TestUpperCase(Runtime&, const Value& v, CallArgs& a) {
  NoArgs("upper", a);
  return v.is_string() && PythonUpper(v.str()) == v.str();
}

const std::map<std::string, TestFn>& Tests() {
  static const std::map<std::string, TestFn> tests = {
      {"defined", TestDefined},
      {"undefined", TestUndefined},
      {"none", TestNone},
      {"string", TestString},
      {"number", TestNumber},
      {"integer", TestInteger},
      {"float", TestFloat},
      {"boolean", TestBoolean},
      {"mapping", TestMapping},
      {"iterable", TestIterable},
      {"sequence", TestSequence},
      {"callable", TestCallable},
      {"true", TestTrue},
      {"false", TestFalse},
      {"odd", TestOdd},
      {"even", TestEven},
      {"divisibleby", TestDivisibleBy},
      {"equalto", TestEq},
      {"eq", TestEq},
      {"==", TestEq},
      {"ne", TestNe},
      {"!=", TestNe},
      {"lt", TestLt},
      {"lessthan", TestLt},
      {"le", TestLe},
      {"gt", TestGt},
      {"greaterthan", TestGt},
      {"ge", TestGe},
      {"in", TestIn},
      {"sameas", TestSameAs},
      {"lower", TestLowerCase},
      {"upper", TestUpperCase},
  };
  return tests;
}

}  // namespace

bool HasFilter(const std::string& name) {
  return Filters().count(name) > 0;
}
bool HasTest(const std::string& name) {
  return Tests().count(name) > 0;
}

Value CallFilter(Runtime& rt, const std::string& name, const Value& input, CallArgs& args) {
  auto it = Filters().find(name);
  if (it == Filters().end()) Fail("unknown filter '" + name + "'");
  rt.Step();
  return it->second(rt, input, args);
}

bool CallTest(Runtime& rt, const std::string& name, const Value& input, CallArgs& args) {
  auto it = Tests().find(name);
  if (it == Tests().end()) Fail("unknown test '" + name + "'");
  rt.Step();
  return it->second(rt, input, args);
}

}  // namespace tessera::jinja
