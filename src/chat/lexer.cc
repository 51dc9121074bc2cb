#include "chat/lexer.h"

#include <cstdint>
#include <cstring>

#include "base/utf8.h"

namespace tessera::jinja {

bool IsPythonSpace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

std::string_view StripPythonSpace(std::string_view s, bool left, bool right) {
  size_t begin = 0;
  if (left) {
    while (begin < s.size()) {
      size_t pos = begin;
      char32_t cp;
      NextCodepoint(s, &pos, &cp);
      if (!IsPythonSpace(cp)) break;
      begin = pos;
    }
  }
  size_t end = s.size();
  if (right) {
    // Walk forward remembering where the trailing run of spaces began.
    size_t pos = begin, run_start = s.size();
    bool in_run = false;
    while (pos < s.size()) {
      size_t start = pos;
      char32_t cp;
      NextCodepoint(s, &pos, &cp);
      if (IsPythonSpace(cp)) {
        if (!in_run) run_start = start;
        in_run = true;
      } else {
        in_run = false;
      }
    }
    end = in_run ? run_start : s.size();
  }
  if (end < begin) end = begin;
  return s.substr(begin, end - begin);
}

namespace {

class Lexer {
 public:
  Lexer(std::string source, size_t max_tokens) : src_(std::move(source)), max_(max_tokens) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Status Run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t tag = FindTagStart(pos);
      std::string data = src_.substr(pos, tag - pos);
      if (tag == src_.size()) {
        TS_RETURN_IF_ERROR(Emit(TokenKind::kData, std::move(data), pos));
        break;
      }
      char type = src_[tag + 1];  // '{', '%' or '#'
      char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      ApplyLeftWhitespaceControl(&data, pos, type, modifier);
      TS_RETURN_IF_ERROR(Emit(TokenKind::kData, std::move(data), pos));
      size_t body = tag + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (type == '#') {
        TS_ASSIGN_OR_RETURN(pos, SkipComment(tag, body));
      } else if (type == '%' && IsRawTag(body)) {
        TS_ASSIGN_OR_RETURN(pos, LexRaw(tag, body));
      } else {
        TS_ASSIGN_OR_RETURN(pos, LexTag(tag, body, type == '%'));
      }
    }
    return Emit(TokenKind::kEnd, "", src_.size());
  }

  std::vector<Token> TakeTokens() { return std::move(tokens_); }

