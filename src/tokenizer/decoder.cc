#include "tokenizer/decoder.h"

#include "base/utf8.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"

namespace tessera::tok {

bool ParseByteToken(const std::string& token, unsigned char* byte) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return false;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    char c = token[i];
    int digit = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                         : -1;
    if (digit < 0) return false;
    value = value * 16 + digit;
  }
  *byte = static_cast<unsigned char>(value);
  return true;
}

namespace {

std::vector<char32_t> ToCodepoints(const std::string& s) {
  std::vector<char32_t> cps;
  size_t pos = 0;
  char32_t cp;
  while (NextCodepoint(s, &pos, &cp)) cps.push_back(cp);
  return cps;
}

void ApplyByteLevel(std::vector<std::string>* tokens) {
  std::string bytes;
  for (const std::string& t : *tokens) {
    size_t mark = bytes.size();
    size_t pos = 0;
    char32_t cp;
    bool all_mapped = true;
    while (NextCodepoint(t, &pos, &cp)) {
      int b = ByteLevelByte(cp);
      if (b < 0) {
        all_mapped = false;
        break;
      }
      bytes += static_cast<char>(b);
    }
    if (!all_mapped) {  // a token outside the byte alphabet is kept as its own UTF-8
      bytes.resize(mark);
      bytes += t;
    }
  }
  tokens->assign(1, SanitizeUtf8(bytes));
}

void ApplyByteFallback(std::vector<std::string>* tokens) {
  std::vector<std::string> out;
  out.reserve(tokens->size());
  std::string pending;
  size_t pending_count = 0;
  auto flush = [&] {
    if (pending_count == 0) return;
    if (IsValidUtf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending_count; ++i) out.emplace_back("\xEF\xBF\xBD");
    }
    pending.clear();
    pending_count = 0;
  };
  for (std::string& t : *tokens) {
    unsigned char byte;
    if (ParseByteToken(t, &byte)) {
      pending += static_cast<char>(byte);
      ++pending_count;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  *tokens = std::move(out);
}

std::string StripToken(const std::string& token, char32_t content, size_t start, size_t stop) {
  std::vector<char32_t> cps = ToCodepoints(token);
  size_t begin = 0;
  while (begin < start && begin < cps.size() && cps[begin] == content) ++begin;
  size_t end = cps.size();
  for (size_t i = 0; i < stop && end > begin && cps[end - 1] == content; ++i) --end;
  if (begin == 0 && end == cps.size()) return token;
  std::string out;
  for (size_t i = begin; i < end; ++i) AppendUtf8(&out, cps[i]);
  return out;
}

}  // namespace

Status Decoder::AddSteps(const Json& json, const std::string& where, Decoder* d) {
  TS_ASSIGN_OR_RETURN(std::string type, GetString(json, "type", where));
  Step step;
  if (type == "Sequence") {
    const Json* list = FindField(json, "decoders");
    if (list == nullptr || !list->is_array()) {
      return Corrupt(where + ": Sequence needs a 'decoders' array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      TS_RETURN_IF_ERROR(AddSteps((*list)[i], where + ".decoders[" + std::to_string(i) + "]", d));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
    d->has_byte_fallback_ = true;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    TS_ASSIGN_OR_RETURN(step.ch, GetSingleChar(json, "content", U' ', where));
    TS_ASSIGN_OR_RETURN(int64_t start, GetInt(json, "start", 0, where));
    TS_ASSIGN_OR_RETURN(int64_t stop, GetInt(json, "stop", 0, where));
    step.start = static_cast<size_t>(start);
    step.stop = static_cast<size_t>(stop);
    if (step.stop > 0) d->end_strip_chars_.push_back(step.ch);
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    TS_RETURN_IF_ERROR(ParsePattern(json, where, &step.literal, &step.regex));
    TS_ASSIGN_OR_RETURN(step.content, GetString(json, "content", where));
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    TS_ASSIGN_OR_RETURN(step.ch, GetSingleChar(json, "replacement", U'\u2581', where));
    if (const Json* ps = FindField(json, "prepend_scheme"); ps != nullptr) {
      step.prepend = !(ps->is_string() && ps->get<std::string>() == "never");
    } else {
      TS_ASSIGN_OR_RETURN(step.prepend, GetBool(json, "add_prefix_space", true, where));
    }
  } else {
    return Unsupported(where + ": unsupported decoder type '" + type +
                       "'; supported: ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, "
                       "Sequence");
  }
  d->steps_.push_back(std::move(step));
  return Status::Ok();
}

Expected<std::unique_ptr<const Decoder>> Decoder::FromJson(const Json* json) {
  std::unique_ptr<Decoder> d(new Decoder());
  if (json == nullptr) {
    d->joins_with_space_ = true;
  } else {
    TS_RETURN_IF_ERROR(AddSteps(*json, "decoder", d.get()));
  }
  return std::unique_ptr<const Decoder>(std::move(d));
}

std::string Decoder::Decode(std::vector<std::string> tokens, bool at_start, bool at_end) const {
  if (joins_with_space_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 || !at_start) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  bool fused = false;  // true once the tokens have been joined into one string
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kByteLevel:
        ApplyByteLevel(&tokens);
        fused = true;
        break;
      case Kind::kByteFallback:
        ApplyByteFallback(&tokens);
        break;
      case Kind::kFuse: {
        std::string joined;
        for (const std::string& t : tokens) joined += t;
        tokens.assign(1, std::move(joined));
        fused = true;
        break;
      }
      case Kind::kStrip:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // After fusing, the edges of the single token are the edges of this window; strip
          // them only where the window is also an edge of the whole sequence.
          size_t start = (fused && i == 0 && !at_start) ? 0 : step.start;
          size_t stop = (fused && i + 1 == tokens.size() && !at_end) ? 0 : step.stop;
          tokens[i] = StripToken(tokens[i], step.ch, start, stop);
        }
        break;
      case Kind::kReplace:
        for (std::string& t : tokens) {
          if (!step.regex) {
            ReplaceAll(&t, step.literal, step.content);
            continue;
          }
          std::vector<RegexMatch> matches;
          if (!step.regex->FindAll(t, &matches).ok() || matches.empty()) continue;
          std::string out;
          size_t prev = 0;
          for (const RegexMatch& m : matches) {
            out.append(t, prev, m.start - prev);
            out += step.content;
            prev = m.end;
          }
          out.append(t, prev, std::string::npos);
          t = std::move(out);
        }
        break;
      case Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          // HF drops every replacement character of the sequence's first token.
          bool first = i == 0 && (at_start || fused);
          std::string out;
          size_t pos = 0;
          char32_t cp;
          while (NextCodepoint(tokens[i], &pos, &cp)) {
            if (cp == step.ch) {
              if (!(first && step.prepend)) out += ' ';
            } else {
              AppendUtf8(&out, cp);
            }
          }
          tokens[i] = std::move(out);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace tessera::tok
