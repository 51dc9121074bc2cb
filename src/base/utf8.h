// UTF-8 helpers shared by the tokenizer, the detokenizer and the parsers.
//
//   size_t pos = 0; char32_t cp;
//   while (NextCodepoint(text, &pos, &cp)) { ... }   // invalid bytes yield U+FFFD
//   AppendUtf8(&out, U'é');
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point at *pos and advances *pos. Returns false at the end of the text.
// An ill-formed sequence (overlong, surrogate, > U+10FFFF, truncated) yields U+FFFD and
// advances by the maximal invalid subpart, as the Unicode standard recommends.
bool NextCodepoint(std::string_view text, size_t* pos, char32_t* cp);

// Appends the UTF-8 encoding of cp (U+FFFD for surrogates and values past U+10FFFF).
void AppendUtf8(std::string* out, char32_t cp);

bool IsValidUtf8(std::string_view text);

// Length of the longest prefix of `bytes` that ends on a character boundary, i.e. without
// an incomplete trailing multi-byte sequence that more bytes could still complete. Bytes
// that can never start or continue a valid sequence count as complete (they will render as
// U+FFFD) so that a stream never stalls on garbage.
size_t CompleteUtf8PrefixLength(std::string_view bytes);

// Replaces every ill-formed sequence with U+FFFD.
std::string SanitizeUtf8(std::string_view text);

}  // namespace tessera
