// tessera serve: the OpenAI-compatible server; and tessera worker, the hidden subcommand the
// server starts (fork + exec of this binary) to run inference in a separate process.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "backend/xdna/doctor.h"
#include "base/environment.h"
#include "base/mapped_file.h"
#include "catalog/builtin_model.h"
#include "catalog/catalog.h"
#include "catalog/model_names.h"
#include "catalog/model_store.h"
#include "cli_args.h"
#include "commands.h"
#include "engine/placement.h"
#include "format/gguf.h"
#include "format/model_config.h"
#include "model/gguf_checkpoint.h"
#include "model_loading.h"
#include "npu_device.h"
#include "runtime/loaded_model.h"
#include "server/http_server.h"
#include "server/saved_api_key.h"
#include "worker/worker.h"

namespace tessera {
namespace {

using worker::ModelEntry;

// The last component of a directory path ("models/tiny/" -> "tiny").
std::string FolderName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// What requests call a model travels in JSON, logs and the worker's NAME=DIR arguments.
Status CheckServedName(const std::string& name, const std::string& spec) {
  bool printable = !name.empty() && name.size() <= 256;
  for (unsigned char c : name) printable = printable && c > ' ' && c < 0x7f && c != '=';
  if (printable) return Status::Ok();
  return InvalidArgument("--model '" + spec + "': '" + name +
                         "' cannot be a served model name (1-256 printable characters, no "
                         "spaces or '='); choose one with --model NAME=DIR");
}

// --model SPEC, where SPEC is NAME=WHERE or WHERE, and WHERE is a checkpoint directory or a
// model name resolved through tessera's store and the Hugging Face cache, the same way
// `tessera generate --model` resolves it (ResolveModelToLoad). Without NAME, a directory is
// served under its folder name and a model name as written.
Expected<ModelEntry> ResolveServedModel(const std::string& spec) {
  ModelEntry m;
  std::string where = spec;
  size_t eq = spec.find('=');
  if (!IsDirectory(spec) && eq != std::string::npos && eq > 0) {
    m.name = spec.substr(0, eq);
    where = spec.substr(eq + 1);
  }
  if (where.empty()) return InvalidArgument("--model '" + spec + "' must be DIR, NAME or NAME=DIR");
  auto resolved = ResolveModelToLoad(where);  // a GGUF model from Ollama's store: hashed here
  if (!resolved && LooksLikePath(where)) {
    return Status(resolved.status().code(),
                  "--model '" + spec + "': " + resolved.status().message() +
                      "; give a checkpoint folder, a GGUF file, an installed model name "
                      "(tessera list) or NAME=either");
  }
  if (!resolved) return resolved.status().WithContext("--model '" + spec + "'");
  if (m.name.empty()) m.name = IsDirectory(where) ? FolderName(where) : where;
  TS_RETURN_IF_ERROR(CheckServedName(m.name, spec));
  if (resolved->gguf) {
    // What the worker resolves again (worker::GgufModelOfEntry): the Ollama name, whose
    // layers it needs, or the file by absolute path.
    std::error_code ec;
    m.dir = resolved->gguf->location == ModelLocation::kOllama
                ? resolved->gguf->name
                : std::filesystem::absolute(resolved->gguf->path, ec).string();
    return m;
  }
  m.dir = resolved->dir;
  struct stat st {};
  if (::stat((m.dir + "/config.json").c_str(), &st) != 0) {
    return InvalidArgument("--model '" + spec + "': no checkpoint (config.json) in " + m.dir);
  }
  return m;
}

// The config.json text of a served model: its folder's, or what its GGUF file's metadata
// stands for (GgufConfigJson).
Expected<std::string> ServedModelConfigJson(const ModelEntry& m) {
  TS_ASSIGN_OR_RETURN(std::optional<GgufModel> gguf, worker::GgufModelOfEntry(m));
  if (!gguf) return ReadFileToString(m.dir + "/config.json", 16u << 20);
  TS_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(gguf->path));
  return GgufConfigJson(file);
}

// Every subfolder of `dir` holding a checkpoint (config.json), named by the folder, sorted.
Expected<std::vector<ModelEntry>> ScanModelsDir(const std::string& dir) {
  std::error_code ec;
  std::vector<ModelEntry> found;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code file_ec;
    if (std::filesystem::is_regular_file(entry.path() / "config.json", file_ec)) {
      found.push_back({entry.path().filename().string(), entry.path().string()});
    }
  }
  if (ec) return InvalidArgument("--models-dir " + dir + ": " + ec.message());
  std::sort(found.begin(), found.end(),
            [](const ModelEntry& a, const ModelEntry& b) { return a.name < b.name; });
  return found;
}

