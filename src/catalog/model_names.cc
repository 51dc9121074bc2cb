#include "catalog/model_names.h"

#include "catalog/catalog.h"
#include "format/json_util.h"

namespace tessera {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

const char kNameRules[] =
    "a name is a catalog id (see `tessera list --catalog`) or ORG/REPO, made of letters, "
    "digits, '.', '-' and '_', starting with a letter or digit";

Status CheckNamePart(std::string_view part, std::string_view whole) {
  auto refuse = [&](const std::string& why) {
    return InvalidArgument(QuoteForMessage(whole) + " is not a model name (" + why + "); " +
                           kNameRules);
  };
  if (part.empty()) return refuse("empty");
  if (part.size() > kMaxNamePartLength) {
    return refuse("longer than " + std::to_string(kMaxNamePartLength) + " characters");
  }
  if (!IsAlnum(part.front())) return refuse("must start with a letter or digit");
  for (char c : part) {
    if (!IsAlnum(c) && c != '.' && c != '-' && c != '_') {
      return refuse("contains " + QuoteForMessage(std::string(1, c)));
    }
  }
  if (part.find("..") != std::string_view::npos) return refuse("contains '..'");
  if (part.find("--") != std::string_view::npos) return refuse("contains '--'");
  return Status::Ok();
}

}  // namespace

Status ValidateCatalogId(std::string_view id) {
  return CheckNamePart(id, id);
}

Status ValidateRepoId(std::string_view repo) {
  size_t slash = repo.find('/');
  if (slash == std::string_view::npos) {
    return InvalidArgument(QuoteForMessage(repo) + " is not a repository id; expected ORG/NAME");
  }
  TS_RETURN_IF_ERROR(CheckNamePart(repo.substr(0, slash), repo));
  return CheckNamePart(repo.substr(slash + 1), repo);
}

Status ValidateRevision(std::string_view revision) {
  auto refuse = [&](const std::string& why) {
    return InvalidArgument("revision " + QuoteForMessage(revision) + " is not valid (" + why +
                           "); give a branch, tag or 40-digit commit id");
  };
  if (revision.empty()) return refuse("empty");
  if (revision.size() > kMaxRevisionLength) return refuse("too long");
  for (char c : revision) {
    if (!IsAlnum(c) && c != '.' && c != '-' && c != '_' && c != '/') {
      return refuse("contains " + QuoteForMessage(std::string(1, c)));
    }
  }
  if (revision.front() == '/' || revision.front() == '-' || revision.back() == '/') {
    return refuse("bad first or last character");
  }
  if (revision.find("..") != std::string_view::npos) return refuse("contains '..'");
  if (revision.find("//") != std::string_view::npos) return refuse("contains '//'");
  return Status::Ok();
}

bool IsCommitId(std::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool LooksLikePath(std::string_view text) {
  return text == "." || text == ".." || text.starts_with("/") || text.starts_with("./") ||
         text.starts_with("../") || text.starts_with("~/");
}

Expected<ModelRef> ParseModelRef(std::string_view text, const Catalog& catalog) {
  if (text.empty()) {
    return InvalidArgument("the model name is empty; " + std::string(kNameRules));
  }
  if (text.size() > 2 * kMaxNamePartLength + 1 + 1 + kMaxRevisionLength) {
    return InvalidArgument("the model name is too long (" + std::to_string(text.size()) +
                           " characters); " + kNameRules);
  }
  if (LooksLikePath(text)) {
    return InvalidArgument(QuoteForMessage(text) +
                           " is a path, but a model name is expected here; " + kNameRules);
  }
  ModelRef spec;
  std::string_view name = text;
  size_t at = text.rfind('@');
  if (at != std::string_view::npos) {
    name = text.substr(0, at);
    spec.revision = std::string(text.substr(at + 1));
    spec.revision_given = true;
    TS_RETURN_IF_ERROR(ValidateRevision(spec.revision));
  }
  if (name.find('/') != std::string_view::npos) {
    TS_RETURN_IF_ERROR(ValidateRepoId(name));
    spec.repo = std::string(name);
    spec.entry = catalog.FindByRepo(name);
    if (spec.entry != nullptr) {
      spec.store_name = spec.entry->id;
    } else {
      size_t slash = name.find('/');
      spec.store_name =
          std::string(name.substr(0, slash)) + "--" + std::string(name.substr(slash + 1));
    }
  } else {
    TS_RETURN_IF_ERROR(ValidateCatalogId(name));
    spec.entry = catalog.Find(name);
    if (spec.entry == nullptr) {
      std::string known;
      for (const auto& e : catalog.entries()) known += (known.empty() ? "" : ", ") + e.id;
      return NotFound("unknown model " + QuoteForMessage(name) + "; known names: " + known +
                      "; or give a hub repository as ORG/REPO");
    }
    spec.store_name = spec.entry->id;
    spec.repo = spec.entry->repo;
  }
  if (!spec.revision_given) spec.revision = spec.entry != nullptr ? spec.entry->revision : "main";
  return spec;
}

}  // namespace tessera
