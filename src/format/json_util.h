// Hardened JSON parsing for files that come from users (config.json, safetensors headers,
// tokenizer files) and typed field getters whose errors name the file and the field.
//
//   TS_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(text, "config.json"));
//   JsonObjectReader cfg(doc, "config.json");      // doc must be an object (checked by caller)
//   TS_ASSIGN_OR_RETURN(int64_t hidden, cfg.RequiredPositiveInt("hidden_size"));
//   TS_ASSIGN_OR_RETURN(std::optional<double> eps, cfg.OptionalFiniteDouble("rms_norm_eps"));
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace tessera {

enum class DuplicateKeys {
  kReject,    // an object with the same key twice is Corrupt (the default: it is ambiguous)
  kKeepLast,  // nlohmann's own behaviour, for large files where the check costs too much
};

// Bracket nesting outside strings, scanned byte by byte without parsing. Stops at the first
// opening bracket past `limit` (too_deep_at, else npos), so deepest is at most limit + 1.
struct JsonDepthScan {
  size_t deepest = 0;
  size_t too_deep_at = std::string_view::npos;
};
JsonDepthScan ScanJsonDepth(std::string_view text, size_t limit);
// Whether `text` opens more than `limit` nested brackets: checked before parsing text whose
// parsed value would be copied or dumped (both recurse once per level).
inline bool NestsDeeperThan(std::string_view text, size_t limit) {
  return ScanJsonDepth(text, limit).too_deep_at != std::string_view::npos;
}
// The nesting the command-line tools accept in JSON they read from flags and stdin.
inline constexpr size_t kMaxCliJsonDepth = 64;

// Parses a complete JSON document. Refuses, with a one-line Corrupt error naming `what`:
// invalid UTF-8 (byte offset of the first bad byte), nesting deeper than max_depth
// (checked by a byte scan before the parser runs, so hostile input cannot exhaust the
// stack), syntax errors and numbers that overflow a double (byte offset and reason), and,
// unless told otherwise, duplicate object keys. Never throws.
Expected<nlohmann::json> ParseJsonDocument(std::string_view text, std::string_view what,
                                           size_t max_depth = 64,
                                           DuplicateKeys duplicates = DuplicateKeys::kReject);

// A short, single-line rendering of a JSON value for error messages (truncated, escaped).
std::string JsonForMessage(const nlohmann::json& value, size_t max_chars = 60);
// A short, single-line rendering of arbitrary text, quoted, for error messages.
std::string QuoteForMessage(std::string_view text, size_t max_chars = 60);

// The JSON type name used in messages ("string", "number", "object", ...).
std::string JsonTypeName(const nlohmann::json& value);

// object[key] when `object` is an object holding a string there, else `fallback`. Use it where
// nlohmann's value(key, "") would be: that throws when the key holds another type.
template <typename Json>
std::string StringOr(const Json& object, std::string_view key, std::string fallback = "") {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return fallback;
  return it->template get<std::string>();
}

// Reads typed fields of one JSON object. A field that is absent or null counts as absent
// for the Optional* getters. Messages read "<what>: <prefix><field> ...", e.g.
// "config.json: hidden_size must be a positive integer, found -3".
class JsonObjectReader {
 public:
  // `object` must outlive the reader; if it is not an object every getter reports that.
  JsonObjectReader(const nlohmann::json& object, std::string what, std::string prefix = "");

  bool Has(std::string_view key) const;                   // present and not null
  const nlohmann::json* Get(std::string_view key) const;  // nullptr when absent or null

  Expected<int64_t> RequiredPositiveInt(std::string_view key,
                                        int64_t max_value = kDefaultMaxInt) const;
  Expected<std::optional<int64_t>> OptionalInt(std::string_view key, int64_t min_value,
                                               int64_t max_value = kDefaultMaxInt) const;
  // Finite double (integers are accepted and converted); must lie in [min_value, max_value].
  Expected<std::optional<double>> OptionalFiniteDouble(std::string_view key, double min_value,
                                                       double max_value) const;
  Expected<std::optional<bool>> OptionalBool(std::string_view key) const;
  Expected<std::optional<std::string>> OptionalString(std::string_view key) const;
  // An integer or a list of integers (each in [0, max_value]); absent or null gives {}.
  Expected<std::vector<int64_t>> IntOrIntList(std::string_view key,
                                              int64_t max_value = kDefaultMaxInt) const;

  // Builds the error for `key`: "<what>: <prefix><key> <problem>".
  Status FieldError(ErrorCode code, std::string_view key, std::string_view problem) const;

  const std::string& what() const { return what_; }

  static constexpr int64_t kDefaultMaxInt = INT64_MAX;

 private:
  Expected<int64_t> IntValue(std::string_view key, const nlohmann::json& value, int64_t min_value,
                             int64_t max_value) const;

  const nlohmann::json& object_;
  std::string what_;
  std::string prefix_;
};

}  // namespace tessera