// The models `tessera list` shows (store and Hugging Face cache) that tessera can run.
Expected<std::vector<ModelEntry>> InstalledServableModels() {
  TS_ASSIGN_OR_RETURN(const Catalog* catalog, BuiltinCatalog());
  TS_ASSIGN_OR_RETURN(std::vector<InstalledModel> listed, ListInstalledModels(*catalog, false));
  std::vector<ModelEntry> found;
  for (const InstalledModel& m : listed) {
    if (!m.file.empty() && !m.verification.starts_with("refused: ")) {
      // A GGUF model (Ollama, LM Studio): resolved, and hashed when its store records a sha256.
      auto entry = ResolveServedModel(m.name);
      if (entry) {
        found.push_back(std::move(*entry));
        continue;
      }
      std::fprintf(stderr, "tessera serve: skipping installed %s (%s): %s\n", m.name.c_str(),
                   m.Where().c_str(), entry.status().message().c_str());
      continue;
    }
    auto text = ReadFileToString(m.dir + "/config.json", 16u << 20);
    if (!text || !ParseModelConfig(*text) || !CheckServedName(m.name, m.name).ok()) {
      std::fprintf(stderr, "tessera serve: skipping installed %s (%s): not a model tessera runs\n",
                   m.name.c_str(), m.Where().c_str());
      continue;
    }
    found.push_back({m.name, m.dir});
  }
  return found;
}

// --placement against every served model before the server listens: the worker would only
// find a bad one when it loads, fail, and be restarted over and over. The layer counts come
// from each model's config.json (cheap to read); a config that does not parse is left for the
// worker to report when that model is asked for.
// Each model's placement is described into `placements` (by model name) for /ready.
Status CheckPlacementFitsModels(const std::string& spec, const std::vector<ModelEntry>& models,
                                std::map<std::string, std::string>* placements, bool* uses_npu) {
  for (const ModelEntry& m : models) {
    auto text = ServedModelConfigJson(m);
    if (!text) continue;
    auto config = ParseModelConfig(*text);
    if (!config) continue;
    auto placement = ParsePlacement(spec, config->num_layers);
    if (!placement) {
      return InvalidArgument("--placement does not fit the model '" + m.name +
                             "': " + placement.status().message());
    }
    (*placements)[m.name] = placement->Describe();
    for (const PlacementStage& s : placement->stages)
      if (s.backend == "xdna" && s.layers.size() > 0) *uses_npu = true;
  }
  return Status::Ok();
}

// `serve` with layers on the NPU checks the device as `tessera doctor` does before it
// listens, and refuses to place layers on an NPU that fails, printing the fixes. The fake
// device (--npu-device fake:...) has no hardware to check and says so. Returns the device's
// name for /ready and the stats.
Expected<std::string> CheckNpuForServe(const std::vector<ModelEntry>& models,
                                       const NpuOptions& npu) {
  TS_ASSIGN_OR_RETURN(NpuDeviceChoice device, ProgramNpuDevice(npu.device));
  if (device.fake) {
    std::fprintf(stderr,
                 "tessera serve: NPU layers run on the %s device (--npu-device %s); doctor's "
                 "hardware checks skipped\n",
                 device.name.c_str(), npu.device.c_str());
    return device.name;
  }
  DoctorOptions d;
  for (const ModelEntry& m : models) {
    if (auto bytes = DirectoryBytes(m.dir)) d.model_bytes = std::max(d.model_bytes, *bytes);
  }
  const DoctorReport report = RunDoctor(d);
  if (report.devices.empty()) {
    std::fprintf(stderr, "%s", DoctorReportText(report).c_str());
    return InvalidArgument(
        "no supported NPU on this machine (npu_present above), so no layers can be placed on "
        "one; serve without --npu-layers (or with --placement cpu) to run on the CPU backend");
  }
  if (!report.ok()) {
    std::fprintf(stderr, "%s", DoctorReportText(report).c_str());
    return InvalidArgument(
        "the NPU fails the checks above, so no layers are placed on it; apply the fixes (run "
        "`tessera doctor` again to see), or serve with --placement cpu");
  }
  const NpuDevice& dev = report.devices.front();
  std::fprintf(stderr, "tessera serve: NPU %s (%s), every doctor check passed\n", dev.name.c_str(),
               dev.pci_id.c_str());
  return dev.name + " (" + dev.pci_id + ")";
}

