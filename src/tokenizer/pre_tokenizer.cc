#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <functional>

#include "base/utf8.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_util.h"

namespace tessera::tok {

Expected<char32_t> GetSingleChar(const Json& obj, const char* key, char32_t fallback,
                                 const std::string& where) {
  const Json* v = FindField(obj, key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return Corrupt(where + "." + key + ": expected a one-character string");
  std::string s = v->get<std::string>();
  size_t pos = 0;
  char32_t cp = 0;
  if (!IsValidUtf8(s) || !NextCodepoint(s, &pos, &cp) || pos != s.size()) {
    return Corrupt(where + "." + key + ": expected exactly one character, found " + Preview(*v));
  }
  return cp;
}

namespace {

// Builds a new string rather than std::string::insert(0, ...), which trips a false
// -Wrestrict in GCC 12 at -O3.
void Prepend(std::string_view prefix, std::string* text) {
  std::string out;
  out.reserve(prefix.size() + text->size());
  out.append(prefix);
  out.append(*text);
  text->swap(out);
}

struct ByteTables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 0x180> char_to_byte;  // every mapped character is below U+0180
};

const ByteTables& Tables() {
  static const ByteTables tables = [] {
    ByteTables t;
    t.char_to_byte.fill(-1);
    // Printable Latin-1 bytes stand for themselves; the rest map to U+0100 onwards in order.
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + next++);
      AppendUtf8(&t.byte_to_text[b], cp);
      t.char_to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return tables;
}

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Expected<Behavior> ParseBehavior(const Json& json, const std::string& where, Behavior fallback) {
  const Json* v = FindField(json, "behavior");
  if (v == nullptr) return fallback;
  std::string s = v->is_string() ? v->get<std::string>() : Preview(*v);
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  return Corrupt(where + ".behavior: unknown value '" + s +
                 "'; supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                 "Contiguous");
}

struct Piece {
  size_t start, end;
  bool is_match;
};

// Turns matches (sorted, non-overlapping) into pieces covering the whole text.
void MatchesToPieces(size_t text_size, const std::vector<RegexMatch>& matches,
                     std::vector<Piece>* pieces) {
  pieces->clear();
  size_t prev = 0;
  for (const RegexMatch& m : matches) {
    if (prev != m.start) pieces->push_back({prev, m.start, false});
    pieces->push_back({m.start, m.end, true});
    prev = m.end;
  }
  if (prev != text_size) pieces->push_back({prev, text_size, false});
}

// Every character satisfying `pred` is a match of its own; runs of others are one piece.
void CharPredicatePieces(std::string_view text, const std::function<bool(char32_t)>& pred,
                         std::vector<Piece>* pieces) {
  pieces->clear();
  size_t last = 0;
  size_t pos = 0;
  char32_t cp;
  while (true) {
    size_t start = pos;
    if (!NextCodepoint(text, &pos, &cp)) break;
    if (pred(cp)) {
      if (last < start) pieces->push_back({last, start, false});
      pieces->push_back({start, pos, true});
      last = pos;
    }
  }
  if (last < text.size()) pieces->push_back({last, text.size(), false});
}

// Applies a split behavior (the semantics of HF NormalizedString::split) and appends the
// non-empty resulting substrings of `split` to `out`.
void EmitPieces(const PreToken& split, std::vector<Piece>& pieces, Behavior behavior, bool invert,
                std::vector<PreToken>* out) {
  if (invert) {
    for (Piece& p : pieces) p.is_match = !p.is_match;
  }
  std::vector<std::pair<size_t, size_t>> ranges;
  ranges.reserve(pieces.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Piece& p : pieces) {
        if (!p.is_match) ranges.emplace_back(p.start, p.end);
      }
      break;
    case Behavior::kIsolated:
      for (const Piece& p : pieces) ranges.emplace_back(p.start, p.end);
      break;
    case Behavior::kMergedWithPrevious:
      for (const Piece& p : pieces) {
        if (p.is_match && !previous_match && !ranges.empty()) {
          ranges.back().second = p.end;
        } else {
          ranges.emplace_back(p.start, p.end);
        }
        previous_match = p.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (size_t i = pieces.size(); i-- > 0;) {
        const Piece& p = pieces[i];
        if (p.is_match && !previous_match && !ranges.empty()) {
          ranges.back().first = p.start;
        } else {
          ranges.emplace_back(p.start, p.end);
        }
        previous_match = p.is_match;
      }
      std::reverse(ranges.begin(), ranges.end());
      break;
    case Behavior::kContiguous:
      for (size_t i = 0; i < pieces.size(); ++i) {
        const Piece& p = pieces[i];
        if (i > 0 && p.is_match == previous_match) {
          ranges.back().second = p.end;
        } else {
          ranges.emplace_back(p.start, p.end);
        }
        previous_match = p.is_match;
      }
      break;
  }
  bool first = true;
  for (const auto& [start, end] : ranges) {
    if (end <= start) continue;
    out->push_back({split.text.substr(start, end - start), split.at_origin && first && start == 0});
    first = false;
  }
}

// Runs `fn` on each split, replacing the list with the concatenated results.
Status ForEachSplit(std::vector<PreToken>* splits,
                    const std::function<Status(PreToken&, std::vector<PreToken>*)>& fn) {
  std::vector<PreToken> out;
  out.reserve(splits->size() * 2);
  for (PreToken& s : *splits) TS_RETURN_IF_ERROR(fn(s, &out));
  *splits = std::move(out);
  return Status::Ok();
}

class RegexSplit : public PreTokenizer {
 public:
  RegexSplit(std::shared_ptr<const Regex> regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  Status Apply(std::vector<PreToken>* splits) const override {
    std::vector<RegexMatch> matches;
    std::vector<Piece> pieces;
    return ForEachSplit(splits, [&](PreToken& s, std::vector<PreToken>* out) -> Status {
      matches.clear();
      TS_RETURN_IF_ERROR(regex_->FindAll(s.text, &matches));
      MatchesToPieces(s.text.size(), matches, &pieces);
      EmitPieces(s, pieces, behavior_, invert_, out);
      return Status::Ok();
    });
  }

 private:
  std::shared_ptr<const Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

class CharSplit : public PreTokenizer {
 public:
  CharSplit(std::function<bool(char32_t)> pred, Behavior behavior)
      : pred_(std::move(pred)), behavior_(behavior) {}
  Status Apply(std::vector<PreToken>* splits) const override {
    std::vector<Piece> pieces;
    return ForEachSplit(splits, [&](PreToken& s, std::vector<PreToken>* out) -> Status {
      CharPredicatePieces(s.text, pred_, &pieces);
      EmitPieces(s, pieces, behavior_, false, out);
      return Status::Ok();
    });
  }

 private:
  std::function<bool(char32_t)> pred_;
  Behavior behavior_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::shared_ptr<const Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  Status Apply(std::vector<PreToken>* splits) const override {
    if (add_prefix_space_) {
      for (PreToken& s : *splits) {
        if (s.text.empty() || s.text[0] != ' ') Prepend(" ", &s.text);
      }
    }
    if (regex_) TS_RETURN_IF_ERROR(RegexSplit(regex_, Behavior::kIsolated, false).Apply(splits));
    const auto& table = Tables().byte_to_text;
    std::string mapped;
    for (PreToken& s : *splits) {
      mapped.clear();
      for (char c : s.text) mapped += table[static_cast<unsigned char>(c)];
      s.text.swap(mapped);
    }
    return Status::Ok();
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> regex_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : scheme_(scheme), split_(split) {
    AppendUtf8(&replacement_, replacement);
  }
  Status Apply(std::vector<PreToken>* splits) const override {
    for (PreToken& s : *splits) {
      ReplaceAll(&s.text, " ", replacement_);
      bool starts = s.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && s.at_origin))) {
        Prepend(replacement_, &s.text);
      }
    }
    if (!split_) return Status::Ok();
    std::vector<Piece> pieces;
    return ForEachSplit(splits, [&](PreToken& s, std::vector<PreToken>* out) -> Status {
      pieces.clear();
      size_t prev = 0;
      for (size_t pos = s.text.find(replacement_); pos != std::string::npos;
           pos = s.text.find(replacement_, pos + replacement_.size())) {
        if (prev != pos) pieces.push_back({prev, pos, false});
        pieces.push_back({pos, pos + replacement_.size(), true});
        prev = pos + replacement_.size();
      }
      if (prev != s.text.size()) pieces.push_back({prev, s.text.size(), false});
      EmitPieces(s, pieces, Behavior::kMergedWithNext, false, out);
      return Status::Ok();
    });
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<const PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  Status Apply(std::vector<PreToken>* splits) const override {
    for (const auto& p : parts_) TS_RETURN_IF_ERROR(p->Apply(splits));
    return Status::Ok();
  }

 private:
  std::vector<std::unique_ptr<const PreTokenizer>> parts_;
};

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

const std::array<std::string, 256>& ByteLevelAlphabet() {
  return Tables().byte_to_text;
}

int ByteLevelByte(char32_t cp) {
  return cp < Tables().char_to_byte.size() ? Tables().char_to_byte[cp] : -1;
}

Expected<std::unique_ptr<const PreTokenizer>> ParsePreTokenizer(const Json& json,
                                                                const std::string& where) {
  using Ptr = std::unique_ptr<const PreTokenizer>;
  TS_ASSIGN_OR_RETURN(std::string type, GetString(json, "type", where));
  if (type == "ByteLevel") {
    TS_ASSIGN_OR_RETURN(bool prefix, GetBool(json, "add_prefix_space", true, where));
    TS_ASSIGN_OR_RETURN(bool use_regex, GetBool(json, "use_regex", true, where));
    std::shared_ptr<const Regex> regex;
    if (use_regex) {
      TS_ASSIGN_OR_RETURN(regex, Regex::Compile(kGpt2Pattern));
    }
    return Ptr(new ByteLevelPreTokenizer(prefix, std::move(regex)));
  }
  if (type == "Split") {
    std::string literal;
    std::shared_ptr<const Regex> regex;
    TS_RETURN_IF_ERROR(ParsePattern(json, where, &literal, &regex));
    if (!regex) {
      TS_ASSIGN_OR_RETURN(regex, Regex::Literal(literal));
    }
    TS_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(json, where, Behavior::kIsolated));
    TS_ASSIGN_OR_RETURN(bool invert, GetBool(json, "invert", false, where));
    return Ptr(new RegexSplit(std::move(regex), behavior, invert));
  }
  if (type == "Digits") {
    TS_ASSIGN_OR_RETURN(bool individual, GetBool(json, "individual_digits", false, where));
    return Ptr(new CharSplit(IsNumeric, individual ? Behavior::kIsolated : Behavior::kContiguous));
  }
  if (type == "Punctuation") {
    TS_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(json, where, Behavior::kIsolated));
    return Ptr(new CharSplit(IsPunctuation, behavior));
  }
  if (type == "WhitespaceSplit") return Ptr(new CharSplit(IsWhitespace, Behavior::kRemoved));
  if (type == "Whitespace") {
    TS_ASSIGN_OR_RETURN(auto regex, Regex::Compile(R"(\w+|[^\w\s]+)"));
    return Ptr(new RegexSplit(std::move(regex), Behavior::kRemoved, /*invert=*/true));
  }
  if (type == "BertPreTokenizer") {
    std::vector<Ptr> parts;
    parts.push_back(Ptr(new CharSplit(IsWhitespace, Behavior::kRemoved)));
    parts.push_back(Ptr(new CharSplit(IsPunctuation, Behavior::kIsolated)));
    return Ptr(new SequencePreTokenizer(std::move(parts)));
  }
  if (type == "Metaspace") {
    TS_ASSIGN_OR_RETURN(char32_t replacement, GetSingleChar(json, "replacement", U'\u2581', where));
    TS_ASSIGN_OR_RETURN(bool split, GetBool(json, "split", true, where));
    PrependScheme scheme = PrependScheme::kAlways;
    if (const Json* ps = FindField(json, "prepend_scheme"); ps != nullptr) {
      std::string s = ps->is_string() ? ps->get<std::string>() : Preview(*ps);
      if (s == "always") {
        scheme = PrependScheme::kAlways;
      } else if (s == "first") {
        scheme = PrependScheme::kFirst;
      } else if (s == "never") {
        scheme = PrependScheme::kNever;
      } else {
        return Corrupt(where + ".prepend_scheme: unknown value '" + s +
                       "'; supported: always, first, never");
      }
    } else {
      TS_ASSIGN_OR_RETURN(bool prefix, GetBool(json, "add_prefix_space", true, where));
      scheme = prefix ? PrependScheme::kAlways : PrependScheme::kNever;
    }
    return Ptr(new MetaspacePreTokenizer(replacement, scheme, split));
  }
  if (type == "Sequence") {
    const Json* list = FindField(json, "pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return Corrupt(where + ": Sequence needs a 'pretokenizers' array");
    }
    std::vector<Ptr> parts;
    for (size_t i = 0; i < list->size(); ++i) {
      TS_ASSIGN_OR_RETURN(Ptr p, ParsePreTokenizer((*list)[i], where + ".pretokenizers[" +
                                                                   std::to_string(i) + "]"));
      parts.push_back(std::move(p));
    }
    return Ptr(new SequencePreTokenizer(std::move(parts)));
  }
  return Unsupported(where + ": unsupported pre-tokenizer type '" + type +
                     "'; supported: ByteLevel, Split, Digits, Metaspace, Whitespace, "
                     "WhitespaceSplit, Punctuation, BertPreTokenizer, Sequence");
}

}  // namespace tessera::tok
