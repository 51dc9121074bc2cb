// The model catalog: the models tessera knows by a short id (catalog/models.json, embedded in
// the binary at build time), each with its Hugging Face repository, the revision to pull,
// whether that revision was checked, its purpose, architecture and default settings.
//
//   TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
//   if (const CatalogEntry* e = catalog->Find("qwen3-0.6b")) Pull(e->repo, e->revision);
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "chat/tool_call_syntax.h"

namespace tessera {

struct CatalogEntry {
  std::string id;                 // tessera's name for it, e.g. "qwen3-0.6b"
  std::string repo;               // "Org/Name" on the hub
  std::string revision;           // a branch, tag or commit
  bool verified = false;          // false: the revision/hashes were not checked by hand
  std::string unverified_reason;  // why not (e.g. the catalog was written offline); may be empty
  std::string purpose;            // chat, embed, rerank, guard, classify or decide
  std::string architecture;       // config.json model_type
  nlohmann::json defaults;        // object: default settings (e.g. "context")
  std::string note;
  // How the model writes tool calls, as its chat template teaches them ("none" when the
  // template renders no tools). Every chat entry declares one; other purposes may.
  std::optional<ToolCallSyntax> tool_call_syntax{};
};

class Catalog {
 public:
  explicit Catalog(std::vector<CatalogEntry> entries) : entries_(std::move(entries)) {}
  const std::vector<CatalogEntry>& entries() const { return entries_; }
  // By id, or nullptr.
  const CatalogEntry* Find(std::string_view id) const;
  // By hub repository (case-insensitive, as the hub treats repo ids), or nullptr.
  const CatalogEntry* FindByRepo(std::string_view repo) const;

 private:
  std::vector<CatalogEntry> entries_;
};

// What an entry pins, in words for `tessera list --catalog`: "pinned to <commit> (checked)",
// "pinned to <commit>, not checked (<reason>)" or "follows main; not pinned (<reason>)".
std::string DescribePin(const CatalogEntry& entry);

// Parses a catalog document; every entry is checked (ids and repos are valid names, purpose is
// known, a chat entry names a known tool_call_syntax, "verified": true only with a commit id,
// no duplicate ids). `what` names the source in errors.
Expected<Catalog> ParseCatalog(std::string_view json_text, std::string_view what);

// The catalog compiled into this binary (parsed once; the result is cached).
Expected<const Catalog*> BuiltinCatalog();

}  // namespace tessera