std::string SelfExecutable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

// serve's flags (parsed by RunServeCommand).
void AddServeFlags(CliArgs& args) {
  args.AddList("model",
               "DIR, an installed model NAME (tessera list), the name of a folder in "
               "--models-dir, or ALIAS=DIR|NAME (repeatable; the first is the default)");
  args.AddString("models-dir", "a folder of checkpoint folders, each served under its name");
  args.AddList("kind",
               "NAME=KIND: what a served causal LM is (rerank, guard or decide; embedding and "
               "classifier checkpoints are recognised, and one without a chat template is a "
               "completion model) (repeatable)");
  args.AddList("tool-call-syntax",
               "[NAME=]SYNTAX: how a served model writes tool calls, for a checkpoint the "
               "catalog does not know: " +
                   ToolCallSyntaxNames() +
                   " (default: the catalog's, else guessed from the chat template and logged; "
                   "NAME= may be left out when one model is served) (repeatable)");
  args.AddString("host", "address to bind", false, "127.0.0.1");
  args.AddInt("port", "TCP port (0: any free port, printed at start)", 8000);
  AddPlacementOptions(args, "layers per backend for every model");
  args.AddInt("context",
              "positions per sequence (default: the model's, at most 4096 without --kv-memory)", 0);
  args.AddInt("max-loaded-models",
              "models resident at once (least recently used is unloaded; resident models take "
              "turns step by step, a request for one not loaded waits until a loaded one is idle)",
              1);
  args.AddFlag("no-prewarm", "do not load the default model before the first request");
  args.AddFlag("bf16-activations",
               "bf16 weights: round prompt activations to bf16 for bf16 dot products (AVX-512 "
               "BF16; faster prefill, less exact)");
  args.AddInt("request-timeout",
              "seconds a request may take before it is answered 504 and its job cancelled "
              "(the worker and its other jobs go on)",
              120);
  args.AddInt("hang-timeout",
              "seconds a cancelled job may take to stop (it stops at its next step); past it "
              "one step has hung and the worker is killed and restarted, its other jobs run "
              "again where nothing was sent yet",
              30);
  args.AddInt("socket-timeout", "seconds for a whole request (head and body) to arrive", 120);
  args.AddInt("stall-timeout",
              "seconds a client may leave our writes without progress (not reading) before it "
              "is cut and its request cancelled",
              10);
  args.AddInt("header-timeout", "seconds for a request's head to arrive", 10);
  args.AddInt("parallel",
              "sequence slots per model, decoded together (0: chosen from the cores and memory, "
              "logged)",
              0);
  args.AddInt("kv-memory",
              "MiB of KV cache per model: the block pool shared by its slots (prefix cache "
              "included); with it --context defaults to the model's own limit, at most the "
              "whole pool; a budget smaller than one block per slot is refused (0: slots x "
              "context)",
              0);
  args.AddString(
      "kv-cache",
      "KV cache precision of the cpu backend: auto (f32 for F32 weights, else bf16), bf16 or f32",
      false, "auto");
  args.AddInt("npu-queue", "NPU passes that may wait for their turn (1-1048576)", 64);
  args.AddInt("npu-queue-timeout-ms", "the longest wait of a pass for the NPU", 30000);
  args.AddString("systemone-reuse",
                 "how System One reuses a request's state: none (every question runs its whole "
                 "prompt), shared (the state runs once, first) or pinned (as shared, and recent "
                 "states stay cached for later requests)",
                 false, "none");
  args.AddInt("systemone-pinned-states", "states kept with --systemone-reuse pinned (1-1024)", 6);
  args.AddInt("max-active", "requests running at once (0: --parallel's slots)", 0);
  args.AddInt("max-queued", "requests waiting before 429 (0: twice the slots)", 0);
  args.AddInt("rate-limit",
              "requests per minute per client (0: off; default: off when every address of "
              "--host is loopback, else 30)");
  args.AddInt("max-body-bytes", "largest request body", 1 << 20);
  args.AddFlag("no-auth",
               "serve without an API key (only when every address of --host is loopback); "
               "without it, TESSERA_API_KEY or --api-keys the key is the one saved in "
               "$XDG_CONFIG_HOME/tessera/api-key (default ~/.config/tessera/api-key, mode 600), "
               "generated on the first start");
  args.AddString("api-keys",
                 "a file of named API keys, one name:key per line (mode 600; reloaded on SIGHUP), "
                 "beside TESSERA_API_KEY (named default); the name shows in the access log and "
                 "/metrics");
  args.AddFlag("shared-prefix-cache",
               "let every API key's requests reuse each other's cached prompts (by default each "
               "key's prefix cache is its own; a request's cache_salt still separates)");
  args.AddFlag("metrics-public", "let GET /metrics be scraped without the API key");
  args.AddFlag("no-ui", "do not serve the built-in web page at /");
  args.AddString("log-format",
                 "the access log and the worker's model-load lines on stderr: text (readable "
                 "lines) or json (one JSON object per line, for log shippers)",
                 false, "text");
  args.AddList("allow-origin",
               "an origin allowed to make browser (CORS) requests (repeatable; * for any)");
  args.AddString("tls-cert", "PEM certificate: serve HTTPS (with --tls-key)");
  args.AddString("tls-key", "PEM private key for --tls-cert");
  args.AddInt("http-threads",
              "event-loop threads of the HTTP front end (connections cost none while idle)", 1);
  args.AddInt("keep-alive-timeout", "seconds an idle keep-alive connection is kept open", 5);
  args.AddInt("max-connections", "open connections in total (beyond: 503 and close)", 1024);
  args.AddInt("max-connections-per-client",
              "open connections per client address (beyond: 429 and close)", 64);
}

