// tessera pull NAME|ORG/REPO[@REV]: download a model into tessera's store, verified against
// the hub's hashes, resumable, and swapped in only when complete.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "base/progress.h"
#include "catalog/builtin_model.h"
#include "catalog/catalog.h"
#include "catalog/model_store.h"
#include "catalog/pull.h"
#include "cli_args.h"
#include "commands.h"

namespace tessera {
namespace {

std::atomic<bool> g_pull_interrupted{false};

void OnInterrupt(int) {
  g_pull_interrupted.store(true);
}

}  // namespace

int RunPullCommand(int argc, char** argv) {
  CliArgs args("pull NAME|ORG/REPO[@REV]");
  args.AddFlag("force", "download and verify every file again, even when current");
  args.AddInt("timeout", "seconds without data before a download is abandoned", 30);
  // The model name comes first; everything after it is an option.
  int first_option = 2;
  std::string name;
  if (argc > 2 && std::string(argv[2]).rfind("--", 0) != 0) {
    name = argv[2];
    first_option = 3;
  }
  if (Status st = args.Parse(argc, argv, first_option); !st.ok()) return ReportError("pull", st);
  if (args.help_requested()) {
    std::printf(
        "%s\nNAME is a catalog id (tessera list --catalog) or a hub repository "
        "ORG/REPO, optionally @REVISION.\nHF_ENDPOINT overrides the hub URL, HF_TOKEN "
        "authenticates.\nModels go to $TESSERA_MODELS (default ~/.local/share/tessera/models).\n",
        args.Usage().c_str());
    return 0;
  }
  if (first_option == 2) {
    return ReportError("pull", InvalidArgument("which model? usage: tessera pull NAME|ORG/REPO"
                                               "[@REV] [--force] [--timeout S]"));
  }
  if (args.GetInt("timeout") < 1 || args.GetInt("timeout") > 3600) {
    return ReportError("pull", InvalidArgument("--timeout must be between 1 and 3600 seconds"));
  }
  if (name == kBuiltinModelName) {
    std::printf("%s is the built-in demo model, carried in the binary: nothing to download\n",
                kBuiltinModelName);
    return 0;
  }
  auto catalog = BuiltinCatalog();
  if (!catalog) return ReportError("pull", catalog.status());
  auto spec = ParseModelRef(name, **catalog);
  if (!spec) return ReportError("pull", spec.status());
  // One knob for every command (pull, list, rm, resolve): $TESSERA_MODELS.
  auto models_dir = ModelsDir();
  if (!models_dir) return ReportError("pull", models_dir.status());

  PullOptions options = PullOptionsFromEnvironment();
  options.force = args.GetFlag("force");
  options.stall_timeout_seconds = static_cast<int>(args.GetInt("timeout"));
  ProgressRenderer shown = ProgressRenderer::ForStderr();  // a bar on a terminal, else lines
  options.progress = shown.Callback();
  options.cancelled = [] { return g_pull_interrupted.load(); };
  options.log = [&shown](const std::string& line) { shown.Note(line); };
  struct sigaction action {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  std::fprintf(stderr, "pulling %s (%s@%s) from %s\n", spec->store_name.c_str(), spec->repo.c_str(),
               spec->revision.c_str(), options.endpoint.c_str());
  auto result = PullModel(*spec, *models_dir, options);
  if (!result) {
    shown.EndLine();  // the error below a bar being drawn, not on its line
    ReportError("pull", result.status());
    return result.status().code() == ErrorCode::kCancelled ? 130 : 1;
  }
  if (result->already_current) {
    std::printf("%s is already current (%s@%s) in %s; nothing downloaded\n",
                spec->store_name.c_str(), spec->repo.c_str(), result->commit.c_str(),
                result->dir.c_str());
  } else {
    std::printf(
        "pulled %s (%s@%s) into %s: %d downloaded (%s), %d reused from the installed copy; all "
        "verified\n",
        spec->store_name.c_str(), spec->repo.c_str(), result->commit.c_str(), result->dir.c_str(),
        result->files_downloaded,
        FormatBytes(static_cast<double>(result->bytes_downloaded)).c_str(), result->files_reused);
  }
  return 0;
}

}  // namespace tessera
