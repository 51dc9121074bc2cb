// Reading one member of a request body, shared by the endpoints' parsers (openai_api.cc,
// task_api.cc): absent and null are the same, a wrong type is a 400 naming the field.
//
//   bool stream = false;
//   if (auto e = ReadBool(body, "stream", &stream)) return *e;
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/openai_api.h"

namespace tessera::server {

// A member present and not null.
inline const nlohmann::ordered_json* Field(const nlohmann::ordered_json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

inline std::optional<ApiError> ReadBool(const nlohmann::ordered_json& body, const char* name,
                                        bool* out) {
  const nlohmann::ordered_json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return InvalidField(name, std::string(name) + " must be true or false");
  *out = v->get<bool>();
  return std::nullopt;
}

inline std::optional<ApiError> ReadString(const nlohmann::ordered_json& body, const char* name,
                                          std::string* out) {
  const nlohmann::ordered_json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return InvalidField(name, std::string(name) + " must be a string");
  *out = v->get<std::string>();
  return std::nullopt;
}

// cache_salt (as vLLM's): a non-empty string of at most kMaxCacheSaltBytes bytes; requests with
// different salts share no cached prefix, even under one API key (tenants sharing a key).
inline std::optional<ApiError> ReadCacheSalt(const nlohmann::ordered_json& body, std::string* out) {
  const nlohmann::ordered_json* v = Field(body, "cache_salt");
  if (v == nullptr) return std::nullopt;
  if (!v->is_string() || v->get_ref<const std::string&>().empty() ||
      v->get_ref<const std::string&>().size() > kMaxCacheSaltBytes) {
    return InvalidField("cache_salt", "cache_salt must be a non-empty string of at most " +
                                          std::to_string(kMaxCacheSaltBytes) + " bytes");
  }
  *out = v->get<std::string>();
  return std::nullopt;
}

}  // namespace tessera::server
