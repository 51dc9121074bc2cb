// A file carried inside the binary as a byte array, written at build time by
// cmake/embed_files.cmake (the web page, the built-in demo model).
//
//   for (size_t i = 0; i < kWebUiFilesCount; ++i) Serve(kWebUiFiles[i].name, kWebUiFiles[i].data);
#pragma once

#include <cstddef>

namespace tessera {

struct EmbeddedFile {
  const char* name;  // relative to the folder it was embedded from, e.g. "app.js"
  const unsigned char* data;
  size_t size;
};

}  // namespace tessera
