// The built-in demo model's files (models/stories260k), defined by the source that
// cmake/embed_files.cmake generates at build time; read only by catalog/builtin_model.cc.
#pragma once

#include <cstddef>

#include "base/embedded_file.h"

namespace tessera {

extern const EmbeddedFile kBuiltinModelFiles[];
extern const size_t kBuiltinModelFilesCount;

}  // namespace tessera