// Every flag whose value can be checked without a model is checked here, before models are
// resolved and long before the server listens: a bad one is a one-line error and exit 2.
Status CheckServeFlags(const CliArgs& args) {
  if (const int64_t port = args.GetInt("port"); port < 0 || port > 65535)
    return InvalidArgument("--port must be between 0 and 65535");
  struct Bound {
    const char* flag;
    int64_t lo, hi;
  };
  for (const Bound& b :
       {Bound{"request-timeout", 1, 86400}, Bound{"hang-timeout", 1, 3600},
        Bound{"socket-timeout", 1, 3600}, Bound{"stall-timeout", 1, 3600},
        Bound{"max-active", 0, 256}, Bound{"max-queued", 0, 4096}, Bound{"parallel", 0, 256},
        Bound{"kv-memory", 0, 1 << 24}, Bound{"max-body-bytes", 1024, 64 << 20},
        Bound{"max-loaded-models", 1, 64}, Bound{"context", 0, 1 << 20},
        Bound{"http-threads", 1, 64}, Bound{"keep-alive-timeout", 1, 3600},
        Bound{"header-timeout", 1, 3600}, Bound{"max-connections", 1, 1000000},
        Bound{"max-connections-per-client", 1, 1000000}, Bound{"systemone-pinned-states", 1, 1024},
        Bound{"npu-queue", 1, 1 << 20}, Bound{"npu-queue-timeout-ms", 1, int64_t{86400} * 1000}}) {
    const int64_t v = args.GetInt(b.flag);
    if (v < b.lo || v > b.hi) {
      return InvalidArgument("--" + std::string(b.flag) + " must be between " +
                             std::to_string(b.lo) + " and " + std::to_string(b.hi));
    }
  }
  if (args.Has("rate-limit")) {
    if (const int64_t v = args.GetInt("rate-limit"); v < 0 || v > 1000000)
      return InvalidArgument("--rate-limit must be between 0 and 1000000");
  }
  if (auto kv = ParseKvCacheType(args.GetString("kv-cache")); !kv) return kv.status();
  if (auto isa = CpuIsaFromArgs(args); !isa) return isa.status();
  if (const std::string f = args.GetString("log-format"); f != "text" && f != "json") {
    return InvalidArgument("--log-format must be text or json, not '" + f + "'");
  }
  if (args.Has("tls-cert") != args.Has("tls-key")) {
    return InvalidArgument("--tls-cert and --tls-key must be given together");
  }
  return Status::Ok();
}

