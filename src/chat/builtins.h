// Built-in filters, tests, attribute/method access and sequence helpers of the interpreter,
// with Python semantics. Internal to tessera_chat; failures throw TemplateError.
//
//   Runtime rt(limits);
//   Value upper = CallFilter(rt, "upper", Value::String("hi"), args);   // "HI"
//   bool even = CallTest(rt, "even", Value::Int(4), args);              // true
#pragma once

#include <string>
#include <vector>

#include "chat/jinja.h"
#include "chat/value.h"

namespace tessera::jinja {

// Counters shared by the interpreter and the built-ins.
class Runtime {
 public:
  explicit Runtime(const Limits& limits) : limits_(limits) {}
  const Limits& limits() const { return limits_; }
  void Step(size_t n = 1) {
    steps_ += n;
    if (steps_ > limits_.max_steps) {
      Fail("template exceeded the step limit (" + std::to_string(limits_.max_steps) +
           "); it may loop forever");
    }
  }
  // Refuses strings larger than the output limit before they are built.
  void CheckStringSize(size_t bytes) const {
    if (bytes > limits_.max_output_bytes) {
      Fail("string of " + std::to_string(bytes) + " bytes exceeds the output limit (" +
           std::to_string(limits_.max_output_bytes) + " bytes)");
    }
  }
  void CheckItems(size_t n) const {
    if (n > limits_.max_items) {
      Fail("collection of " + std::to_string(n) + " items exceeds the limit (" +
           std::to_string(limits_.max_items) + ")");
    }
  }

 private:
  Limits limits_;
  size_t steps_ = 0;
};

bool HasFilter(const std::string& name);
bool HasTest(const std::string& name);
Value CallFilter(Runtime& rt, const std::string& name, const Value& input, CallArgs& args);
bool CallTest(Runtime& rt, const std::string& name, const Value& input, CallArgs& args);

// obj.name: dict keys, namespace attributes, and bound str/dict/list methods.
Value GetAttribute(Runtime& rt, const Value& obj, const std::string& name);
// obj[key], falling back to an attribute for string keys like Jinja2.
Value GetItem(Runtime& rt, const Value& obj, const Value& key);
// obj[start:stop:step] for lists and strings (null parts are Python's None).
Value SliceValue(Runtime& rt, const Value& obj, const Value* start, const Value* stop,
                 const Value* step);
// for x in v: list items, dict keys, string characters; undefined is empty.
std::vector<Value> IterateValue(const Value& v);
// item in container.
bool ContainsValue(const Value& container, const Value& item);
// len(v) for strings (code points), lists and dicts.
int64_t LengthOf(const Value& v);

// Binds call arguments to parameter names; throws on unknown keywords or too many values.
// A missing argument is returned as an undefined Value with is_missing set.
struct BoundArgs {
  std::vector<Value> values;
  std::vector<bool> present;
  Value Get(size_t i, Value fallback) const { return present[i] ? values[i] : std::move(fallback); }
};
BoundArgs BindArgs(const std::string& function, CallArgs& args,
                   const std::vector<std::string>& names);

// Helpers shared with the interpreter.
std::vector<std::string> SplitCodepoints(const std::string& s);
std::string PythonUpper(const std::string& s);
std::string PythonLower(const std::string& s);

}  // namespace tessera::jinja
