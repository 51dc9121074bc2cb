// What a model name may be, and how `NAME|ORG/REPO[@REV]` is read. Names end up in paths and
// URLs, so anything that could climb out of a directory or surprise a URL is refused with a
// message that says what a name may contain.
//
//   TS_RETURN_IF_ERROR(ValidateRepoId("Qwen/Qwen3-0.6B"));
//   TS_ASSIGN_OR_RETURN(ModelRef spec, ParseModelRef("qwen3-0.6b@main", *catalog));
//   std::string dir = models_dir + "/" + spec.store_name;   // safe: validated
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

class Catalog;
struct CatalogEntry;

// The hub's own limit for each half of a repository id.
inline constexpr size_t kMaxNamePartLength = 96;
inline constexpr size_t kMaxRevisionLength = 255;

// A catalog id: 1-96 of [A-Za-z0-9._-], starting with a letter or digit, no ".." or "--".
Status ValidateCatalogId(std::string_view id);
// ORG/NAME, each half like a catalog id.
Status ValidateRepoId(std::string_view repo);
// A branch, tag or commit: 1-255 of [A-Za-z0-9._/-], no "..", "//", leading '/' or '-'.
Status ValidateRevision(std::string_view revision);
// True for a 40-digit lowercase hex Git commit id.
bool IsCommitId(std::string_view revision);

// True when `text` is written as a path (starts with '/', './', '../' or '~/', or is '.' or
// '..'); such arguments name a directory, never a model.
bool LooksLikePath(std::string_view text);

struct ModelRef {
  std::string store_name;  // directory under the models dir: a catalog id or "Org--Name"
  std::string repo;        // hub repository
  std::string revision;    // as requested, or the catalog's, or "main"
  bool revision_given = false;
  const CatalogEntry* entry = nullptr;  // when the catalog knows the model
};

// NAME (a catalog id) or ORG/REPO, either optionally followed by @REVISION. A repository that
// is in the catalog is stored under its catalog id.
Expected<ModelRef> ParseModelRef(std::string_view text, const Catalog& catalog);

}  // namespace tessera
