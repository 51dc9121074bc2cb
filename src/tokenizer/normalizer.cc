#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "base/utf8.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_util.h"

namespace tessera::tok {

void ReplaceAll(std::string* text, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  size_t pos = text->find(from);
  if (pos == std::string::npos) return;
  std::string out;
  out.reserve(text->size() + text->size() / 8);
  size_t prev = 0;
  while (pos != std::string::npos) {
    out.append(*text, prev, pos - prev);
    out += to;
    prev = pos + from.size();
    pos = text->find(from, prev);
  }
  out.append(*text, prev, std::string::npos);
  *text = std::move(out);
}

namespace {

bool IsAscii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

class UnicodeNormalizer : public Normalizer {
 public:
  UnicodeNormalizer(std::string name, utf8proc_option_t options)
      : name_(std::move(name)), options_(options) {}
  Status Normalize(std::string* text) const override {
    if (IsAscii(*text)) return Status::Ok();  // every form leaves ASCII unchanged
    // An ASCII character never decomposes and is never the second half of a composition, so
    // the text can be cut before any ASCII character and each non-ASCII run normalized alone
    // (with the one character before it, which may combine with what follows).
    std::string out;
    out.reserve(text->size() + 16);
    const std::string& in = *text;
    size_t pos = 0;
    while (pos < in.size()) {
      size_t run = pos;
      while (run < in.size() && static_cast<unsigned char>(in[run]) < 0x80) ++run;
      if (run == in.size()) {
        out.append(in, pos, std::string::npos);
        break;
      }
      size_t start = run > pos ? run - 1 : run;  // include the preceding ASCII character
      out.append(in, pos, start - pos);
      size_t end = run;
      while (end < in.size() && static_cast<unsigned char>(in[end]) >= 0x80) ++end;
      TS_RETURN_IF_ERROR(MapRun(std::string_view(in).substr(start, end - start), &out));
      pos = end;
    }
    *text = std::move(out);
    return Status::Ok();
  }

 private:
  Status MapRun(std::string_view run, std::string* out) const {
    utf8proc_uint8_t* result = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                      static_cast<utf8proc_ssize_t>(run.size()), &result, options_);
    if (n < 0) {
      return InvalidArgument(name_ + " normalization failed: " + utf8proc_errmsg(n));
    }
    out->append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
    std::free(result);
    return Status::Ok();
  }

  std::string name_;
  utf8proc_option_t options_;
};

class LowercaseNormalizer : public Normalizer {
 public:
  Status Normalize(std::string* text) const override {
    std::string out;
    out.reserve(text->size());
    size_t pos = 0;
    char32_t cp;
    while (NextCodepoint(*text, &pos, &cp)) {
      if (cp < 0x80) {
        out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
      } else if (cp == 0x130) {
        out += "i\xCC\x87";  // full lowercase mapping of U+0130 (Rust to_lowercase)
      } else {
        AppendUtf8(&out, static_cast<char32_t>(utf8proc_tolower(static_cast<int32_t>(cp))));
      }
    }
    *text = std::move(out);
    return Status::Ok();
  }
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  Status Normalize(std::string* text) const override {
    size_t begin = 0;
    size_t end = text->size();
    if (left_) {
      size_t pos = 0;
      char32_t cp;
      while (NextCodepoint(*text, &pos, &cp) && IsWhitespace(cp)) begin = pos;
    }
    if (right_) {
      while (end > begin) {
        size_t len = 0;
        char32_t cp = LastCodepoint(std::string_view(*text).substr(begin, end - begin), &len);
        if (!IsWhitespace(cp)) break;
        end -= len;
      }
    }
    *text = text->substr(begin, end - begin);
    return Status::Ok();
  }

