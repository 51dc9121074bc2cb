#include "format/json_util.h"

#include <algorithm>

#include <cmath>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>

#include "base/utf8.h"

namespace tessera {
namespace {

using nlohmann::json;

// Offset of the first byte that is not part of well-formed UTF-8, or npos.
size_t FirstInvalidUtf8Offset(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp = 0;
    if (!NextCodepoint(text, &pos, &cp)) break;
    // A genuine U+FFFD is encoded as EF BF BD; anything else decoding to it is ill-formed.
    if (cp == kReplacementChar && text.substr(start, 3) != "\xEF\xBF\xBD") return start;
  }
  return std::string_view::npos;
}

// Line and column (both 1-based) of a byte offset, for people opening the file in an editor.
std::pair<size_t, size_t> LineAndColumn(std::string_view text, size_t offset) {
  size_t line = 1;
  size_t column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// Escapes control characters and replaces ill-formed UTF-8 so a message stays one line.
std::string EscapeForMessage(std::string_view text, size_t max_chars) {
  std::string clean = SanitizeUtf8(text);
  std::string out;
  for (unsigned char c : clean) {
    if (out.size() >= max_chars) break;
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (out.size() >= max_chars && clean.size() > out.size()) {
    out.resize(CompleteUtf8PrefixLength(out));
    out += "...";
  }
  return out;
}

// Finds where and why nlohmann refused a document. Only run after a failed parse, so the
// second pass costs nothing on the success path.
struct ErrorLocator {
  size_t position = 0;
  std::string reason;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(json::string_t&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) {
    position = pos;
    reason = ex.what();
    return false;
  }
};

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..." ->
// "syntax error ...": our own message already says where.
std::string ShortReason(std::string reason) {
  size_t bracket = reason.find("] ");
  if (reason.starts_with("[json.exception.") && bracket != std::string::npos) {
    reason.erase(0, bracket + 2);
  }
  if (reason.starts_with("parse error")) {
    size_t colon = reason.find(": ");
    if (colon != std::string::npos) reason.erase(0, colon + 2);
  }
  return reason;
}

}  // namespace

JsonDepthScan ScanJsonDepth(std::string_view text, size_t limit) {
  JsonDepthScan scan;
  size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      scan.deepest = std::max(scan.deepest, ++depth);
      if (depth > limit) {
        scan.too_deep_at = i;
        return scan;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return scan;
}

Expected<json> ParseJsonDocument(std::string_view text, std::string_view what, size_t max_depth,
                                 DuplicateKeys duplicates) {
  const std::string where(what);
  if (size_t bad = FirstInvalidUtf8Offset(text); bad != std::string_view::npos) {
    return Corrupt(where + ": invalid UTF-8 at byte " + std::to_string(bad) +
                   "; JSON text must be UTF-8");
  }
  if (size_t deep = ScanJsonDepth(text, max_depth).too_deep_at; deep != std::string_view::npos) {
    return Corrupt(where + ": JSON nests deeper than " + std::to_string(max_depth) +
                   " levels at byte " + std::to_string(deep));
  }

  // Tracks the keys of every open object; a repeated key is remembered and reported after
  // parsing (the callback cannot stop the parser with a message of its own).
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate_key;
  json::parser_callback_t on_event = nullptr;
  if (duplicates == DuplicateKeys::kReject) {
    on_event = [&](int, json::parse_event_t event, json& parsed) {
      switch (event) {
        case json::parse_event_t::object_start:
          open_objects.emplace_back();
          break;
        case json::parse_event_t::object_end:
          if (!open_objects.empty()) open_objects.pop_back();
          break;
        case json::parse_event_t::key:
          if (!open_objects.empty() && parsed.is_string()) {
            const auto& key = parsed.get_ref<const std::string&>();
            if (!open_objects.back().insert(key).second && !duplicate_key) duplicate_key = key;
          }
          break;
        default:
          break;
      }
      return true;
    };
  }

  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), on_event, /*allow_exceptions=*/false);
  } catch (const std::exception& e) {
    // allow_exceptions=false covers syntax errors; this is memory exhaustion and the like.
    return ResourceExhausted(where + ": cannot parse JSON: " + EscapeForMessage(e.what(), 120));
  }
  if (doc.is_discarded()) {
    ErrorLocator locator;
    try {
      json::sax_parse(text.begin(), text.end(), &locator);
    } catch (const std::exception&) {
      // The locator only adds detail; the document is refused either way.
    }
    // nlohmann counts characters read, including the offending one.
    size_t offset = locator.position > 0 ? locator.position - 1 : 0;
    if (offset > text.size()) offset = text.size();
    auto [line, column] = LineAndColumn(text, offset);
    std::string reason =
        locator.reason.empty() ? "syntax error" : ShortReason(std::move(locator.reason));
    return Corrupt(where + ": invalid JSON at byte " + std::to_string(offset) + " (line " +
                   std::to_string(line) + ", column " + std::to_string(column) +
                   "): " + EscapeForMessage(reason, 160));
  }
  if (duplicate_key) {
    return Corrupt(where + ": key " + QuoteForMessage(*duplicate_key) +
                   " appears twice in one JSON object; each key must be unique");
  }
  return doc;
}

std::string JsonForMessage(const json& value, size_t max_chars) {
  std::string text;
  try {
    text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception&) {
    text = "<unprintable>";
  }
  return EscapeForMessage(text, max_chars);
}

