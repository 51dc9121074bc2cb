// The configure-time facts; apps/CMakeLists.txt defines them on this file only, so a change
// of build type or compiler recompiles this file and nothing else.
#include "build_info.h"

namespace tessera {

const char* BuildVersion() {
  return TESSERA_VERSION;
}
const char* BuildType() {
  return TESSERA_BUILD_TYPE;
}
const char* BuildCompiler() {
  return TESSERA_COMPILER;
}

}  // namespace tessera