// The served models: --model entries, then --models-dir's folders, else every installed one.
Status CollectServedModels(const CliArgs& args, server::ServeOptions* out) {
  server::ServeOptions& options = *out;
  std::vector<ModelEntry> installed;
  if (args.Has("models-dir")) {
    auto scanned = ScanModelsDir(args.GetString("models-dir"));
    if (!scanned) return scanned.status();
    installed = std::move(*scanned);
  }
  auto add_model = [&](const ModelEntry& m) -> Status {
    for (const ModelEntry& other : options.models) {
      if (other.name != m.name) continue;
      if (other.dir == m.dir) return Status::Ok();
      return InvalidArgument("two models are named '" + m.name + "'");
    }
    options.models.push_back(m);
    return Status::Ok();
  };
  for (const std::string& spec : args.GetList("model")) {
    auto named = std::find_if(installed.begin(), installed.end(),
                              [&](const ModelEntry& m) { return m.name == spec; });
    auto m = named != installed.end() ? Expected<ModelEntry>(*named) : ResolveServedModel(spec);
    if (!m) return m.status();
    if (Status st = add_model(*m); !st.ok()) return st;
  }
  for (const ModelEntry& m : installed) {
    if (Status st = add_model(m); !st.ok()) return st;
  }
  if (options.models.empty() && !args.Has("models-dir")) {
    // Neither --model nor --models-dir: every installed model (tessera list) whose config.json
    // tessera can run, under the name `tessera list` shows.
    auto stored = InstalledServableModels();
    if (!stored) return stored.status();
    for (const ModelEntry& m : *stored) {
      if (Status st = add_model(m); !st.ok()) return st;
    }
    if (stored->empty()) {
      // Nothing installed: the built-in demo model, so that the page and the API answer.
      auto builtin = ResolveServedModel(kBuiltinModelName);
      if (!builtin) return builtin.status();
      std::fprintf(stderr, "tessera serve: %s\n", kBuiltinModelNotice);
      if (Status st = add_model(*builtin); !st.ok()) return st;
    }
  }
  if (options.models.empty()) {
    return InvalidArgument(
        "no models: give --model DIR, or --models-dir "
        "holding checkpoint folders, or install one "
        "with tessera pull");
  }
  return Status::Ok();
}

// Who may call: --no-auth, else TESSERA_API_KEY and the --api-keys file (checked here: a bad
// file is an error before the server starts), else the generated key saved in the user's config
// directory (read or created by RunServer once the port is bound).
Status FillAuthOptions(const CliArgs& args, server::ServeOptions* options) {
  options->shared_prefix_cache = args.GetFlag("shared-prefix-cache");
  if (args.GetFlag("no-auth")) {
    if (args.Has("api-keys")) {
      return InvalidArgument("--no-auth and --api-keys contradict each other; drop one");
    }
    // Checked on the addresses the host resolves to, when the server binds (RunServer).
    options->require_loopback = true;
    return Status::Ok();
  }
  const std::optional<std::string> env_key = ReadEnv(EnvVar::kApiKey);
  if (env_key) options->api_key = *env_key;
  if (args.Has("api-keys")) {
    options->api_keys_file = args.GetString("api-keys");
    TS_ASSIGN_OR_RETURN(options->api_keys, server::LoadApiKeysFile(options->api_keys_file));
    if (auto all = server::WithDefaultKey(options->api_keys, options->api_key); !all) {
      return all.status().WithContext("--api-keys " + options->api_keys_file);
    }
    std::fprintf(stderr, "tessera serve: %zu API key%s from %s%s (SIGHUP reloads it)\n",
                 options->api_keys.size(), options->api_keys.size() == 1 ? "" : "s",
                 options->api_keys_file.c_str(),
                 env_key ? ", and TESSERA_API_KEY as 'default'" : "");
    return Status::Ok();
  }
  if (!env_key) {
    TS_ASSIGN_OR_RETURN(
        options->saved_api_key_file,
        server::SavedApiKeyPath(ReadEnv(EnvVar::kXdgConfigHome), ReadEnv(EnvVar::kHome)));
  }
  return Status::Ok();
}

