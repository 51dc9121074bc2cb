// Reading one member of a request body, shared by the endpoints' parsers (openai_api.cc,
// task_api.cc, the Anthropic, Responses, Ollama and decisions parsers): absent and null are
// the same, a wrong type is a 400 naming the field, and a member the endpoint does not know is
// a 400 naming it (never silently ignored).
//
//   bool stream = false;
//   if (auto e = ReadBool(body, "stream", &stream)) return *e;
//   if (auto e = RefuseUnknownFields(part, {"type", "text"}, "input[2]", "in this input item"))
//     return *e;   // input[2].cache is not supported in this input item; remove it
#pragma once

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/cache_scope.h"
#include "server/api_error.h"

namespace tessera::server {

// The first non-null member of `object` not named in `known` is a 400 "<name> is not
// supported <scope>; remove it", its param the name: `path` (the object's place in the body,
// "messages[1].content[0]"; empty at the top level) and the member's key. The body's shape
// (OpenAI, Anthropic, Ollama) is the endpoint's dialect's.
inline std::optional<ApiError> RefuseUnknownFields(const nlohmann::ordered_json& object,
                                                   std::span<const std::string_view> known,
                                                   std::string_view path = {},
                                                   std::string_view scope = "by this server") {
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (it->is_null() || std::find(known.begin(), known.end(), it.key()) != known.end()) continue;
    const std::string name = path.empty() ? it.key() : std::string(path) + "." + it.key();
    return InvalidField(name, name + " is not supported " + std::string(scope) + "; remove it");
  }
  return std::nullopt;
}
inline std::optional<ApiError> RefuseUnknownFields(const nlohmann::ordered_json& object,
                                                   std::initializer_list<std::string_view> known,
                                                   std::string_view path = {},
                                                   std::string_view scope = "by this server") {
  return RefuseUnknownFields(object, std::span(known.begin(), known.size()), path, scope);
}

// Two lists of field names as one (an endpoint's own fields beside those it shares).
template <size_t A, size_t B>
constexpr std::array<std::string_view, A + B> JoinFieldLists(
    const std::array<std::string_view, A>& a, const std::array<std::string_view, B>& b) {
  std::array<std::string_view, A + B> all{};
  std::copy(a.begin(), a.end(), all.begin());
  std::copy(b.begin(), b.end(), all.begin() + A);
  return all;
}

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
