// Attribute and item access, slicing, iteration and the Python str/dict/list methods that
// chat templates call (message.content.startswith(...), d.items(), ...).

#include <algorithm>
#include <cstdlib>
#include <set>

#include "base/utf8.h"
#include "chat/builtins.h"
#include "chat/lexer.h"

namespace tessera::jinja {

namespace {

const std::string& RequireString(const std::string& fn, const Value& v) {
  if (!v.is_string()) Fail(fn + "() argument must be str, not " + v.TypeName());
  return v.str();
}

int64_t RequireInt(const std::string& fn, const Value& v) {
  if (!v.is_int() && !v.is_bool()) Fail(fn + "() argument must be int, not " + v.TypeName());
  return v.as_int();
}

// The code points of `chars` (for strip(chars)).
std::set<char32_t> CodepointSet(const std::string& chars) {
  std::set<char32_t> set;
  size_t pos = 0;
  char32_t cp;
  while (pos < chars.size() && NextCodepoint(chars, &pos, &cp)) set.insert(cp);
  return set;
}

std::string StripChars(const std::string& s, const Value& chars, bool left, bool right) {
  if (chars.is_none() || chars.is_undefined()) {
    return std::string(StripPythonSpace(s, left, right));
  }
  std::set<char32_t> set = CodepointSet(RequireString("strip", chars));
  std::vector<std::string> cps = SplitCodepoints(s);
  size_t begin = 0, end = cps.size();
  auto in_set = [&](const std::string& c) {
    size_t pos = 0;
    char32_t cp;
    NextCodepoint(c, &pos, &cp);
    return set.count(cp) > 0;
  };
  if (left) {
    while (begin < end && in_set(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && in_set(cps[end - 1])) --end;
  }
  std::string out;
  for (size_t i = begin; i < end; ++i) out += cps[i];
  return out;
}

// str.split(sep=None, maxsplit=-1).
Value SplitString(Runtime& rt, const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<Value> parts;
  if (sep.is_none() || sep.is_undefined()) {
    // Runs of whitespace separate; leading/trailing whitespace gives no empty parts.
    std::vector<std::string> cps = SplitCodepoints(s);
    size_t i = 0;
    auto is_space = [&](size_t k) {
      size_t pos = 0;
      char32_t cp;
      NextCodepoint(cps[k], &pos, &cp);
      return IsPythonSpace(cp);
    };
    while (true) {
      while (i < cps.size() && is_space(i)) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        std::string rest;
        for (size_t k = i; k < cps.size(); ++k) rest += cps[k];
        rest = std::string(StripPythonSpace(rest, false, true));
        parts.push_back(Value::String(rest));
        break;
      }
      std::string word;
      while (i < cps.size() && !is_space(i)) word += cps[i++];
      parts.push_back(Value::String(word));
      rt.CheckItems(parts.size());
    }
    return Value::List(std::move(parts));
  }
  const std::string& separator = RequireString("split", sep);
  if (separator.empty()) Fail("empty separator");
  size_t pos = 0;
  while (true) {
    size_t at = s.find(separator, pos);
    if (at == std::string::npos ||
        (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
      parts.push_back(Value::String(s.substr(pos)));
      break;
    }
    parts.push_back(Value::String(s.substr(pos, at - pos)));
    rt.CheckItems(parts.size());
    pos = at + separator.size();
  }
  return Value::List(std::move(parts));
}

std::string ReplaceString(Runtime& rt, const std::string& s, const std::string& old,
                          const std::string& replacement, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    std::vector<std::string> cps = SplitCodepoints(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < cps.size()) out += cps[i];
      rt.CheckStringSize(out.size());
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (true) {
    size_t at = s.find(old, pos);
    if (at == std::string::npos || (count >= 0 && done >= count)) break;
    out.append(s, pos, at - pos);
    out += replacement;
    rt.CheckStringSize(out.size());
    pos = at + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  rt.CheckStringSize(out.size());
  return out;
}

int64_t CodepointIndex(const std::string& s, size_t byte_offset) {
  int64_t n = 0;
  for (size_t i = 0; i < byte_offset && i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::string PythonTitle(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    bool is_alpha = std::isalpha(static_cast<unsigned char>(c));
    if (is_alpha)
      c = prev_cased ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                     : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    prev_cased = is_alpha;
  }
  return out;
}

std::string PythonCapitalize(const std::string& s) {
  std::string out = PythonLower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

// "{} {0} {name}".format(...) with str() conversion; format specs are not supported.
std::string FormatString(Runtime& rt, const std::string& fmt, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t close = fmt.find('}', i);
      if (close == std::string::npos) Fail("single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!") != std::string::npos) {
        Fail("format specifications in str.format() are not supported");
      }
      const Value* v = nullptr;
      if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
        size_t index = field.empty() ? auto_index++ : std::strtoul(field.c_str(), nullptr, 10);
        if (index >= args.positional.size()) Fail("Replacement index out of range for format()");
        v = &args.positional[index];
      } else {
        for (auto& [k, val] : args.keyword) {
          if (k == field) v = &val;
        }
        if (v == nullptr) Fail("format() has no argument named '" + field + "'");
      }
      out += v->ToPythonStr();
      rt.CheckStringSize(out.size());
      i = close;
    } else if (c == '}') {
      Fail("single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

bool AllChars(const std::string& s, int (*pred)(int)) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (c >= 0x80 || !pred(c)) return false;
  }
  return true;
}

Value CallStringMethod(Runtime& rt, const std::string& s, const std::string& name, CallArgs& args) {
  auto bind = [&](const std::vector<std::string>& names) { return BindArgs(name, args, names); };
  if (name == "startswith" || name == "endswith") {
    BoundArgs a = bind({"prefix"});
    if (!a.present[0]) Fail(name + "() takes at least 1 argument");
    std::vector<Value> options =
        a.values[0].is_tuple() ? a.values[0].list().items : std::vector<Value>{a.values[0]};
    for (const Value& o : options) {
      const std::string& p = RequireString(name, o);
      if (p.size() > s.size()) continue;
      if (name == "startswith" ? s.compare(0, p.size(), p) == 0
                               : s.compare(s.size() - p.size(), p.size(), p) == 0) {
        return Value::Bool(true);
      }
    }
    return Value::Bool(false);
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs a = bind({"chars"});
    return Value::String(
        StripChars(s, a.Get(0, Value::None()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    BoundArgs a = bind({"sep", "maxsplit"});
    return SplitString(rt, s, a.Get(0, Value::None()), RequireInt(name, a.Get(1, Value::Int(-1))));
  }
  if (name == "splitlines") {
    bind({});
    std::vector<Value> lines;
    size_t pos = 0;
    while (pos < s.size()) {
      size_t nl = s.find_first_of("\r\n", pos);
      if (nl == std::string::npos) {
        lines.push_back(Value::String(s.substr(pos)));
        break;
      }
      lines.push_back(Value::String(s.substr(pos, nl - pos)));
      pos = nl + ((s[nl] == '\r' && nl + 1 < s.size() && s[nl + 1] == '\n') ? 2 : 1);
    }
    return Value::List(std::move(lines));
  }
  if (name == "replace") {
    BoundArgs a = bind({"old", "new", "count"});
    if (!a.present[0] || !a.present[1]) Fail("replace() takes at least 2 arguments");
    return Value::String(ReplaceString(rt, s, RequireString(name, a.values[0]),
                                       RequireString(name, a.values[1]),
                                       RequireInt(name, a.Get(2, Value::Int(-1)))));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    bind({});
    if (name == "upper") return Value::String(PythonUpper(s));
    if (name == "lower") return Value::String(PythonLower(s));
    if (name == "title") return Value::String(PythonTitle(s));
    return Value::String(PythonCapitalize(s));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    BoundArgs a = bind({"sub"});
    const std::string& sub = RequireString(name, a.Get(0, Value::None()));
    if (name == "count") {
      if (sub.empty()) return Value::Int(LengthOf(Value::String(s)) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(sub); pos != std::string::npos;
           pos = s.find(sub, pos + sub.size())) {
        ++n;
      }
      return Value::Int(n);
    }
    size_t at = name == "rfind" ? s.rfind(sub) : s.find(sub);
    if (at == std::string::npos) {
      if (name == "index") Fail("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(CodepointIndex(s, at));
  }
  if (name == "join") {
    BoundArgs a = bind({"iterable"});
    std::string out;
    bool first = true;
    for (const Value& v : IterateValue(a.Get(0, Value::None()))) {
      if (!first) out += s;
      first = false;
      out += RequireString("join", v);
      rt.CheckStringSize(out.size());
    }
    return Value::String(out);
  }
  if (name == "format") return Value::String(FormatString(rt, s, args));
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" ||
      name == "isupper" || name == "islower") {
    bind({});
    if (name == "isdigit") return Value::Bool(AllChars(s, isdigit));
    if (name == "isalpha") return Value::Bool(AllChars(s, isalpha));
    if (name == "isalnum") return Value::Bool(AllChars(s, isalnum));
    if (name == "isspace")
      return Value::Bool(!s.empty() && StripPythonSpace(s, true, true).empty());
    bool has_cased = false, ok = true;
    for (unsigned char c : s) {
      if (std::isalpha(c)) {
        has_cased = true;
        if (name == "isupper" ? std::islower(c) : std::isupper(c)) ok = false;
      }
    }
    return Value::Bool(has_cased && ok);
  }
  Fail("'str' object has no method '" + name + "'");
}

Value CallDictMethod(Runtime& rt, const Value& d, const std::string& name, CallArgs& args) {
  auto bind = [&](const std::vector<std::string>& names) { return BindArgs(name, args, names); };
  if (name == "get") {
    BoundArgs a = bind({"key", "default"});
    Value key = a.Get(0, Value::None());
    const Value* v = key.is_string() ? d.dict().Find(key.str()) : nullptr;
    return v ? *v : a.Get(1, Value::None());
  }
  bind({});
  std::vector<Value> out;
  rt.Step(d.dict().items.size());
  for (const auto& [k, v] : d.dict().items) {
    if (name == "keys") {
      out.push_back(Value::String(k));
    } else if (name == "values") {
      out.push_back(v);
    } else {
      out.push_back(Value::List({Value::String(k), v}, /*is_tuple=*/true));
    }
  }
  return Value::List(std::move(out));
}

int64_t NormalizeIndex(int64_t i, size_t size, bool clamp_insert) {
  int64_t n = static_cast<int64_t>(size);
  if (i < 0) i += n;
  if (clamp_insert) return std::clamp<int64_t>(i, 0, n);
  return i;
}

Value CallListMethod(Runtime& rt, const Value& l, const std::string& name, CallArgs& args) {
  auto bind = [&](const std::vector<std::string>& names) { return BindArgs(name, args, names); };
  auto& items = l.list().items;
  bool mutating = name == "append" || name == "extend" || name == "pop" || name == "insert";
  if (mutating && l.is_tuple()) Fail("'tuple' object has no attribute '" + name + "'");
  if (name == "append") {
    BoundArgs a = bind({"object"});
    rt.CheckItems(items.size() + 1);
    if (a.values[0].is_list() && &a.values[0].list() == &l.list()) {
      Fail("cannot append a list to itself");
    }
    items.push_back(a.Get(0, Value::None()));
    return Value::None();
  }
  if (name == "extend") {
    BoundArgs a = bind({"iterable"});
    std::vector<Value> more = IterateValue(a.Get(0, Value::None()));
    rt.CheckItems(items.size() + more.size());
    items.insert(items.end(), more.begin(), more.end());
    return Value::None();
  }
  if (name == "insert") {
    BoundArgs a = bind({"index", "object"});
    rt.CheckItems(items.size() + 1);
    int64_t i = NormalizeIndex(RequireInt(name, a.Get(0, Value::Int(0))), items.size(), true);
    items.insert(items.begin() + i, a.Get(1, Value::None()));
    return Value::None();
  }
  if (name == "pop") {
    BoundArgs a = bind({"index"});
    if (items.empty()) Fail("pop from empty list");
    int64_t i = NormalizeIndex(RequireInt(name, a.Get(0, Value::Int(-1))), items.size(), false);
    if (i < 0 || i >= static_cast<int64_t>(items.size())) Fail("pop index out of range");
    Value v = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "index" || name == "count") {
    BoundArgs a = bind({"value"});
    Value needle = a.Get(0, Value::None());
    int64_t count = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (ValuesEqual(items[i], needle)) {
        if (name == "index") return Value::Int(static_cast<int64_t>(i));
        ++count;
      }
    }
    if (name == "index") Fail(needle.ToPythonRepr() + " is not in list");
    return Value::Int(count);
  }
  Fail("'list' object has no method '" + name + "'");
}

bool IsStringMethod(const std::string& n) {
  static const std::set<std::string> k = {
      "startswith", "endswith", "strip",   "lstrip",  "rstrip",  "split",
      "splitlines", "replace",  "upper",   "lower",   "title",   "capitalize",
      "find",       "rfind",    "index",   "count",   "join",    "format",
      "isdigit",    "isalpha",  "isalnum", "isspace", "isupper", "islower"};
  return k.count(n) > 0;
}
bool IsDictMethod(const std::string& n) {
  return n == "get" || n == "items" || n == "keys" || n == "values";
}
bool IsListMethod(const std::string& n) {
  return n == "append" || n == "extend" || n == "insert" || n == "pop" || n == "index" ||
         n == "count";
}

}  // namespace

std::vector<std::string> SplitCodepoints(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    char32_t cp;
    if (!NextCodepoint(s, &pos, &cp) || pos == start) pos = start + 1;
    out.push_back(s.substr(start, pos - start));
  }
  return out;
}

std::string PythonUpper(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string PythonLower(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

BoundArgs BindArgs(const std::string& function, CallArgs& args,
                   const std::vector<std::string>& names) {
  BoundArgs bound;
  bound.values.resize(names.size());
  bound.present.assign(names.size(), false);
  if (args.positional.size() > names.size()) {
    Fail(function + "() takes at most " + std::to_string(names.size()) + " argument(s) (" +
         std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    bound.values[i] = std::move(args.positional[i]);
    bound.present[i] = true;
  }
  for (auto& [key, value] : args.keyword) {
    auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) Fail(function + "() got an unexpected keyword argument '" + key + "'");
    size_t i = static_cast<size_t>(it - names.begin());
    if (bound.present[i]) Fail(function + "() got multiple values for argument '" + key + "'");
    bound.values[i] = std::move(value);
    bound.present[i] = true;
  }
  return bound;
}

int64_t LengthOf(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString: {
      int64_t n = 0;
      for (unsigned char c : v.str()) {
        if ((c & 0xC0) != 0x80) ++n;
      }
      return n;
    }
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list().items.size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().items.size());
    case Value::Kind::kUndefined:
      return 0;
    default:
      Fail("object of type '" + v.TypeName() + "' has no len()");
  }
}

Value GetAttribute(Runtime& rt, const Value& obj, const std::string& name) {
  (void)rt;
  auto bound = [&](auto call) {
    Value self = obj;
    return Value::Callable(
        name, [self, name, call, &rt](CallArgs& args) { return call(rt, self, name, args); });
  };
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      Fail(obj.str().empty() ? "attribute '" + name + "' of an undefined value"
                             : obj.str() + "; cannot read its attribute '" + name + "'");
    case Value::Kind::kDict: {
      if (!obj.is_namespace() && IsDictMethod(name)) {
        return bound([](Runtime& r, const Value& self, const std::string& n, CallArgs& a) {
          return CallDictMethod(r, self, n, a);
        });
      }
      const Value* v = obj.dict().Find(name);
      if (v) return *v;
      return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + name + "'");
    }
    case Value::Kind::kString:
      if (IsStringMethod(name)) {
        return bound([](Runtime& r, const Value& self, const std::string& n, CallArgs& a) {
          return CallStringMethod(r, self.str(), n, a);
        });
      }
      break;
    case Value::Kind::kList:
      if (IsListMethod(name)) {
        return bound([](Runtime& r, const Value& self, const std::string& n, CallArgs& a) {
          return CallListMethod(r, self, n, a);
        });
      }
      break;
    default:
      break;
  }
  return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + name + "'");
}

Value GetItem(Runtime& rt, const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      Fail(obj.str().empty() ? "cannot subscript an undefined value"
                             : obj.str() + "; cannot subscript it");
    case Value::Kind::kDict: {
      std::string k = key.is_string() ? key.str() : key.ToPythonStr();
      if (const Value* v = obj.dict().Find(k)) return *v;
      break;
    }
    case Value::Kind::kList:
    case Value::Kind::kString:
      if (key.is_int() || key.is_bool()) {
        int64_t n = LengthOf(obj);
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) {
          return Value::Undefined(obj.TypeName() + " index " + std::to_string(key.as_int()) +
                                  " out of range");
        }
        if (obj.is_list()) return obj.list().items[static_cast<size_t>(i)];
        Value one = Value::Int(i), next = Value::Int(i + 1);
        return SliceValue(rt, obj, &one, &next, nullptr);
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return GetAttribute(rt, obj, key.str());
  return Value::Undefined("'" + obj.TypeName() + " object' has no item " + key.ToPythonRepr());
}

Value SliceValue(Runtime& rt, const Value& obj, const Value* start, const Value* stop,
                 const Value* step) {
  if (!obj.is_list() && !obj.is_string()) {
    if (obj.is_undefined()) GetItem(rt, obj, Value::None());  // throws the undefined error
    std::string message = obj.TypeName();
    message.insert(0, 1, '\'');
    message += "' object is not subscriptable";
    Fail(std::move(message));
  }
  auto as_index = [](const Value* v, const char* what) -> std::optional<int64_t> {
    if (v == nullptr || v->is_none()) return std::nullopt;
    if (!v->is_int() && !v->is_bool()) Fail(std::string("slice ") + what + " must be an integer");
    return v->as_int();
  };
  std::optional<int64_t> a = as_index(start, "start"), b = as_index(stop, "stop"),
                         c = as_index(step, "step");
  int64_t st = c.value_or(1);
  if (st == 0) Fail("slice step cannot be zero");
  std::vector<std::string> cps;
  if (obj.is_string()) cps = SplitCodepoints(obj.str());
  int64_t n = obj.is_string() ? static_cast<int64_t>(cps.size())
                              : static_cast<int64_t>(obj.list().items.size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t lo = adjust(a, st < 0 ? n - 1 : 0);
  int64_t hi = adjust(b, st < 0 ? -1 : n);
  std::vector<Value> items;
  std::string text;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
    if (obj.is_string()) {
      text += cps[static_cast<size_t>(i)];
    } else {
      items.push_back(obj.list().items[static_cast<size_t>(i)]);
    }
  }
  rt.Step(1 + items.size() + text.size() / 64);
  if (obj.is_string()) return Value::String(std::move(text));
  return Value::List(std::move(items), obj.is_tuple());
}

std::vector<Value> IterateValue(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.list().items;
    case Value::Kind::kDict: {
      if (v.is_namespace()) break;
      std::vector<Value> keys;
      keys.reserve(v.dict().items.size());
      for (const auto& [k, val] : v.dict().items) keys.push_back(Value::String(k));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (auto& c : SplitCodepoints(v.str())) chars.push_back(Value::String(std::move(c)));
      return chars;
    }
    default:
      break;
  }
  Fail("'" + v.TypeName() + "' object is not iterable");
}

bool ContainsValue(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        Fail("'in <string>' requires string as left operand, not " + item.TypeName());
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.list().items) {
        if (ValuesEqual(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (container.is_namespace()) break;
      return item.is_string() && container.dict().Find(item.str()) != nullptr;
    default:
      break;
  }
  Fail("argument of type '" + container.TypeName() + "' is not iterable");
}

}  // namespace tessera::jinja
