// SentencePiece BPE merges: the ranked merge list Hugging Face's converter derives from a
// SentencePiece vocabulary and its piece scores (transformers' SentencePieceExtractor /
// generate_merges). A SentencePiece BPE model merges the adjacent pair whose concatenation is
// the highest-scoring piece; written as ranked BPE merges this is: every split of every piece
// into two pieces of the vocabulary, ordered by the piece's score (highest first), then by
// the left and right lengths in code points (longest first), then by vocabulary order and the
// ids of the two parts. Internal to the tokenizer library.
//
//   std::vector<std::pair<int32_t, int32_t>> merges =
//       DeriveSentencePieceMerges(pieces, scores);   // pieces[id], scores[id]; ids of the parts
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessera::tok {

// `pieces` holds every piece by id ("" = no piece at that id); `scores` has one score per id.
// Both spans must have the same size.
std::vector<std::pair<int32_t, int32_t>> DeriveSentencePieceMerges(
    std::span<const std::string> pieces, std::span<const float> scores);

}  // namespace tessera::tok
