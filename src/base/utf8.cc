#include "base/utf8.h"

#include <cstdint>

namespace tessera {
namespace {

// Returns the expected sequence length for a lead byte, 0 if it can never lead.
int SequenceLength(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Valid range for the second byte of a sequence starting with lead byte b.
void SecondByteRange(uint8_t b, uint8_t* lo, uint8_t* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (b == 0xE0) *lo = 0xA0;
  if (b == 0xED) *hi = 0x9F;
  if (b == 0xF0) *lo = 0x90;
  if (b == 0xF4) *hi = 0x8F;
}

}  // namespace

bool NextCodepoint(std::string_view text, size_t* pos, char32_t* cp) {
  if (*pos >= text.size()) return false;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  size_t i = *pos;
  uint8_t b0 = s[i];
  int len = SequenceLength(b0);
  if (len == 1) {
    *cp = b0;
    *pos = i + 1;
    return true;
  }
  if (len == 0) {
    *cp = kReplacementChar;
    *pos = i + 1;
    return true;
  }
  uint8_t lo, hi;
  SecondByteRange(b0, &lo, &hi);
  char32_t value = b0 & (0xFF >> (len + 1));
  size_t j = i + 1;
  for (int k = 1; k < len; ++k, ++j) {
    if (j >= text.size()) {
      *cp = kReplacementChar;
      *pos = j;
      return true;
    }
    uint8_t b = s[j];
    uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      *cp = kReplacementChar;
      *pos = j;  // maximal subpart: stop before the offending byte
      return true;
    }
    value = (value << 6) | (b & 0x3F);
  }
  *cp = value;
  *pos = j;
  return true;
}

void AppendUtf8(std::string* out, char32_t cp) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp;
    NextCodepoint(text, &pos, &cp);
    if (cp == kReplacementChar) {
      // U+FFFD itself is valid when it was literally encoded (EF BF BD).
      if (pos - start != 3 || text.substr(start, 3) != "\xEF\xBF\xBD") return false;
    }
  }
  return true;
}

size_t CompleteUtf8PrefixLength(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  // An incomplete sequence is at most 3 bytes long: look back for its lead byte.
  size_t back = n < 3 ? n : 3;
  for (size_t k = 1; k <= back; ++k) {
    uint8_t b = s[n - k];
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    int len = SequenceLength(b);
    if (len <= 1) return n;  // ASCII or an impossible lead: everything is complete
    if (static_cast<size_t>(len) <= k) return n;  // the sequence is already complete
    // Check that the bytes so far could still form a valid sequence.
    uint8_t lo, hi;
    SecondByteRange(b, &lo, &hi);
    if (k >= 2 && (s[n - k + 1] < lo || s[n - k + 1] > hi)) return n;
    return n - k;
  }
  return n;
}

std::string SanitizeUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  char32_t cp;
  while (NextCodepoint(text, &pos, &cp)) AppendUtf8(&out, cp);
  return out;
}

}  // namespace tessera
