// tessera list / rm / resolve: what is installed (tessera's store, the Hugging Face cache,
// Ollama's store, LM Studio's folder, folders given with --folder), removing a model from
// tessera's store, and where a name resolves to.
#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "base/progress.h"
#include "catalog/builtin_model.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "cli_args.h"
#include "commands.h"
#include "model_loading.h"

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
  args.AddList("folder", "also list the GGUF files in this folder (repeatable)");
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
  for (const std::string& folder : args.GetList("folder")) {
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec)) {
      return ReportError("list", NotFound("--folder " + folder + " is not a folder"));
    }
    for (InstalledModel& m : ListGgufFolderModels(folder)) models->push_back(std::move(m));
  }
  for (const auto& m : *models) {
    nlohmann::json row = {{"name", m.name},
                          {"purpose", m.purpose},
                          {"dtype", m.dtype},
                          {"size_bytes", m.size_bytes},
                          {"verification", m.verification},
                          {"location", ModelLocationName(m.location)},
                          {"dir", m.dir},
                          {"commit", m.commit}};
    if (!m.file.empty()) {
      row["format"] = "gguf";
      row["file"] = m.file;
    }
    rows.push_back(std::move(row));
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
              "VERIFIED", "WHERE", "PATH");
  for (const auto& m : *models) {
    std::printf("%-28s %-10s %-9s %10s  %-11s %-9s %s\n", m.name.c_str(), m.purpose.c_str(),
                m.dtype.c_str(), FormatBytes(static_cast<double>(m.size_bytes)).c_str(),
                m.verification.c_str(), ModelLocationName(m.location), m.Where().c_str());
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
        "Hugging Face cache, Ollama's store or LM Studio's folder).\n");
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
  args.AddFlag("json", "print one JSON object (for a GGUF model also its Ollama layers)");
  args.AddFlag("verify", "also check a GGUF model's sha256 against its store (Ollama)");
  std::string name;
  bool has_name = TakeName(argc, argv, &name);
  if (Status st = args.Parse(argc, argv, has_name ? 3 : 2); !st.ok()) {
    return ReportError("resolve", st);
  }
  if (args.help_requested()) {
    std::printf(
        "usage: tessera resolve NAME|PATH [--json] [--verify]\n\nPrints the checkpoint "
        "directory or GGUF file a name resolves to and where it lives: tessera's store, the "
        "Hugging Face cache, Ollama's store or LM Studio's folder (docs/model-store.md).\n\n%s",
        args.Usage().c_str());
    return 0;
  }
  if (!has_name) {
    return ReportError("resolve", InvalidArgument("which model? usage: tessera resolve NAME"));
  }
  auto catalog = BuiltinCatalog();
  if (!catalog) return ReportError("resolve", catalog.status());
  auto resolved = ResolveModel(name, **catalog);
  if (!resolved) return ReportError("resolve", resolved.status());
  if (resolved->gguf && args.GetFlag("verify")) {
    if (Status st = VerifyGgufShowingProgress(*resolved->gguf); !st.ok()) {
      return ReportError("resolve", st);
    }
  }
  if (args.GetFlag("json")) {
    nlohmann::json out = {{"name", resolved->name},
                          {"location", ModelLocationName(resolved->location)},
                          {"format", resolved->gguf ? "gguf" : "checkpoint"},
                          {"path", resolved->Where()}};
    if (const auto& g = resolved->gguf) {
      out["size_bytes"] = g->size_bytes;
      out["quantization"] = g->quantization;
      if (!g->expected_sha256.empty()) out["sha256"] = g->expected_sha256;
      if (!g->manifest_path.empty()) out["manifest"] = g->manifest_path;
      if (!g->family.empty()) out["family"] = g->family;
      if (!g->parameter_size.empty()) out["parameter_size"] = g->parameter_size;
      if (g->go_template) out["template"] = *g->go_template;
      if (g->system_prompt) out["system"] = *g->system_prompt;
      if (g->params) out["params"] = OllamaParamsToJson(*g->params);
      out["licenses"] = g->licenses.size();
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%s\t%s\n", resolved->Where().c_str(), ModelLocationName(resolved->location));
  return 0;
}

}  // namespace tessera