 private:
  // Line and column (in code points) of a byte offset. Tokens arrive in increasing order, so
  // the column count resumes from the previous token on the same line instead of rescanning.
  void Position(size_t offset, int* line, int* column) const {
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      if (line_starts_[mid] <= offset)
        lo = mid;
      else
        hi = mid;
    }
    size_t from = line_starts_[lo];
    int col = 1;
    if (cache_line_ == lo && cache_offset_ <= offset) {
      from = cache_offset_;
      col = cache_column_;
    }
    for (size_t i = from; i < offset && i < src_.size(); ++i) {
      if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) ++col;
    }
    cache_line_ = lo;
    cache_offset_ = offset;
    cache_column_ = col;
    *line = static_cast<int>(lo + 1);
    *column = col;
  }

  Status ErrorAt(size_t offset, const std::string& message) const {
    int line, column;
    Position(offset, &line, &column);
    return InvalidArgument("template line " + std::to_string(line) + ", column " +
                           std::to_string(column) + ": " + message);
  }

  Status Emit(TokenKind kind, std::string text, size_t offset) {
    if (kind == TokenKind::kData && text.empty()) return Status::Ok();
    if (tokens_.size() >= max_) return ErrorAt(offset, "template has too many tokens");
    Token t{kind, std::move(text)};
    Position(offset, &t.line, &t.column);
    tokens_.push_back(std::move(t));
    return Status::Ok();
  }

  size_t FindTagStart(size_t pos) const {
    while (true) {
      size_t at = src_.find('{', pos);
      if (at == std::string::npos || at + 1 >= src_.size()) return src_.size();
      char c = src_[at + 1];
      if (c == '{' || c == '%' || c == '#') return at;
      pos = at + 1;
    }
  }

  // '-' strips all whitespace before the tag; otherwise lstrip_blocks strips the spaces
  // between the start of the line and a block or comment tag, unless the tag says '+'.
  void ApplyLeftWhitespaceControl(std::string* data, size_t data_start, char type,
                                  char modifier) const {
    if (modifier == '-') {
      *data = std::string(StripPythonSpace(*data, false, true));
      return;
    }
    if (modifier == '+' || type == '{') return;
    size_t newline = data->rfind('\n');
    size_t line_pos = newline == std::string::npos ? 0 : newline + 1;
    bool line_starting = data_start == 0 || src_[data_start - 1] == '\n';
    if (line_pos == 0 && !line_starting) return;
    std::string_view rest = std::string_view(*data).substr(line_pos);
    if (!rest.empty() && StripPythonSpace(rest, true, false).empty()) data->resize(line_pos);
  }

  // After a block or comment end: '-' eats all following whitespace, '+' nothing, and
  // otherwise trim_blocks removes a single newline.
  size_t ApplyRightWhitespaceControl(size_t after, char modifier, bool trim_blocks) const {
    if (modifier == '-') {
      std::string_view rest = std::string_view(src_).substr(after);
      return src_.size() - StripPythonSpace(rest, true, false).size();
    }
    if (trim_blocks && modifier != '+' && after < src_.size() && src_[after] == '\n') {
      return after + 1;
    }
    return after;
  }

  Expected<size_t> SkipComment(size_t tag, size_t body) const {
    size_t end = src_.find("#}", body);
    if (end == std::string::npos) return ErrorAt(tag, "unterminated comment '{#'");
    char modifier = end > body ? src_[end - 1] : '\0';
    return ApplyRightWhitespaceControl(end + 2, modifier, true);
  }

  size_t SkipSpaces(size_t pos) const {
    while (pos < src_.size() && std::strchr(" \t\n\r\f\v", src_[pos]) != nullptr && src_[pos]) {
      ++pos;
    }
    return pos;
  }

  bool IsRawTag(size_t body) const {
    size_t p = SkipSpaces(body);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipSpaces(p + 3);
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    return src_.compare(p, 2, "%}") == 0;
  }

  Expected<size_t> LexRaw(size_t tag, size_t body) {
    size_t p = SkipSpaces(SkipSpaces(body) + 3);
    char modifier = src_[p] == '%' ? '\0' : src_[p];
    size_t content_start = ApplyRightWhitespaceControl(src_.find("%}", p) + 2, modifier, true);
    // Find "{%[-+]? endraw [-+]?%}".
    size_t search = content_start;
    while (true) {
      size_t at = src_.find("{%", search);
      if (at == std::string::npos) return ErrorAt(tag, "unterminated 'raw' block (missing endraw)");
      size_t q = at + 2;
      char left = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : '\0';
      if (left) ++q;
      q = SkipSpaces(q);
      if (src_.compare(q, 6, "endraw") == 0) {
        q = SkipSpaces(q + 6);
        char right = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : '\0';
        if (right) ++q;
        if (src_.compare(q, 2, "%}") == 0) {
          std::string data = src_.substr(content_start, at - content_start);
          ApplyLeftWhitespaceControl(&data, content_start, '%', left);
          TS_RETURN_IF_ERROR(Emit(TokenKind::kData, std::move(data), content_start));
          return ApplyRightWhitespaceControl(q + 2, right, true);
        }
      }
      search = at + 2;
    }
  }

  Expected<size_t> LexTag(size_t tag, size_t body, bool is_block) {
    TS_RETURN_IF_ERROR(Emit(is_block ? TokenKind::kBlockBegin : TokenKind::kVarBegin,
                            is_block ? "{%" : "{{", tag));
    const char* close = is_block ? "%}" : "}}";
    int balance = 0;
    size_t pos = body;
    while (true) {
      pos = SkipSpaces(pos);
      if (pos >= src_.size()) {
        return ErrorAt(tag, is_block ? "unterminated block tag '{%' (missing '%}')"
                                     : "unterminated expression '{{' (missing '}}')");
      }
      if (balance == 0) {
        char modifier = '\0';
        size_t q = pos;
        if (src_[q] == '-' || (is_block && src_[q] == '+')) {
          modifier = src_[q];
          ++q;
        }
        if (src_.compare(q, 2, close) == 0) {
          TS_RETURN_IF_ERROR(
              Emit(is_block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, close, pos));
          return ApplyRightWhitespaceControl(q + 2, modifier, is_block);
        }
      }
      char c = src_[pos];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t end = pos;
        while (end < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) {
          ++end;
        }
        TS_RETURN_IF_ERROR(Emit(TokenKind::kName, src_.substr(pos, end - pos), pos));
        pos = end;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        TS_ASSIGN_OR_RETURN(pos, LexNumber(pos));
      } else if (c == '\'' || c == '"') {
        TS_ASSIGN_OR_RETURN(pos, LexString(pos));
      } else {
        static const char* kOperators[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                           "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                           "]",  "{",  "}",  ",",  ".",  ":",  "|"};
        const char* match = nullptr;
        for (const char* op : kOperators) {
          if (src_.compare(pos, std::strlen(op), op) == 0) {
            match = op;
            break;
          }
        }
        if (match == nullptr) {
          return ErrorAt(pos, std::string("unexpected character '") + c + "' in tag");
        }
        if (std::strchr("([{", match[0]) && match[1] == '\0') ++balance;
        if (std::strchr(")]}", match[0]) && match[1] == '\0') {
          if (balance == 0) return ErrorAt(pos, std::string("unbalanced '") + match + "'");
          --balance;
        }
        TS_RETURN_IF_ERROR(Emit(TokenKind::kOperator, match, pos));
        pos += std::strlen(match);
      }
    }
  }

  Expected<size_t> LexNumber(size_t pos) {
    size_t end = pos;
    auto digits = [&](size_t p) {
      while (p < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[p])) ||
                                 (src_[p] == '_' && p + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[p + 1]))))) {
        ++p;
      }
      return p;
    };
    end = digits(end);
    bool is_float = false;
    if (end + 1 < src_.size() && src_[end] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
      is_float = true;
      end = digits(end + 1);
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t q = end + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        is_float = true;
        end = digits(q);
      }
    }
    std::string text;
    for (size_t i = pos; i < end; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    TS_RETURN_IF_ERROR(Emit(is_float ? TokenKind::kFloat : TokenKind::kInteger, text, pos));
    return end;
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Python string literal escapes (\n, \t, \xhh, \uhhhh, \Uhhhhhhhh, ...); an unknown escape
  // keeps its backslash, as Python does.
  Expected<size_t> LexString(size_t pos) {
    char quote = src_[pos];
    std::string value;
    size_t p = pos + 1;
    while (true) {
      if (p >= src_.size()) return ErrorAt(pos, "unterminated string literal");
      char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) return ErrorAt(pos, "unterminated string literal");
      char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '0':
          value += '\0';
          break;
        case '\n':
          break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          uint32_t cp = 0;
          for (size_t i = 0; i < n; ++i) {
            int h = p + i < src_.size() ? HexValue(src_[p + i]) : -1;
            if (h < 0) return ErrorAt(p - 2, "truncated \\" + std::string(1, e) + " escape");
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return ErrorAt(p - 2, "escape is not a valid Unicode scalar value");
          }
          AppendUtf8(&value, cp);
          p += n;
          break;
        }
        default:
          value += '\\';
          value += e;
      }
    }
    TS_RETURN_IF_ERROR(Emit(TokenKind::kString, std::move(value), pos));
    return p + 1;
  }

  std::string src_;
  size_t max_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  mutable size_t cache_line_ = SIZE_MAX;
  mutable size_t cache_offset_ = 0;
  mutable int cache_column_ = 1;
};

// Jinja2 normalizes every \r\n and \r to \n and drops one trailing newline
// (keep_trailing_newline=False).
std::string NormalizeSource(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

Expected<std::vector<Token>> Lex(std::string_view source, size_t max_tokens) {
  if (!IsValidUtf8(source)) return InvalidArgument("template is not valid UTF-8");
  Lexer lexer(NormalizeSource(source), max_tokens);
  TS_RETURN_IF_ERROR(lexer.Run());
  return lexer.TakeTokens();
}

}  // namespace tessera::jinja
