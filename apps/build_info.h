// What this binary is: version, commit, build type and compiler, fixed when it was built
// (apps/CMakeLists.txt). `tessera --version` prints them.
//
//   std::printf("tessera %s (%s)\n", BuildVersion(), BuildGitCommit());
#pragma once

namespace tessera {

const char* BuildVersion();    // "0.1.0", the CMake project version
const char* BuildGitCommit();  // "3f2a9c1d0b7e" or "3f2a9c1d0b7e-dirty"; "unknown" without git
const char* BuildType();       // CMAKE_BUILD_TYPE: "Release", "Debug", ...
const char* BuildCompiler();   // "GNU 12.2.0"

}  // namespace tessera
