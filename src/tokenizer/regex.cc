#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

namespace tessera::tok {
namespace {

// Oniguruma's Unicode \s: U+0009..U+000D, U+0085 and the Zs/Zl/Zp categories, i.e. the
// White_Space property. Written as class contents so it can be spliced into [...] too.
constexpr std::string_view kWhiteSpaceClass =
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

std::string RewriteWhitespaceEscapes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  size_t class_start = 0;  // position in `pattern` just after '[' or '[^'
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char n = pattern[i + 1];
      if (n == 's') {
        if (in_class) {
          out += kWhiteSpaceClass;
        } else {
          out += '[';
          out += kWhiteSpaceClass;
          out += ']';
        }
        ++i;
        continue;
      }
      if (n == 'S' && !in_class) {
        out += "[^";
        out += kWhiteSpaceClass;
        out += ']';
        ++i;
        continue;
      }
      out += c;
      out += n;
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      class_start = i + 1;
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
        // POSIX class such as [:alpha:]: copy through the closing ":]".
        size_t close = pattern.find(":]", i + 2);
        if (close != std::string_view::npos) {
          out.append(pattern.substr(i, close + 2 - i));
          i = close + 1;
          continue;
        }
      }
      if (c == ']' && i != class_start) in_class = false;
    }
    out += c;
  }
  return out;
}

std::string PcreErrorText(int code) {
  PCRE2_UCHAR buffer[256];
  int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  if (n < 0) return "error " + std::to_string(code);
  return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

Expected<std::shared_ptr<const Regex>> CompileRaw(const std::string& pcre_pattern,
                                                  std::string_view shown, uint32_t extra);

}  // namespace

struct RegexFactory {
  static std::shared_ptr<Regex> Make() { return std::shared_ptr<Regex>(new Regex()); }
  static void Set(Regex* re, std::string pattern, void* code, bool jit) {
    re->pattern_ = std::move(pattern);
    re->code_ = code;
    re->jit_ = jit;
  }
};

namespace {

Expected<std::shared_ptr<const Regex>> CompileRaw(const std::string& pcre_pattern,
                                                  std::string_view shown, uint32_t extra) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre_pattern.data()), pcre_pattern.size(),
                    PCRE2_UTF | extra, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    return InvalidArgument("bad regex pattern '" + std::string(shown) +
                           "': " + PcreErrorText(error_code) + " (near offset " +
                           std::to_string(error_offset) + ")");
  }
  bool jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  auto re = RegexFactory::Make();
  RegexFactory::Set(re.get(), std::string(shown), code, jit);
  return std::shared_ptr<const Regex>(std::move(re));
}

}  // namespace

Expected<std::shared_ptr<const Regex>> Regex::Compile(std::string_view pattern) {
  return CompileRaw(RewriteWhitespaceEscapes(pattern), pattern, PCRE2_UCP);
}

Expected<std::shared_ptr<const Regex>> Regex::Literal(std::string_view literal) {
  return CompileRaw(std::string(literal), literal, PCRE2_LITERAL);
}

Regex::~Regex() {
  if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

Status Regex::FindAll(std::string_view text, std::vector<RegexMatch>* out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  if (md == nullptr) return ResourceExhausted("out of memory creating regex match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  size_t last_end = static_cast<size_t>(-1);
  Status status;
  while (pos <= text.size()) {
    int rc = jit_
                 ? pcre2_jit_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr)
                 : -1;
    if (!jit_ || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      status = ResourceExhausted("regex '" + pattern_ + "' failed at byte " + std::to_string(pos) +
                                 ": " + PcreErrorText(rc));
      break;
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t start = ov[0];
    size_t end = ov[1];
    if (end < start || end > text.size()) break;  // \K tricks; never in tokenizer patterns
    if (start == end) {
      // An empty match right where the previous match ended is skipped, like find_iter.
      if (start != last_end) out->push_back({start, end});
      // Step over one whole UTF-8 character so we never restart inside one.
      size_t next = end + 1;
      while (next < text.size() && (static_cast<unsigned char>(text[next]) & 0xC0) == 0x80) {
        ++next;
      }
      pos = next;
    } else {
      out->push_back({start, end});
      pos = end;
    }
    last_end = end;
  }
  pcre2_match_data_free(md);
  return status;
}

}  // namespace tessera::tok
