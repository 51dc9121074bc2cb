// Defensive accessors for tokenizer.json fields: nothing here throws, and every failure names
// the field, the value found and what was expected. Internal to the tokenizer library.
//
//   TS_ASSIGN_OR_RETURN(bool lstrip, GetBool(token, "lstrip", false, "added_tokens[3]"));
//   TS_ASSIGN_OR_RETURN(std::string type, GetString(model, "type", "model"));
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace tessera::tok {

using Json = nlohmann::json;

// The member `key` of `obj`, or nullptr when `obj` is not an object, lacks it, or it is null.
inline const Json* FindField(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A short rendering of a JSON value for error messages.
inline std::string Preview(const Json& value) {
  std::string s = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

inline Expected<std::string> GetString(const Json& obj, const char* key, const std::string& where) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return Corrupt(where + ": missing string field '" + key + "'");
  if (!v->is_string()) {
    return Corrupt(where + "." + key + ": expected a string, found " + Preview(*v));
  }
  return v->get<std::string>();
}

inline Expected<std::string> GetStringOr(const Json& obj, const char* key,
                                         const std::string& fallback, const std::string& where) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) {
    return Corrupt(where + "." + key + ": expected a string, found " + Preview(*v));
  }
  return v->get<std::string>();
}

inline Expected<bool> GetBool(const Json& obj, const char* key, bool fallback,
                              const std::string& where) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    return Corrupt(where + "." + key + ": expected true or false, found " + Preview(*v));
  }
  return v->get<bool>();
}

// A token id: an integer in [0, 2^31 - 2].
inline Expected<int32_t> ToTokenId(const Json& v, const std::string& where) {
  if (v.is_number_unsigned() && v.get<uint64_t>() < 0x7fffffffULL) {
    return static_cast<int32_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < 0x7fffffffLL) {
    return static_cast<int32_t>(v.get<int64_t>());
  }
  return Corrupt(where + ": expected a token id (integer 0..2147483646), found " + Preview(v));
}

inline Expected<int64_t> GetInt(const Json& obj, const char* key, int64_t fallback,
                                const std::string& where) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return fallback;
  if (v->is_number_unsigned() && v->get<uint64_t>() <= 0x7fffffffULL) {
    return static_cast<int64_t>(v->get<uint64_t>());
  }
  if (v->is_number_integer() && v->get<int64_t>() >= 0 && v->get<int64_t>() <= 0x7fffffffLL) {
    return v->get<int64_t>();
  }
  return Corrupt(where + "." + key + ": expected a non-negative integer, found " + Preview(*v));
}

// A single Unicode character given as a one-character string (e.g. Metaspace "replacement").
Expected<char32_t> GetSingleChar(const Json& obj, const char* key, char32_t fallback,
                                 const std::string& where);

}  // namespace tessera::tok