std::string QuoteForMessage(std::string_view text, size_t max_chars) {
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on "'" + std::string&&.
  std::string out(1, '\'');
  out += EscapeForMessage(text, max_chars);
  out += '\'';
  return out;
}

std::string JsonTypeName(const json& value) {
  if (value.is_number_float()) return "number";
  if (value.is_number()) return "integer";
  return value.type_name();
}

JsonObjectReader::JsonObjectReader(const json& object, std::string what, std::string prefix)
    : object_(object), what_(std::move(what)), prefix_(std::move(prefix)) {}

const json* JsonObjectReader::Get(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool JsonObjectReader::Has(std::string_view key) const {
  return Get(key) != nullptr;
}

Status JsonObjectReader::FieldError(ErrorCode code, std::string_view key,
                                    std::string_view problem) const {
  return Status(code, what_ + ": " + prefix_ + std::string(key) + " " + std::string(problem));
}

Expected<int64_t> JsonObjectReader::IntValue(std::string_view key, const json& value,
                                             int64_t min_value, int64_t max_value) const {
  const std::string range =
      "in [" + std::to_string(min_value) + ", " + std::to_string(max_value) + "]";
  if (!value.is_number_integer()) {
    return FieldError(ErrorCode::kCorrupt, key,
                      "must be an integer " + range + ", found " + JsonTypeName(value) + " " +
                          JsonForMessage(value));
  }
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(max_value)) {
      return FieldError(ErrorCode::kCorrupt, key,
                        "must be an integer " + range + ", found " + std::to_string(u));
    }
    int64_t v = static_cast<int64_t>(u);
    if (v < min_value) {
      return FieldError(ErrorCode::kCorrupt, key,
                        "must be an integer " + range + ", found " + std::to_string(v));
    }
    return v;
  }
  int64_t v = value.get<int64_t>();
  if (v < min_value || v > max_value) {
    return FieldError(ErrorCode::kCorrupt, key,
                      "must be an integer " + range + ", found " + std::to_string(v));
  }
  return v;
}

Expected<int64_t> JsonObjectReader::RequiredPositiveInt(std::string_view key,
                                                        int64_t max_value) const {
  if (!object_.is_object()) {
    return Corrupt(what_ + ": expected a JSON object, found " + JsonTypeName(object_));
  }
  const json* value = Get(key);
  if (value == nullptr) {
    return FieldError(ErrorCode::kCorrupt, key, "is missing; it is required (a positive integer)");
  }
  return IntValue(key, *value, 1, max_value);
}

Expected<std::optional<int64_t>> JsonObjectReader::OptionalInt(std::string_view key,
                                                               int64_t min_value,
                                                               int64_t max_value) const {
  const json* value = Get(key);
  if (value == nullptr) return std::optional<int64_t>();
  TS_ASSIGN_OR_RETURN(int64_t v, IntValue(key, *value, min_value, max_value));
  return std::optional<int64_t>(v);
}

Expected<std::optional<double>> JsonObjectReader::OptionalFiniteDouble(std::string_view key,
                                                                       double min_value,
                                                                       double max_value) const {
  const json* value = Get(key);
  if (value == nullptr) return std::optional<double>();
  if (!value->is_number()) {
    return FieldError(
        ErrorCode::kCorrupt, key,
        "must be a number, found " + JsonTypeName(*value) + " " + JsonForMessage(*value));
  }
  double v = value->get<double>();
  if (!std::isfinite(v) || v < min_value || v > max_value) {
    return FieldError(ErrorCode::kCorrupt, key,
                      "must be a finite number in [" + JsonForMessage(json(min_value)) + ", " +
                          JsonForMessage(json(max_value)) + "], found " + JsonForMessage(*value));
  }
  return std::optional<double>(v);
}

Expected<std::optional<bool>> JsonObjectReader::OptionalBool(std::string_view key) const {
  const json* value = Get(key);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) {
    return FieldError(
        ErrorCode::kCorrupt, key,
        "must be true or false, found " + JsonTypeName(*value) + " " + JsonForMessage(*value));
  }
  return std::optional<bool>(value->get<bool>());
}

Expected<std::optional<std::string>> JsonObjectReader::OptionalString(std::string_view key) const {
  const json* value = Get(key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) {
    return FieldError(
        ErrorCode::kCorrupt, key,
        "must be a string, found " + JsonTypeName(*value) + " " + JsonForMessage(*value));
  }
  return std::optional<std::string>(value->get<std::string>());
}

Expected<std::vector<int64_t>> JsonObjectReader::IntOrIntList(std::string_view key,
                                                              int64_t max_value) const {
  std::vector<int64_t> out;
  const json* value = Get(key);
  if (value == nullptr) return out;
  if (value->is_array()) {
    for (size_t i = 0; i < value->size(); ++i) {
      std::string element = std::string(key) + "[" + std::to_string(i) + "]";
      TS_ASSIGN_OR_RETURN(int64_t v, IntValue(element, (*value)[i], 0, max_value));
      out.push_back(v);
    }
    return out;
  }
  if (!value->is_number_integer()) {
    return FieldError(ErrorCode::kCorrupt, key,
                      "must be an integer or a list of integers, found " + JsonTypeName(*value) +
                          " " + JsonForMessage(*value));
  }
  TS_ASSIGN_OR_RETURN(int64_t v, IntValue(key, *value, 0, max_value));
  out.push_back(v);
  return out;
}

}  // namespace tessera