 private:
  bool left_, right_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  Status Normalize(std::string* text) const override {
    if (!text->empty()) text->insert(0, prefix_);  // HF prepends only to non-empty text
    return Status::Ok();
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::shared_ptr<const Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  Status Normalize(std::string* text) const override {
    if (!regex_) {
      ReplaceAll(text, literal_, content_);
      return Status::Ok();
    }
    std::vector<RegexMatch> matches;
    TS_RETURN_IF_ERROR(regex_->FindAll(*text, &matches));
    if (matches.empty()) return Status::Ok();
    std::string out;
    size_t prev = 0;
    for (const RegexMatch& m : matches) {
      out.append(*text, prev, m.start - prev);
      out += content_;
      prev = m.end;
    }
    out.append(*text, prev, std::string::npos);
    *text = std::move(out);
    return Status::Ok();
  }

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
  std::string content_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<const Normalizer>> parts)
      : parts_(std::move(parts)) {}
  Status Normalize(std::string* text) const override {
    for (const auto& p : parts_) TS_RETURN_IF_ERROR(p->Normalize(text));
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<const Normalizer>> parts_;
};

}  // namespace

// Reads a {"String": s} or {"Regex": r} pattern object. Exactly one of *literal / *regex is set.
Status ParsePattern(const Json& obj, const std::string& where, std::string* literal,
                    std::shared_ptr<const Regex>* regex) {
  const Json* pattern = FindField(obj, "pattern");
  if (pattern == nullptr || !pattern->is_object()) {
    return Corrupt(where + ": missing 'pattern' object ({\"String\": ...} or {\"Regex\": ...})");
  }
  if (const Json* s = FindField(*pattern, "String"); s != nullptr) {
    if (!s->is_string()) return Corrupt(where + ".pattern.String: expected a string");
    *literal = s->get<std::string>();
    return Status::Ok();
  }
  if (const Json* r = FindField(*pattern, "Regex"); r != nullptr) {
    if (!r->is_string()) return Corrupt(where + ".pattern.Regex: expected a string");
    auto compiled = Regex::Compile(r->get<std::string>());
    if (!compiled) return compiled.status().WithContext(where);
    *regex = std::move(compiled).value();
    return Status::Ok();
  }
  return Corrupt(where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}, found " +
                 Preview(*pattern));
}

Expected<std::unique_ptr<const Normalizer>> ParseNormalizer(const Json& json,
                                                            const std::string& where) {
  TS_ASSIGN_OR_RETURN(std::string type, GetString(json, "type", where));
  using Ptr = std::unique_ptr<const Normalizer>;
  if (type == "NFC")
    return Ptr(new UnicodeNormalizer("NFC", utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE)));
  if (type == "NFD")
    return Ptr(
        new UnicodeNormalizer("NFD", utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE)));
  if (type == "NFKC") {
    return Ptr(new UnicodeNormalizer(
        "NFKC", utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT)));
  }
  if (type == "NFKD") {
    return Ptr(new UnicodeNormalizer(
        "NFKD", utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT)));
  }
  if (type == "Lowercase") return Ptr(new LowercaseNormalizer());
  if (type == "Strip") {
    TS_ASSIGN_OR_RETURN(bool left, GetBool(json, "strip_left", true, where));
    TS_ASSIGN_OR_RETURN(bool right, GetBool(json, "strip_right", true, where));
    return Ptr(new StripNormalizer(left, right));
  }
  if (type == "Prepend") {
    TS_ASSIGN_OR_RETURN(std::string prefix, GetString(json, "prepend", where));
    return Ptr(new PrependNormalizer(std::move(prefix)));
  }
  if (type == "Replace") {
    std::string literal;
    std::shared_ptr<const Regex> regex;
    TS_RETURN_IF_ERROR(ParsePattern(json, where, &literal, &regex));
    TS_ASSIGN_OR_RETURN(std::string content, GetString(json, "content", where));
    return Ptr(new ReplaceNormalizer(std::move(literal), std::move(regex), std::move(content)));
  }
  if (type == "Sequence") {
    const Json* list = FindField(json, "normalizers");
    if (list == nullptr || !list->is_array()) {
      return Corrupt(where + ": Sequence needs a 'normalizers' array");
    }
    std::vector<Ptr> parts;
    for (size_t i = 0; i < list->size(); ++i) {
      TS_ASSIGN_OR_RETURN(
          Ptr p, ParseNormalizer((*list)[i], where + ".normalizers[" + std::to_string(i) + "]"));
      parts.push_back(std::move(p));
    }
    return Ptr(new SequenceNormalizer(std::move(parts)));
  }
  return Unsupported(where + ": unsupported normalizer type '" + type +
                     "'; supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend, Replace, "
                     "Sequence");
}

}  // namespace tessera::tok
