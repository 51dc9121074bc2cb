// One model `tessera serve` serves, as the server and its worker both know it: its name, where
// it is, its kind and its tool-call syntax. Apart from worker.h so that the server's options
// (http_server.h) name it without the worker's loading code.
//
//   worker::ModelEntry m{"tiny", "/models/tiny", ModelKind::kChat};
#pragma once

#include <optional>
#include <string>

#include "chat/tool_call_syntax.h"
#include "format/model_kind.h"

namespace tessera::worker {

struct ModelEntry {
  std::string name;  // what requests call it
  // The checkpoint folder, or a GGUF model as `tessera serve` resolved it: its file by
  // absolute path, or its Ollama name (GgufModelOfEntry resolves it again, without rehashing).
  std::string dir;
  // What it serves: recognised from the checkpoint (DetectModelKind) or declared by the
  // operator for causal LMs that are rerankers, guards or deciders (ResolveModelKinds).
  ModelKind kind = ModelKind::kChat;
  // --tool-call-syntax for this model (ModelLoadOptions::tool_call_syntax); unset: the
  // catalog's declaration, else a logged guess from the chat template.
  std::optional<ToolCallSyntax> tool_call_syntax{};
};

}  // namespace tessera::worker