// The HTTP side's limits from the flags.
void FillHttpOptions(const CliArgs& args, server::ServeOptions* options) {
  options->host = args.GetString("host");
  options->port = static_cast<int>(args.GetInt("port"));
  options->request_timeout_s = static_cast<int>(args.GetInt("request-timeout"));
  options->hang_timeout_s = static_cast<int>(args.GetInt("hang-timeout"));
  options->socket_timeout_s = static_cast<int>(args.GetInt("socket-timeout"));
  options->stall_timeout_s = static_cast<int>(args.GetInt("stall-timeout"));
  // Requests run together up to the slots (the worker's scheduler batches them); the worker
  // may choose fewer slots for a large model's KV cache, and then queues the rest FCFS.
  int slots = static_cast<int>(args.GetInt("parallel"));
  if (slots == 0) {
    std::string why;
    slots = DefaultParallelSlots(static_cast<int>(std::thread::hardware_concurrency()), 0, 0, &why);
  }
  options->max_active =
      args.GetInt("max-active") > 0 ? static_cast<int>(args.GetInt("max-active")) : slots;
  options->max_queued =
      args.GetInt("max-queued") > 0 ? static_cast<int>(args.GetInt("max-queued")) : 2 * slots;
  options->rate_limit_per_minute =
      args.Has("rate-limit") ? static_cast<int>(args.GetInt("rate-limit")) : server::kRateLimitAuto;
  options->max_body_bytes = static_cast<size_t>(args.GetInt("max-body-bytes"));
  options->http_threads = static_cast<int>(args.GetInt("http-threads"));
  options->keep_alive_timeout_s = static_cast<int>(args.GetInt("keep-alive-timeout"));
  options->header_timeout_s = static_cast<int>(args.GetInt("header-timeout"));
  options->max_connections = static_cast<int>(args.GetInt("max-connections"));
  options->max_connections_per_client = static_cast<int>(args.GetInt("max-connections-per-client"));
  options->allow_origins = args.GetList("allow-origin");
  options->metrics_public = args.GetFlag("metrics-public");
  options->web_ui = !args.GetFlag("no-ui");
  options->access_log_json = args.GetString("log-format") == "json";
  if (args.Has("tls-cert")) options->tls_cert = args.GetString("tls-cert");
  if (args.Has("tls-key")) options->tls_key = args.GetString("tls-key");
}

