// Unicode character classes used by normalizers, pre-tokenizers and added-token matching,
// matching the Rust `char` predicates that Hugging Face tokenizers relies on.
//
//   if (IsWhitespace(cp)) ...      // Rust char::is_whitespace (White_Space property)
//   if (IsWordChar(cp)) ...        // regex \w: letters, marks, numbers, connector punctuation
#pragma once

#include <utf8proc.h>

#include <string>
#include <string_view>

namespace tessera::tok {

inline bool IsWhitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

inline utf8proc_category_t Category(char32_t c) {
  return static_cast<utf8proc_category_t>(utf8proc_category(static_cast<utf8proc_int32_t>(c)));
}

// Rust char::is_numeric: general categories Nd, Nl, No.
inline bool IsNumeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  auto cat = Category(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

inline bool IsLetter(char32_t c) {
  auto cat = Category(c);
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}

inline bool IsPunctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  }
  auto cat = Category(c);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

// The `\w` of Rust's regex crate (close enough: letters, marks, numbers, connectors).
inline bool IsWordChar(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  auto cat = Category(c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_MN && cat <= UTF8PROC_CATEGORY_ME) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) ||
         cat == UTF8PROC_CATEGORY_PC;
}

// Decodes the last code point of `text` (valid UTF-8) and its byte length.
inline char32_t LastCodepoint(std::string_view text, size_t* length) {
  size_t i = text.size();
  while (i > 0 && (static_cast<unsigned char>(text[i - 1]) & 0xC0) == 0x80) --i;
  if (i > 0) --i;
  *length = text.size() - i;
  utf8proc_int32_t cp = 0;
  utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                   static_cast<utf8proc_ssize_t>(*length), &cp);
  return cp < 0 ? 0xFFFD : static_cast<char32_t>(cp);
}

}  // namespace tessera::tok
