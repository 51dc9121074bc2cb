// An independent, deliberately naive forward pass for the tests: whole sequence at once,
// double precision, no KV cache, weights read straight from the checkpoint tensors. It shares
// no code with the backends, so agreement is evidence, not tautology.
#pragma once

#include <cstdint>
#include <vector>

#include "model/checkpoint.h"

namespace tessera::test {

// Logits [n_tokens][vocab] for every position of `tokens`.
std::vector<std::vector<double>> NaiveForward(const Checkpoint& ckpt,
                                              const std::vector<int32_t>& tokens);

// The hidden state [n_tokens][hidden] after the final norm (what the LM head, a score head or
// last-token pooling reads).
std::vector<std::vector<double>> NaiveFinalHidden(const Checkpoint& ckpt,
                                                  const std::vector<int32_t>& tokens);

}  // namespace tessera::test
