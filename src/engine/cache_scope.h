// CacheScope: who may share cached prefixes. The prefix cache (KvBlockPool) and the states kept
// by prefix hand a request only what was computed under an equal scope, compared exactly, so
// one API key (or one tenant's cache_salt) cannot learn from cache hits which prompts another
// sent. The server sets it per request (docs/server.md, "Prefix-cache isolation"); every other
// front end leaves it empty (one shared scope).
//
//   SequenceRequest r;
//   r.cache_scope = {.tenant = "alice", .salt = "user-17"};
#pragma once

#include <compare>
#include <cstddef>
#include <string>

namespace tessera {

// The longest tenant (an API key's name) and salt a scope may hold (the server refuses longer).
inline constexpr size_t kMaxCacheTenantBytes = 64;
inline constexpr size_t kMaxCacheSaltBytes = 256;

struct CacheScope {
  std::string tenant{};  // the API key's name (empty: shared by every key, or no auth)
  std::string salt{};    // the request's cache_salt (empty: none)
  auto operator<=>(const CacheScope&) const = default;
};

}  // namespace tessera
