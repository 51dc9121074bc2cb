#include "format/ordered_json.h"

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera {
namespace {

using ojson = nlohmann::ordered_json;
using Members = ojson::object_t::Container;  // the member vector under nlohmann's ordered_map

// Objects up to this size find a repeated key by scanning their members; past it they build a
// hash index once, so every object costs time linear in its member count.
constexpr size_t kScanMembers = 16;

// Builds the document from nlohmann's SAX events (the parser itself keeps its own state stack,
// so depth costs no recursion here). Each open container is a frame; a value goes into the
// innermost one, which is the only container that grows while it is open, so the frames'
// pointers stay valid.
class OrderedDomBuilder {
 public:
  using number_integer_t = ojson::number_integer_t;
  using number_unsigned_t = ojson::number_unsigned_t;
  using number_float_t = ojson::number_float_t;
  using string_t = ojson::string_t;
  using binary_t = ojson::binary_t;

  OrderedDomBuilder(const JsonParseLimits& limits, std::string_view what)
      : limits_(limits), what_(what) {}

  bool null() { return Put(nullptr); }
  bool boolean(bool v) { return Put(v); }
  bool number_integer(number_integer_t v) { return Put(v); }
  bool number_unsigned(number_unsigned_t v) { return Put(v); }
  bool number_float(number_float_t v, const string_t& text) {
    if (!std::isfinite(v)) {
      error_ = what_ + " is not valid JSON: the number " + text + " is out of range";
      return false;
    }
    return Put(v);
  }
  bool string(string_t& v) { return Put(std::move(v)); }
  bool binary(binary_t&) {
    error_ = what_ + " is not valid JSON: it holds a binary value";
    return false;
  }

  bool start_object(size_t) { return Open(ojson::object()); }
  bool start_array(size_t) { return Open(ojson::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }

  bool key(string_t& k) {
    Frame& f = frames_.back();
    Members& members = *f.value->get_ptr<ojson::object_t*>();
    if (auto at = Find(f, members, k)) {
      pending_ = &members[*at].second;  // a repeated key: first place, last value
      return true;
    }
    if (members.size() >= limits_.max_object_members) {
      return Refuse(what_ + " has an object of more than " +
                    std::to_string(limits_.max_object_members) + " members");
    }
    members.emplace_back(k, nullptr);
    if (f.index) {
      f.index->emplace(std::move(k), members.size() - 1);
    } else if (members.size() > kScanMembers) {
      f.index = std::make_unique<std::unordered_map<std::string, size_t>>();
      f.index->reserve(2 * members.size());
      for (size_t i = 0; i < members.size(); ++i) f.index->emplace(members[i].first, i);
    }
    pending_ = &members.back().second;
    return true;
  }

  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    // nlohmann's what() reads "[json.exception.parse_error.101] parse error at line 1, column
    // 7: syntax error ...": keep the part after the tag.
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    error_ = what_ + " is not valid JSON: " +
             (tag_end == std::string::npos ? what : what.substr(tag_end + 2));
    return false;
  }

  // Why the parse stopped (a limit or a syntax error), as one line.
  const std::string& error() const { return error_; }
  bool limit_reached() const { return limit_reached_; }
  ojson TakeRoot() { return std::move(root_); }

 private:
  struct Frame {
    ojson* value = nullptr;
    std::unique_ptr<std::unordered_map<std::string, size_t>> index{};  // large objects only
  };

  std::optional<size_t> Find(const Frame& f, const Members& members, const std::string& k) const {
    if (f.index) {
      auto it = f.index->find(k);
      if (it == f.index->end()) return std::nullopt;
      return it->second;
    }
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].first == k) return i;
    }
    return std::nullopt;
  }

  // The slot the next value fills: the root, an array's new last element or the member whose
  // key was just read.
  ojson* Slot() {
    if (frames_.empty()) return &root_;
    ojson* top = frames_.back().value;
    if (top->is_array()) {
      auto& elements = *top->get_ptr<ojson::array_t*>();
      elements.emplace_back();
      return &elements.back();
    }
    return pending_;
  }

  template <typename V>
  bool Put(V&& v) {
    *Slot() = ojson(std::forward<V>(v));
    return true;
  }

  bool Open(ojson container) {
    if (frames_.size() >= limits_.max_depth) {
      return Refuse(what_ + " is nested deeper than " + std::to_string(limits_.max_depth) +
                    " levels");
    }
    ojson* slot = Slot();
    *slot = std::move(container);
    frames_.push_back(Frame{slot});
    return true;
  }

  bool Close() {
    frames_.pop_back();
    return true;
  }

  // A limit was reached (the text may well be valid JSON).
  bool Refuse(std::string message) {
    error_ = std::move(message);
    limit_reached_ = true;
    return false;
  }

  const JsonParseLimits& limits_;
  const std::string what_;
  ojson root_;
  std::vector<Frame> frames_;
  ojson* pending_ = nullptr;
  std::string error_;
  bool limit_reached_ = false;
};

}  // namespace

Expected<ojson> ParseOrderedJson(std::string_view text, const JsonParseLimits& limits,
                                 std::string_view what) {
  OrderedDomBuilder builder(limits, what);
  if (!ojson::sax_parse(text.begin(), text.end(), &builder)) {
    if (builder.limit_reached()) return ResourceExhausted(builder.error());
    return InvalidArgument(builder.error());
  }
  return builder.TakeRoot();
}

}  // namespace tessera
