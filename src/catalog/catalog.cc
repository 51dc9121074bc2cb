#include "catalog/catalog.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "catalog/model_names.h"
#include "format/json_util.h"

namespace tessera {

// Defined in the file CMake generates from catalog/models.json.
extern const char kEmbeddedCatalogJson[];

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

Expected<std::string> RequiredString(const nlohmann::json& obj, const char* key,
                                     const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string() || it->get<std::string>().empty()) {
    return Corrupt(where + ": \"" + key + "\" must be a non-empty string");
  }
  return it->get<std::string>();
}

// "tool_call_syntax": required of chat entries, so that no catalog model's syntax is guessed.
Expected<std::optional<ToolCallSyntax>> ToolCallSyntaxOf(const nlohmann::json& item,
                                                         const std::string& purpose,
                                                         const std::string& where) {
  auto it = item.find("tool_call_syntax");
  if (it == item.end()) {
    if (purpose != "chat") return std::optional<ToolCallSyntax>();
    return Corrupt(where + ": a chat entry must declare \"tool_call_syntax\" (" +
                   ToolCallSyntaxNames() + "; none when its template renders no tools)");
  }
  if (!it->is_string()) {
    return Corrupt(where + ": \"tool_call_syntax\" must be a string: " + ToolCallSyntaxNames());
  }
  auto syntax = ToolCallSyntaxFromName(it->get<std::string>(), "\"tool_call_syntax\"");
  if (!syntax) return Corrupt(where + ": " + syntax.status().message());
  return std::optional<ToolCallSyntax>(*syntax);
}

}  // namespace

std::string DescribePin(const CatalogEntry& entry) {
  const std::string reason =
      entry.unverified_reason.empty() ? "" : " (" + entry.unverified_reason + ")";
  if (!IsCommitId(entry.revision)) return "follows " + entry.revision + "; not pinned" + reason;
  if (entry.verified) return "pinned to " + entry.revision + " (checked)";
  return "pinned to " + entry.revision + ", not checked" + reason;
}

const CatalogEntry* Catalog::Find(std::string_view id) const {
  for (const auto& e : entries_) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

const CatalogEntry* Catalog::FindByRepo(std::string_view repo) const {
  for (const auto& e : entries_) {
    if (EqualsIgnoreCase(e.repo, repo)) return &e;
  }
  return nullptr;
}

Expected<Catalog> ParseCatalog(std::string_view json_text, std::string_view what) {
  TS_ASSIGN_OR_RETURN(nlohmann::json doc, ParseJsonDocument(json_text, what));
  const std::string source(what);
  if (!doc.is_object() || !doc.contains("models") || !doc["models"].is_array()) {
    return Corrupt(source + ": expected an object with a \"models\" array");
  }
  std::vector<CatalogEntry> entries;
  size_t index = 0;
  for (const auto& item : doc["models"]) {
    const std::string where = source + ": models[" + std::to_string(index++) + "]";
    if (!item.is_object()) return Corrupt(where + " is not an object");
    CatalogEntry e;
    TS_ASSIGN_OR_RETURN(e.id, RequiredString(item, "id", where));
    TS_ASSIGN_OR_RETURN(e.repo, RequiredString(item, "repo", where));
    TS_ASSIGN_OR_RETURN(e.revision, RequiredString(item, "revision", where));
    TS_ASSIGN_OR_RETURN(e.purpose, RequiredString(item, "purpose", where));
    TS_ASSIGN_OR_RETURN(e.architecture, RequiredString(item, "architecture", where));
    TS_RETURN_IF_ERROR(ValidateCatalogId(e.id).WithContext(where));
    TS_RETURN_IF_ERROR(ValidateRepoId(e.repo).WithContext(where));
    TS_RETURN_IF_ERROR(ValidateRevision(e.revision).WithContext(where));
    static const char* const kPurposes[] = {"chat",  "embed",    "rerank",
                                            "guard", "classify", "decide"};
    if (std::find(std::begin(kPurposes), std::end(kPurposes), e.purpose) == std::end(kPurposes)) {
      return Corrupt(where +
                     ": purpose must be chat, embed, rerank, guard, classify or decide, got " +
                     QuoteForMessage(e.purpose));
    }
    auto verified = item.find("verified");
    if (verified == item.end() || !verified->is_boolean()) {
      return Corrupt(where + ": \"verified\" must be true or false");
    }
    e.verified = verified->get<bool>();
    // A branch moves, so only a commit can have been checked.
    if (e.verified && !IsCommitId(e.revision)) {
      return Corrupt(where +
                     ": \"verified\": true needs \"revision\" to be a 40-digit commit id, got " +
                     QuoteForMessage(e.revision));
    }
    if (auto reason = item.find("unverified_reason"); reason != item.end()) {
      if (!reason->is_string()) return Corrupt(where + ": \"unverified_reason\" must be a string");
      e.unverified_reason = reason->get<std::string>();
    }
    e.defaults = item.value("defaults", nlohmann::json::object());
    if (!e.defaults.is_object()) return Corrupt(where + ": \"defaults\" must be an object");
    if (item.contains("note") && item["note"].is_string()) e.note = item["note"];
    TS_ASSIGN_OR_RETURN(e.tool_call_syntax, ToolCallSyntaxOf(item, e.purpose, where));
    for (const auto& prior : entries) {
      if (prior.id == e.id) return Corrupt(where + ": duplicate id '" + e.id + "'");
    }
    entries.push_back(std::move(e));
  }
  return Catalog(std::move(entries));
}

Expected<const Catalog*> BuiltinCatalog() {
  static std::once_flag once;
  static std::optional<Expected<Catalog>> parsed;
  std::call_once(once, [] { parsed.emplace(ParseCatalog(kEmbeddedCatalogJson, "catalog")); });
  if (!parsed->has_value()) return parsed->status();
  return &parsed->value();
}

}  // namespace tessera
