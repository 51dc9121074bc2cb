// A TokenVocabulary from a loaded Tokenizer: the bytes every token id adds to the text.
//
//   TS_ASSIGN_OR_RETURN(auto vocab, VocabularyFromTokenizer(tokenizer, eos_ids));
//
// Added tokens marked special are never allowed (eos ids: only at the end of a document).
// Byte-level tokens that are a piece of a UTF-8 character (which Decode would turn into
// U+FFFD) keep their raw bytes; SentencePiece byte-fallback tokens (<0xAB>) give their byte.
#pragma once

#include <memory>
#include <span>

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

Expected<std::shared_ptr<const TokenVocabulary>> VocabularyFromTokenizer(
    const Tokenizer& tokenizer, std::span<const int32_t> eos_ids);

}  // namespace tessera
