// The reference backend: the plain fp32 forward pass, written to be read in one sitting and
// kept forever as the oracle every fast path is tested against. Weights (F32/F16/BF16) are
// widened to fp32 at load; reductions accumulate in double so the oracle is more exact than
// anything it judges. Not fast, on purpose.
//
//   auto backend = MakeReferenceBackend();
//   backend->LoadLayers(*ckpt, {0, ckpt->config.num_layers}, {1, 512});
#pragma once

#include <memory>

#include "backend/backend.h"

namespace tessera {

std::unique_ptr<Backend> MakeReferenceBackend();

}  // namespace tessera
