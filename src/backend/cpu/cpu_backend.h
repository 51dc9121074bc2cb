// CpuBackend: decoder layers on the host CPU with weights packed at load into F32, BF16,
// INT8 (per-row scale) or INT4 (per-32-block scale) panels (see packed_matrix.h), fp32 KV
// cache, and SIMD kernels chosen once for the CPU (cpu_features.h). Work inside a forward
// call is split over a persistent thread pool by output panels (matmuls) and by
// (token, head) pairs (attention). Prompts run in blocks of up to 128 tokens, so each
// weight is streamed from memory once per block; nothing allocates after load.
//
//   auto cpu = MakeCpuBackend({.weights = WeightFormat::kInt8, .threads = 2});
//   TS_RETURN_IF_ERROR(cpu->LoadLayers(*ckpt, {0, ckpt->config.num_layers}, {1, 2048}));
//   TS_RETURN_IF_ERROR(cpu->LoadHead(*ckpt));
//   cpu->name();  // "cpu-avx512-int8"
//
// WeightFormat::kAuto picks BF16 for BF16/F16 checkpoints and F32 for F32 ones. The
// instruction set is the best the CPU has, or the one BackendOptions::cpu_isa or the `isa`
// argument asks for.
#pragma once

#include <memory>
#include <optional>

#include "backend/backend.h"
#include "backend/cpu/cpu_features.h"

namespace tessera {

// `isa`, when given and supported by this CPU, overrides options.cpu_isa (tests use it to run
// every path); an unsupported one falls back to the best family. options.cpu_isa naming a
// family this CPU lacks makes loading fail with the families it has.
std::unique_ptr<Backend> MakeCpuBackend(const BackendOptions& options,
                                        std::optional<CpuIsa> isa = std::nullopt);

}  // namespace tessera
