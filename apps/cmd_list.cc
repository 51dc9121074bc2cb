// tessera list / rm / resolve: what is installed (tessera's store and the Hugging Face cache),
// removing a model from the store, and where a name resolves to.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "base/progress.h"
#include "catalog/builtin_model.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "cli_args.h"
#include "commands.h"

namespace tessera {
namespace {

// The model name (first argument) for rm/resolve; options may follow it.
bool TakeName(int argc, char** argv, std::string* name) {
  if (argc > 2 && std::string(argv[2]).rfind("--", 0) != 0) {
    *name = argv[2];
    return true;
  }
  return false;
}

}  // namespace

int RunListCommand(int argc, char** argv) {
  CliArgs args("list");
  args.AddFlag("catalog", "list the models tessera knows by name instead");
  args.AddFlag("verify", "re-hash every locked file (slow for large models)");
  args.AddFlag("json", "print one JSON array");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("list", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    return 0;
  }
  auto catalog = BuiltinCatalog();
  if (!catalog) return ReportError("list", catalog.status());
  nlohmann::json rows = nlohmann::json::array();
  if (args.GetFlag("catalog")) {
    for (const auto& e : (*catalog)->entries()) {
      nlohmann::json row = {{"name", e.id},
                            {"repo", e.repo},
                            {"revision", e.revision},
                            {"verified", e.verified},
                            {"pin", DescribePin(e)},
                            {"purpose", e.purpose},
                            {"architecture", e.architecture},
                            {"defaults", e.defaults}};
      if (!e.unverified_reason.empty()) row["unverified_reason"] = e.unverified_reason;
      if (e.tool_call_syntax) row["tool_call_syntax"] = ToolCallSyntaxName(*e.tool_call_syntax);
      if (!e.note.empty()) row["note"] = e.note;
      rows.push_back(std::move(row));
    }
    if (args.GetFlag("json")) {
      std::printf("%s\n",
                  rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
      return 0;
    }
    std::printf("%-24s %-9s %-12s %-36s %s\n", "NAME", "PURPOSE", "ARCH", "REPO", "REVISION");
    for (const auto& e : (*catalog)->entries()) {
      std::printf("%-24s %-9s %-12s %-36s %s\n", e.id.c_str(), e.purpose.c_str(),
                  e.architecture.c_str(), e.repo.c_str(), DescribePin(e).c_str());
    }
    bool heading = false;
    for (const auto& e : (*catalog)->entries()) {
      if (e.note.empty()) continue;
      if (!heading) std::printf("\nnotes:\n");
      heading = true;
      std::printf("  %s: %s\n", e.id.c_str(), e.note.c_str());
    }
    return 0;
  }
  auto models = ListInstalledModels(**catalog, args.GetFlag("verify"));
  if (!models) return ReportError("list", models.status());
  for (const auto& m : *models) {
    rows.push_back({{"name", m.name},
                    {"purpose", m.purpose},
                    {"dtype", m.dtype},
                    {"size_bytes", m.size_bytes},
                    {"verification", m.verification},
                    {"location", ModelLocationName(m.location)},
                    {"dir", m.dir},
                    {"commit", m.commit}});
  }
  if (args.GetFlag("json")) {
    std::printf("%s\n", rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  if (models->empty()) {
    std::printf(
        "no models installed; `tessera pull NAME` downloads one (`tessera list "
        "--catalog` shows the names)\n");
    return 0;
  }
  std::printf("%-28s %-10s %-9s %10s  %-11s %-9s %s\n", "NAME", "PURPOSE", "DTYPE", "SIZE",
              "VERIFIED", "WHERE", "DIR");
  for (const auto& m : *models) {
    std::printf("%-28s %-10s %-9s %10s  %-11s %-9s %s\n", m.name.c_str(), m.purpose.c_str(),
                m.dtype.c_str(), FormatBytes(static_cast<double>(m.size_bytes)).c_str(),
                m.verification.c_str(), ModelLocationName(m.location), m.dir.c_str());
  }
  return 0;
}

int RunRmCommand(int argc, char** argv) {
  CliArgs args("rm NAME");
  std::string name;
  bool has_name = TakeName(argc, argv, &name);
  if (Status st = args.Parse(argc, argv, has_name ? 3 : 2); !st.ok()) return ReportError("rm", st);
  if (args.help_requested()) {
    std::printf(
        "usage: tessera rm NAME\n\nRemoves a model from tessera's store (never from the "
        "Hugging Face cache).\n");
    return 0;
  }
  if (!has_name) return ReportError("rm", InvalidArgument("which model? usage: tessera rm NAME"));
  if (name == kBuiltinModelName) {
    return ReportError("rm", InvalidArgument(std::string(kBuiltinModelName) +
                                             " is the built-in demo model, carried in the "
                                             "binary: there is nothing to remove"));
  }
  auto catalog = BuiltinCatalog();
  if (!catalog) return ReportError("rm", catalog.status());
  auto removed = RemoveStoredModel(name, **catalog);
  if (!removed) return ReportError("rm", removed.status());
  std::printf("removed %s (%s)\n", name.c_str(), removed->c_str());
  return 0;
}

int RunResolveCommand(int argc, char** argv) {
  CliArgs args("resolve NAME|PATH");
  std::string name;
  bool has_name = TakeName(argc, argv, &name);
  if (Status st = args.Parse(argc, argv, has_name ? 3 : 2); !st.ok()) {
    return ReportError("resolve", st);
  }
  if (args.help_requested()) {
    std::printf(
        "usage: tessera resolve NAME|PATH\n\nPrints the checkpoint directory a name "
        "resolves to (tessera's store, then the Hugging Face cache) and where it "
        "lives.\n");
    return 0;
  }
  if (!has_name) {
    return ReportError("resolve", InvalidArgument("which model? usage: tessera resolve NAME"));
  }
  auto catalog = BuiltinCatalog();
  if (!catalog) return ReportError("resolve", catalog.status());
  auto resolved = ResolveModel(name, **catalog);
  if (!resolved) return ReportError("resolve", resolved.status());
  std::printf("%s\t%s\n", resolved->dir.c_str(), ModelLocationName(resolved->location));
  return 0;
}

}  // namespace tessera
