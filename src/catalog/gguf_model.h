// GgufModel: what a name or path resolves to when the model is a GGUF file, from any store,
// and the one struct the GGUF loader takes. The file is read in place: nothing is copied, and
// nothing is ever written into another program's store.
//
//   TS_ASSIGN_OR_RETURN(ResolvedModel r, ResolveModel("qwen2.5:0.5b", *catalog));
//   if (r.gguf) {
//     TS_RETURN_IF_ERROR(VerifyGgufModel(*r.gguf, progress));  // once, when the model is opened
//     // load r.gguf->path; apply go_template / system_prompt / params where they are set
//   }
//
// Fields by source:
//   Ollama     path = blobs/sha256-<hex> (no .gguf suffix), expected_sha256 = <hex>, and the
//              template, system, params and license layers as read (each small layer is
//              already checked against its digest); quantization = the config's file_type.
//   LM Studio  path = ~/.lmstudio/models/<publisher>/<repo>/<file>.gguf; no layers, no digest.
//   path       a GGUF file given by path, or the one GGUF file of a folder given by path.
// Quantization falls back to the type named in the file name ("...-Q4_K_M.gguf") and is ""
// when neither says; it is shown by `tessera list`, and the GGUF file's own tensor types are
// what the loader goes by.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "catalog/model_location.h"
#include "catalog/ollama_manifest.h"
#include "format/gguf.h"  // IsGgufFile

namespace tessera {

struct GgufModel {
  std::string name;  // as `tessera list` shows it: "qwen2.5:0.5b", "pub/repo/f.gguf", a path
  ModelLocation location = ModelLocation::kPath;
  std::string path;  // the GGUF file
  uint64_t size_bytes = 0;
  // Lowercase hex sha256 the file must have (Ollama's blobs are named by it); "" when no store
  // records one. VerifyGgufModel checks it.
  std::string expected_sha256;
  std::string quantization;    // "Q4_K_M", "" when unknown
  std::string family;          // Ollama's model_family, "" elsewhere
  std::string parameter_size;  // Ollama's model_type, e.g. "494.03M"; "" elsewhere

  // Ollama's layers (unset elsewhere). Applying them is the chat and sampling code's job.
  std::optional<std::string> go_template{};    // the template layer's Go text/template, as is
  std::optional<std::string> system_prompt{};  // the system layer
  std::optional<OllamaParams> params{};        // the params layer
  std::vector<std::string> licenses;           // the license layers' texts
  std::string manifest_path;                   // the manifest the model came from
};

// The GGUF file's size and, when expected_sha256 is set, its sha256 (streamed, reported as the
// phase "verifying <name>" in bytes). A mismatch is Corrupt, naming the file and what to do.
Status VerifyGgufModel(const GgufModel& model, const ProgressCallback& progress = {});

// The files of `dir` whose names end in ".gguf" (regular files, symlinks followed), by name.
std::vector<std::string> GgufFileNamesIn(const std::string& dir);

// The GGUF type named in a file name, upper case: the last of F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S/M/L, Q4_K(_S/_M), Q5_K(_S/_M), Q6_K, IQ1_S/M, IQ2_XXS/XS/S/M,
// IQ3_XXS/XS/S/M, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4 that stands alone (after the start,
// '-', '.' or '_'; before the end, '-' or '.'), ignoring case; "" when none does.
std::string QuantizationFromFileName(std::string_view file_name);

// A GGUF file read in place: its size and the quantization its name gives. NotFound when it
// is missing; Unsupported when it is not a GGUF file.
Expected<GgufModel> GgufModelOfFile(const std::string& path, std::string name,
                                    ModelLocation location);

}  // namespace tessera