// The worker's command line: the models as resolved here, and the flags it shares.
std::vector<std::string> WorkerArgs(const CliArgs& args, const std::vector<ModelEntry>& models,
                                    const std::string& placement, const NpuOptions& npu) {
  std::vector<std::string> args_out;
  for (const ModelEntry& m : models) {
    args_out.push_back("--model");
    args_out.push_back(m.name + "=" + m.dir);
    args_out.push_back("--kind");
    args_out.push_back(m.name + "=" + std::string(ModelKindName(m.kind)));
    if (m.tool_call_syntax) {
      args_out.push_back("--tool-call-syntax");
      args_out.push_back(m.name + "=" + ToolCallSyntaxName(*m.tool_call_syntax));
    }
  }
  args_out.insert(
      args_out.end(),
      {"--placement", placement, "--context", std::to_string(args.GetInt("context")), "--parallel",
       std::to_string(args.GetInt("parallel")), "--kv-memory",
       std::to_string(args.GetInt("kv-memory")), "--kv-cache", args.GetString("kv-cache"),
       "--max-loaded-models", std::to_string(args.GetInt("max-loaded-models"))});
  if (args.Has("cpu-isa")) {
    args_out.insert(args_out.end(), {"--cpu-isa", args.GetString("cpu-isa")});
  }
  args_out.insert(args_out.end(), {"--npu-device", npu.device, "--npu-queue",
                                   std::to_string(npu.queue), "--npu-queue-timeout-ms",
                                   std::to_string(npu.queue_timeout_ms), "--systemone-reuse",
                                   args.GetString("systemone-reuse"), "--systemone-pinned-states",
                                   std::to_string(args.GetInt("systemone-pinned-states"))});
  if (args.GetFlag("no-prewarm")) args_out.push_back("--no-prewarm");
  args_out.insert(args_out.end(), {"--log-format", args.GetString("log-format")});
  if (args.GetFlag("bf16-activations")) args_out.push_back("--bf16-activations");
  return args_out;
}

}  // namespace

int RunServeCommand(int argc, char** argv) {
  CliArgs args("serve");
  AddServeFlags(args);
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("serve", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    return 0;
  }
  auto placement = PlacementFromArgs(args);
  if (!placement) return ReportError("serve", placement.status());
  if (Status st = CheckPlacementSpec(*placement); !st.ok()) {
    return ReportError("serve", InvalidArgument("--" + st.message()));
  }
  if (Status st = CheckServeFlags(args); !st.ok()) return ReportError("serve", st);
  auto npu = NpuOptionsFromArgs(args);
  if (!npu) return ReportError("serve", npu.status());
  server::ServeOptions options;
  if (Status st = CollectServedModels(args, &options); !st.ok()) return ReportError("serve", st);
  bool uses_npu = false;
  if (Status st =
          CheckPlacementFitsModels(*placement, options.models, &options.placements, &uses_npu);
      !st.ok()) {
    return ReportError("serve", st);
  }
  if (uses_npu) {
    auto device = CheckNpuForServe(options.models, *npu);
    if (!device) return ReportError("serve", device.status());
    options.npu_device = *device;
  }
  if (Status st = worker::ResolveModelKinds(options.models, args.GetList("kind")); !st.ok()) {
    return ReportError("serve", st);
  }
  if (Status st = worker::DeclareToolCallSyntaxes(options.models, args.GetList("tool-call-syntax"));
      !st.ok()) {
    return ReportError("serve", st);
  }
  auto systemone_reuse = worker::ParseSystemOneReuse(args.GetString("systemone-reuse"));
  if (!systemone_reuse) return ReportError("serve", systemone_reuse.status());
  for (const ModelEntry& m : options.models) {
    // A declared syntax is shown here; the catalog's or a guess is logged when the worker loads.
    const std::string syntax = m.tool_call_syntax ? std::string(", tool-call syntax ") +
                                                        ToolCallSyntaxName(*m.tool_call_syntax) +
                                                        " (--tool-call-syntax)"
                                                  : "";
    std::fprintf(stderr, "tessera serve: model '%s' (%s%s)\n", m.name.c_str(),
                 std::string(ModelKindName(m.kind)).c_str(), syntax.c_str());
  }
  if (static_cast<int64_t>(options.models.size()) > args.GetInt("max-loaded-models")) {
    // The worker interleaves only resident models; the operator should know the others wait.
    std::fprintf(stderr,
                 "tessera serve: %zu models, at most %lld resident at once "
                 "(--max-loaded-models): a request for one not loaded waits until a loaded "
                 "one is idle\n",
                 options.models.size(), static_cast<long long>(args.GetInt("max-loaded-models")));
  }
  FillHttpOptions(args, &options);
  if (Status st = FillAuthOptions(args, &options); !st.ok()) return ReportError("serve", st);
  options.executable = SelfExecutable();
  if (options.executable.empty())
    return ReportError("serve", Internal("cannot find this program's own path"));
  options.worker_args = WorkerArgs(args, options.models, *placement, *npu);
  return server::RunServer(options);
}

