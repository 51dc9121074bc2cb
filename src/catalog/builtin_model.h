// The built-in demo model: stories260k (models/stories260k in the repository, MIT, from
// Karpathy's llama2.c), a 260K-parameter Llama trained on TinyStories, embedded in the binary
// at build time so that a fresh clone or an installed binary can run something with no
// download. It is written out once to $TESSERA_MODELS/.builtin/stories260k (a hidden folder:
// `tessera list` does not show it) and loaded from there like any checkpoint folder.
//
//   TS_ASSIGN_OR_RETURN(std::string dir, MaterializeBuiltinModel());
//   LoadCheckpoint(dir);
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace tessera {

// The name generate, chat, serve and resolve accept for it (the catalog has no entry of
// this name, so nothing installed can take it).
inline constexpr char kBuiltinModelName[] = "stories260k";

// One line for stderr when a command picks the demo model because none was given.
inline constexpr char kBuiltinModelNotice[] =
    "no model given: using the built-in demo model stories260k (a 260K-parameter story "
    "generator); `tessera pull NAME` gets a real one (`tessera list --catalog` names them)";

// The folder holding the built-in model's files, written (or rewritten, when any file differs
// from the embedded bytes) under tessera's store first. IoError says which path failed.
Expected<std::string> MaterializeBuiltinModel();

}  // namespace tessera