int RunWorkerCommand(int argc, char** argv) {
  CliArgs args("worker");
  args.AddInt("fd", "the socket to the server", 3);
  args.AddList("model", "NAME=DIR (repeatable; the first is the default)");
  args.AddList("kind", "NAME=KIND, each model's kind as the server resolved it (repeatable)");
  args.AddList("tool-call-syntax", "NAME=SYNTAX, as the server was given it (repeatable)");
  args.AddString("placement", "layers per backend", false, "cpu");
  args.AddInt("context", "KV positions per model", 0);
  args.AddInt("parallel", "sequence slots per model (0: from cores and memory)", 0);
  args.AddInt("kv-memory", "MiB of KV cache per model (0: no budget)", 0);
  args.AddString(
      "kv-cache",
      "KV cache precision of the cpu backend: auto (f32 for F32 weights, else bf16), bf16 or f32",
      false, "auto");
  args.AddInt("max-loaded-models", "models resident at once", 1);
  args.AddString("cpu-isa", "the cpu backend's kernel family (default: the best)");
  args.AddString("npu-device", "the NPU device for xdna layers", false, "");
  args.AddInt("npu-queue", "NPU passes that may wait", 64);
  args.AddInt("npu-queue-timeout-ms", "the longest wait for the NPU", 30000);
  args.AddString("systemone-reuse", "none, shared or pinned", false, "none");
  args.AddInt("systemone-pinned-states", "System One states kept pinned", 6);
  args.AddFlag("no-prewarm", "do not load the default model at start");
  args.AddString("log-format", "model-load progress lines: text or json", false, "text");
  args.AddFlag("bf16-activations", "bf16 prompt activations for BF16 weights");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("worker", st);
  worker::WorkerOptions options;
  for (const std::string& spec : args.GetList("model")) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return ReportError("worker", InvalidArgument("--model must be NAME=DIR"));
    options.models.push_back({spec.substr(0, eq), spec.substr(eq + 1)});
  }
  for (const std::string& spec : args.GetList("kind")) {
    const size_t eq = spec.find('=');
    auto kind = eq == std::string::npos ? std::nullopt : ParseModelKind(spec.substr(eq + 1));
    if (!kind) return ReportError("worker", InvalidArgument("--kind must be NAME=KIND"));
    for (worker::ModelEntry& m : options.models) {
      if (m.name == spec.substr(0, eq)) m.kind = *kind;
    }
  }
  if (Status st = worker::DeclareToolCallSyntaxes(options.models, args.GetList("tool-call-syntax"));
      !st.ok()) {
    return ReportError("worker", st);
  }
  options.placement = args.GetString("placement");
  options.context = args.GetInt("context");
  options.parallel = static_cast<int>(std::clamp<int64_t>(args.GetInt("parallel"), 0, 256));
  options.kv_memory_mib = std::max<int64_t>(args.GetInt("kv-memory"), 0);
  auto kv_cache = ParseKvCacheType(args.GetString("kv-cache"));
  if (!kv_cache) return ReportError("worker", kv_cache.status());
  options.kv_cache = *kv_cache;
  auto cpu_isa = CpuIsaFromArgs(args);
  if (!cpu_isa) return ReportError("worker", cpu_isa.status());
  options.cpu_isa = *cpu_isa;
  auto npu = NpuOptionsFromArgs(args);
  if (!npu) return ReportError("worker", npu.status());
  options.npu = *npu;
  auto reuse = worker::ParseSystemOneReuse(args.GetString("systemone-reuse"));
  if (!reuse) return ReportError("worker", reuse.status());
  options.systemone_resume = *reuse;
  options.systemone_entries =
      static_cast<size_t>(std::clamp<int64_t>(args.GetInt("systemone-pinned-states"), 1, 1024));
  options.max_loaded_models =
      static_cast<int>(std::max<int64_t>(1, args.GetInt("max-loaded-models")));
  options.prewarm = !args.GetFlag("no-prewarm");
  options.log_json = args.GetString("log-format") == "json";
  options.bf16_activations = args.GetFlag("bf16-activations");
  return worker::RunWorker(static_cast<int>(args.GetInt("fd")), options);
}

}  // namespace tessera
