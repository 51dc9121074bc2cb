// The matcher: a byte-level pushdown automaton over the compiled node graph, run as a set of
// stacks (one per anyOf alternative still alive), and the per-step token mask computed by
// walking the vocabulary trie with it.
#include <algorithm>

#include "grammar/grammar.h"
#include "grammar/grammar_internal.h"

namespace tessera {
namespace {

using grammar_internal::kMaxExponentDigits;
using grammar_internal::kMaxFrames;
using grammar_internal::kMaxIntDigits;
using grammar_internal::kMaxStacks;
using grammar_internal::Node;
using grammar_internal::NodeKind;
using Frame = GrammarMatcher::Frame;

constexpr int kEnd = 256;  // the end of the document, fed like a byte
// Significant digits of a number (integer part plus fraction): 15 decimal digits survive the
// round trip through a double, so a fraction can never round onto an excluded bound.
constexpr uint32_t kMaxSignificantDigits = 15;
constexpr uint8_t kSpaceAllowed = 1;
constexpr uint8_t kNegative = 2;

enum class Step { kConsumed, kConsumedDone, kDoneRetry, kReject, kPush };

// Phases per node kind.
enum RootPhase : uint8_t { kRootStart, kRootValue, kRootDone };
enum ObjectPhase : uint8_t {
  kObjOpen,
  kObjFirstKey,
  kObjKey,
  kObjColon,
  kObjBeforeValue,
  kObjValue,
  kObjAfterValue,
  kObjNextKey,
  kObjFreeKey
};
// An XML object (Node::xml): a = the first property still allowed, b = the tag being matched
// (props.size(): the closing "</function>"), c = bytes of the prefix, tag or value end matched.
enum XmlPhase : uint8_t { kXmlPrefix, kXmlTag, kXmlBeforeValue, kXmlValue, kXmlAfterValue };
enum ArrayPhase : uint8_t { kArrOpen, kArrFirst, kArrBeforeItem, kArrItem, kArrAfterItem };
enum StringPhase : uint8_t { kStrOpen, kStrContent, kStrEscape, kStrUnicode, kStrUtf8 };
enum NumberPhase : uint8_t {
  kNumStart,
  kNumSign,
  kNumInt,
  kNumDot,
  kNumFrac,
  kNumExp,
  kNumExpSign,
  kNumExpDigits
};

bool IsDigit(int b) {
  return b >= '0' && b <= '9';
}
bool IsHex(int b) {
  return IsDigit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
}

uint64_t Pow10(int n) {
  uint64_t p = 1;
  while (n-- > 0) p *= 10;
  return p;
}

class Machine {
 public:
  explicit Machine(const Grammar& g) : g_(g) {}

  static Frame Start(const Grammar& g, uint32_t node) {
    Frame f;
    f.node = node;
    const Node& n = g.nodes[node];
    if (n.kind == NodeKind::kLiterals) f.b = static_cast<uint32_t>(n.literals.size());
    if (n.kind == NodeKind::kObject && n.xml) f.phase = n.xml_prefix.empty() ? kXmlTag : kXmlPrefix;
    if (n.kind == NodeKind::kString && n.raw) f.phase = kStrContent;
    return f;
  }

  bool Fits(size_t stack_size, int32_t node) const {
    return node >= 0 && stack_size + g_.nodes[node].min_frames <= kMaxFrames;
  }

  // `child` receives the node to push for kPush.
  Step StepFrame(Frame& f, int b, size_t depth, int32_t* child) const {
    const Node& n = g_.nodes[f.node];
    switch (n.kind) {
      case NodeKind::kRoot:
        if (f.phase == kRootStart) {
          f.phase = kRootValue;
          *child = n.item;
          return Step::kPush;
        }
        return f.phase == kRootDone && b == kEnd ? Step::kConsumed : Step::kReject;
      case NodeKind::kObject:
        return n.xml ? StepXmlObject(f, n, b, depth, child) : StepObject(f, n, b, depth, child);
      case NodeKind::kArray:
        return StepArray(f, n, b, depth, child);
      case NodeKind::kString:
        return StepString(f, n, b);
      case NodeKind::kInteger:
      case NodeKind::kNumber:
        return StepNumber(f, n, b);
      case NodeKind::kLiterals:
        return StepLiterals(f, n, b);
      case NodeKind::kUnion:
        break;  // never on a stack: expanded when pushed
    }
    return Step::kReject;
  }

  void ChildDone(Frame& f) const {
    const Node& n = g_.nodes[f.node];
    if (n.kind == NodeKind::kRoot) {
      f.phase = kRootDone;
    } else if (n.kind == NodeKind::kArray) {
      ++f.a;
      f.phase = kArrAfterItem;
    } else if (n.xml) {
      f.a = f.b + 1;
      f.c = 0;
      f.phase = kXmlAfterValue;
    } else if (f.phase == kObjFreeKey) {
      f.phase = kObjColon;
    } else {  // kObjValue
      f.a = n.props.empty() ? f.a : f.b + 1;
      f.phase = kObjAfterValue;
    }
  }

 private:
  // Declared property j may come next at position `a`: no required one is skipped and its
  // value can still complete within the nesting limit.
  int32_t NextAllowedKey(const Node& n, uint32_t from, uint32_t a, size_t depth) const {
    for (uint32_t j = from; j < n.props.size(); ++j) {
      if (Fits(depth, static_cast<int32_t>(n.props[j].node))) return static_cast<int32_t>(j);
      if (n.props[j].required) return -1;
    }
    (void)a;
    return -1;
  }
  static bool CanClose(const Node& n, uint32_t a) {
    for (uint32_t j = a; j < n.props.size(); ++j) {
      if (n.props[j].required) return false;
    }
    return true;
  }

  Step StartKey(Frame& f, const Node& n, size_t depth, int32_t* child) const {
    if (n.props.empty()) {
      if (!Fits(depth, n.free_value)) return Step::kReject;
      f.phase = kObjFreeKey;
      *child = static_cast<int32_t>(g_.key_string);
      return Step::kPush;
    }
    int32_t j = NextAllowedKey(n, f.a, f.a, depth);
    if (j < 0) return Step::kReject;
    f.b = static_cast<uint32_t>(j);
    f.c = 1;  // every key starts with '"'
    f.phase = kObjKey;
    return Step::kConsumed;
  }

  Step StepObject(Frame& f, const Node& n, int b, size_t depth, int32_t* child) const {
    switch (f.phase) {
      case kObjOpen:
        if (b != '{') return Step::kReject;
        f.phase = kObjFirstKey;
        return Step::kConsumed;
      case kObjFirstKey:
      case kObjNextKey:
        if (b == ' ' && (f.flags & kSpaceAllowed)) {
          f.flags &= ~kSpaceAllowed;
          return Step::kConsumed;
        }
        if (b == '}' && f.phase == kObjFirstKey && CanClose(n, 0)) return Step::kConsumedDone;
        if (b == '"') return StartKey(f, n, depth, child);
        return Step::kReject;
      case kObjKey: {
        const std::string& current = n.props[f.b].key_json;
        for (uint32_t j = f.b; j < n.props.size(); ++j) {
          const std::string& key = n.props[j].key_json;
          if (key.size() > f.c && static_cast<unsigned char>(key[f.c]) == b &&
              key.compare(0, f.c, current, 0, f.c) == 0 &&
              Fits(depth, static_cast<int32_t>(n.props[j].node))) {
            f.b = j;
            if (++f.c == key.size()) f.phase = kObjColon;
            return Step::kConsumed;
          }
          if (n.props[j].required) break;
        }
        return Step::kReject;
      }
      case kObjColon:
        if (b != ':') return Step::kReject;
        f.phase = kObjBeforeValue;
        f.flags |= kSpaceAllowed;
        return Step::kConsumed;
      case kObjBeforeValue:
        if (b == ' ' && (f.flags & kSpaceAllowed)) {
          f.flags &= ~kSpaceAllowed;
          return Step::kConsumed;
        }
        f.flags &= ~kSpaceAllowed;
        f.phase = kObjValue;
        *child = n.props.empty() ? n.free_value : static_cast<int32_t>(n.props[f.b].node);
        return Step::kPush;
      case kObjAfterValue:
        if (b == '}' && (n.props.empty() || CanClose(n, f.a))) return Step::kConsumedDone;
        if (b == ',') {
          bool more =
              n.props.empty() ? Fits(depth, n.free_value) : NextAllowedKey(n, f.a, f.a, depth) >= 0;
          if (!more) return Step::kReject;
          f.phase = kObjNextKey;
          f.flags |= kSpaceAllowed;
          return Step::kConsumed;
        }
        return Step::kReject;
      default:
        return Step::kReject;  // kObjValue / kObjFreeKey: a child is on top
    }
  }

  // Tag j of an XML object: property j's "<parameter=KEY>\n", or the closing one.
  static std::string_view XmlTag(const Node& n, uint32_t j) {
    return j < n.props.size() ? std::string_view(n.props[j].key_json) : grammar_internal::kXmlClose;
  }

  Step StepXmlObject(Frame& f, const Node& n, int b, size_t depth, int32_t* child) const {
    using grammar_internal::kXmlValueEnd;
    switch (f.phase) {
      case kXmlPrefix:
        if (b == kEnd || static_cast<unsigned char>(n.xml_prefix[f.c]) != b) return Step::kReject;
        if (++f.c == n.xml_prefix.size()) {
          f.phase = kXmlTag;
          f.c = 0;
        }
        return Step::kConsumed;
      case kXmlTag: {
        if (b == kEnd) return Step::kReject;
        // Candidates from the first allowed property on: none past a required one, and the
        // closing tag only when no required property is left.
        const uint32_t from = f.c == 0 ? f.a : f.b;
        const std::string_view current = XmlTag(n, from);
        for (uint32_t j = from; j <= n.props.size(); ++j) {
          const std::string_view tag = XmlTag(n, j);
          const bool usable = j < n.props.size()
                                  ? Fits(depth, static_cast<int32_t>(n.props[j].node))
                                  : CanClose(n, f.a);
          if (usable && tag.size() > f.c && static_cast<unsigned char>(tag[f.c]) == b &&
              tag.substr(0, f.c) == current.substr(0, f.c)) {
            f.b = j;
            if (++f.c < tag.size()) return Step::kConsumed;
            if (j == n.props.size()) return Step::kConsumedDone;
            f.phase = kXmlBeforeValue;
            return Step::kConsumed;
          }
          if (j < n.props.size() && n.props[j].required) break;
        }
        return Step::kReject;
      }
      case kXmlBeforeValue:
        if (b == kEnd) return Step::kReject;
        f.phase = kXmlValue;
        *child = static_cast<int32_t>(n.props[f.b].node);
        return Step::kPush;
      case kXmlAfterValue:
        if (b == kEnd || static_cast<unsigned char>(kXmlValueEnd[f.c]) != b) return Step::kReject;
        if (++f.c == kXmlValueEnd.size()) {
          f.phase = kXmlTag;
          f.c = 0;
        }
        return Step::kConsumed;
      default:
        return Step::kReject;  // kXmlValue: a child is on top
    }
  }

  Step StepArray(Frame& f, const Node& n, int b, size_t depth, int32_t* child) const {
    const bool item_fits = n.item >= 0 && f.a < n.max_items && Fits(depth, n.item);
    switch (f.phase) {
      case kArrOpen:
        if (b != '[') return Step::kReject;
        f.phase = kArrFirst;
        return Step::kConsumed;
      case kArrFirst:
        if (b == ']' && n.min_items == 0) return Step::kConsumedDone;
        if (b == kEnd || !item_fits) return Step::kReject;
        f.phase = kArrItem;
        *child = n.item;
        return Step::kPush;
      case kArrBeforeItem:
        if (b == ' ' && (f.flags & kSpaceAllowed)) {
          f.flags &= ~kSpaceAllowed;
          return Step::kConsumed;
        }
        f.flags &= ~kSpaceAllowed;
        f.phase = kArrItem;
        *child = n.item;
        return Step::kPush;
      case kArrAfterItem:
        if (b == ']' && f.a >= n.min_items) return Step::kConsumedDone;
        if (b == ',' && item_fits) {
          f.phase = kArrBeforeItem;
          f.flags |= kSpaceAllowed;
          return Step::kConsumed;
        }
        return Step::kReject;
      default:
        return Step::kReject;
    }
  }

  // Frame::value after byte b of an XML call's string: the bytes of each kXmlForbidden text
  // matched so far; false when one is complete.
  static bool GuardXml(Frame& f, int b) {
    uint64_t next = 0;
    for (int i = 0; i < 2; ++i) {
      const std::string_view text = grammar_internal::kXmlForbidden[i];
      uint64_t k = (f.value >> (8 * i)) & 0xff;
      if (static_cast<unsigned char>(text[k]) == b) {
        if (++k == text.size()) return false;
      } else {
        k = b == text[0] ? 1 : 0;
      }
      next |= k << (8 * i);
    }
    f.value = next;
    return true;
  }

  Step StepString(Frame& f, const Node& n, int b) const {
    if (n.xml_guard && f.phase != kStrOpen && b != kEnd && !(n.raw && b == '\n') &&
        !GuardXml(f, b)) {
      return Step::kReject;
    }
    switch (f.phase) {
      case kStrOpen:
        if (b != '"') return Step::kReject;
        f.phase = kStrContent;
        return Step::kConsumed;
      case kStrContent:
        if (n.raw) {
          // Ends before the newline that closes the parameter.
          if (b == '\n' || b == kEnd) {
            bool accepted = n.pattern < 0 || g_.patterns[n.pattern].accepting[f.b];
            return accepted && f.a >= n.min_len ? Step::kDoneRetry : Step::kReject;
          }
          if (b < 0x20 && b != '\t') return Step::kReject;
        } else if (b == kEnd || b < 0x20) {
          return Step::kReject;
        }
        if (b == '"' && !n.raw) {
          bool accepted = n.pattern < 0 || g_.patterns[n.pattern].accepting[f.b];
          return accepted && f.a >= n.min_len ? Step::kConsumedDone : Step::kReject;
        }
        if (f.a >= n.max_len) return Step::kReject;
        if (n.pattern >= 0) {
          const auto& dfa = g_.patterns[n.pattern];
          if (b >= grammar_internal::PatternDfa::kColumns) return Step::kReject;
          int32_t next = dfa.next[f.b * grammar_internal::PatternDfa::kColumns + b];
          if (next < 0 || f.a + 1 + dfa.dist_to_accept[next] > n.max_len) return Step::kReject;
          f.b = static_cast<uint32_t>(next);
          ++f.a;
          return Step::kConsumed;
        }
        ++f.a;
        if (b == '\\' && !n.raw) {
          f.phase = kStrEscape;
        } else if (b >= 0x80) {
          // UTF-8 lead byte: how many continuation bytes, and which first one is legal
          // (no overlongs, no surrogates, nothing past U+10FFFF).
          if (b >= 0xC2 && b <= 0xDF) {
            f.aux = 1, f.aux2 = 0;
          } else if (b >= 0xE0 && b <= 0xEF) {
            f.aux = 2, f.aux2 = b == 0xE0 ? 1 : b == 0xED ? 2 : 0;
          } else if (b >= 0xF0 && b <= 0xF4) {
            f.aux = 3, f.aux2 = b == 0xF0 ? 3 : b == 0xF4 ? 4 : 0;
          } else {
            return Step::kReject;
          }
          f.phase = kStrUtf8;
        }
        return Step::kConsumed;
      case kStrUtf8: {
        static constexpr int kLo[] = {0x80, 0xA0, 0x80, 0x90, 0x80};
        static constexpr int kHi[] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
        if (b < kLo[f.aux2] || b > kHi[f.aux2]) return Step::kReject;
        f.aux2 = 0;
        if (--f.aux == 0) f.phase = kStrContent;
        return Step::kConsumed;
      }
      case kStrEscape:
        if (b == 'u') {
          f.phase = kStrUnicode;
          f.aux = 0, f.aux2 = 0;
          return Step::kConsumed;
        }
        if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' ||
            b == 't') {
          f.phase = kStrContent;
          return Step::kConsumed;
        }
        return Step::kReject;
      case kStrUnicode:
        if (!IsHex(b)) return Step::kReject;
        // \uD800-\uDFFF would need a pair; surrogates are refused (write the character raw).
        if (f.aux == 0 && (b == 'd' || b == 'D')) f.aux2 = 1;
        if (f.aux == 1 && f.aux2 == 1 && !IsDigit(b) && b != '8' && b != '9') {
          return Step::kReject;
        }
        if (f.aux == 1 && f.aux2 == 1 && (b == '8' || b == '9')) return Step::kReject;
        if (++f.aux == 4) f.phase = kStrContent;
        return Step::kConsumed;
      default:
        return Step::kReject;
    }
  }

  // Whether some integer in the node's range is written with these leading digits (sign
  // given separately), using at most kMaxIntDigits digits.
  static bool Feasible(const Node& n, bool negative, uint64_t prefix, uint32_t digits) {
    // The magnitudes allowed for this sign.
    int64_t lo = negative ? std::max<int64_t>(1, -n.int_hi) : std::max<int64_t>(0, n.int_lo);
    int64_t hi = negative ? -n.int_lo : n.int_hi;
    if (lo > hi) return false;
    const uint64_t ulo = static_cast<uint64_t>(lo), uhi = static_cast<uint64_t>(hi);
    if (prefix == 0) return digits == 1 && ulo == 0;
    for (uint32_t extra = 0; digits + extra <= kMaxIntDigits; ++extra) {
      uint64_t scale = Pow10(static_cast<int>(extra));
      uint64_t first = prefix * scale, last = first + scale - 1;
      if (first > uhi) break;
      if (last >= ulo) return true;
    }
    return false;
  }
  static bool InRange(const Node& n, bool negative, uint64_t magnitude) {
    int64_t v = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    return v >= n.int_lo && v <= n.int_hi;
  }
  // A fraction may follow integer part I when every I.xxx lies within the bounds.
  static bool FractionAllowed(const Node& n, bool negative, uint64_t magnitude, uint32_t digits) {
    if (n.kind != NodeKind::kNumber || digits >= kMaxSignificantDigits) return false;
    if (!n.bounded) return true;
    if (!InRange(n, negative, magnitude)) return false;
    const double i = negative ? -static_cast<double>(magnitude) : static_cast<double>(magnitude);
    if (!negative) {
      bool lo_ok = !n.has_lo || (n.lo_exclusive ? i > n.lo : i >= n.lo);
      return lo_ok && (!n.has_hi || i + 1 <= n.hi);
    }
    bool hi_ok = !n.has_hi || (n.hi_exclusive ? i < n.hi : i <= n.hi);
    return hi_ok && (!n.has_lo || i - 1 >= n.lo);
  }

  Step StepNumber(Frame& f, const Node& n, int b) const {
    const bool negative = f.flags & kNegative;
    const bool exponent_ok = n.kind == NodeKind::kNumber && !n.bounded;
    switch (f.phase) {
      case kNumStart:
        if (b == '-') {
          if (n.int_lo >= 0) return Step::kReject;
          f.flags |= kNegative;
          f.phase = kNumSign;
          return Step::kConsumed;
        }
        [[fallthrough]];
      case kNumSign:
        if (!IsDigit(b) || !Feasible(n, negative, static_cast<uint64_t>(b - '0'), 1)) {
          return Step::kReject;
        }
        f.value = static_cast<uint64_t>(b - '0');
        f.c = 1;
        f.phase = kNumInt;
        return Step::kConsumed;
      case kNumInt:
        if (IsDigit(b)) {
          if (f.value == 0 || f.c >= kMaxIntDigits) return Step::kReject;
          uint64_t next = f.value * 10 + static_cast<uint64_t>(b - '0');
          if (!Feasible(n, negative, next, f.c + 1)) return Step::kReject;
          f.value = next;
          ++f.c;
          return Step::kConsumed;
        }
        if (b == '.') {
          if (!FractionAllowed(n, negative, f.value, f.c)) return Step::kReject;
          f.phase = kNumDot;
          return Step::kConsumed;
        }
        if ((b == 'e' || b == 'E') && exponent_ok) {
          f.phase = kNumExp;
          return Step::kConsumed;
        }
        return InRange(n, negative, f.value) ? Step::kDoneRetry : Step::kReject;
      case kNumDot:
        if (!IsDigit(b)) return Step::kReject;
        f.phase = kNumFrac;
        f.aux = 1;
        return Step::kConsumed;
      case kNumFrac:
        if (IsDigit(b)) {
          if (f.c + f.aux >= kMaxSignificantDigits) return Step::kReject;
          ++f.aux;
          return Step::kConsumed;
        }
        if ((b == 'e' || b == 'E') && exponent_ok) {
          f.phase = kNumExp;
          return Step::kConsumed;
        }
        return Step::kDoneRetry;
      case kNumExp:
        if (b == '+' || b == '-') {
          f.phase = kNumExpSign;
          return Step::kConsumed;
        }
        [[fallthrough]];
      case kNumExpSign:
        if (!IsDigit(b)) return Step::kReject;
        f.phase = kNumExpDigits;
        f.aux2 = 1;
        return Step::kConsumed;
      case kNumExpDigits:
        if (IsDigit(b)) {
          if (f.aux2 >= kMaxExponentDigits) return Step::kReject;
          ++f.aux2;
          return Step::kConsumed;
        }
        return Step::kDoneRetry;
      default:
        return Step::kReject;
    }
  }

  // Literal alternatives sorted bytewise: those sharing the f.c bytes matched so far form the
  // range [f.a, f.b); a complete one (if any) is first.
  static Step StepLiterals(Frame& f, const Node& n, int b) {
    const auto& lits = n.literals;
    const bool complete = lits[f.a].size() == f.c;
    if (b != kEnd) {
      auto begin = lits.begin() + f.a + (complete ? 1 : 0), end = lits.begin() + f.b;
      const size_t pos = f.c;
      auto lo = std::partition_point(
          begin, end, [&](const std::string& s) { return static_cast<unsigned char>(s[pos]) < b; });
      auto hi = std::partition_point(
          lo, end, [&](const std::string& s) { return static_cast<unsigned char>(s[pos]) == b; });
      if (lo != hi) {
        f.a = static_cast<uint32_t>(lo - lits.begin());
        f.b = static_cast<uint32_t>(hi - lits.begin());
        ++f.c;
        return Step::kConsumed;
      }
    }
    return complete ? Step::kDoneRetry : Step::kReject;
  }

  const Grammar& g_;
};

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const TokenVocabulary> vocabulary)
    : grammar_(std::move(grammar)), vocab_(std::move(vocabulary)) {
  state_.frames.push_back(Machine::Start(*grammar_, grammar_->root));
  state_.ends.push_back(1);
}

void GrammarMatcher::AddStack(const std::vector<Frame>& stack, StackSet* out) const {
  uint32_t begin = 0;
  for (uint32_t end : out->ends) {
    if (end - begin == stack.size() &&
        std::equal(stack.begin(), stack.end(), out->frames.begin() + begin)) {
      return;  // the same parse reached twice
    }
    begin = end;
  }
  if (out->ends.size() >= kMaxStacks) return;
  out->frames.insert(out->frames.end(), stack.begin(), stack.end());
  out->ends.push_back(static_cast<uint32_t>(out->frames.size()));
}

void GrammarMatcher::StepStack(std::vector<Frame>& stack, int byte, StackSet* out,
                               int forks) const {
  const Grammar& g = *grammar_;
  Machine machine(g);
  while (!stack.empty()) {
    int32_t child = -1;
    switch (machine.StepFrame(stack.back(), byte, stack.size(), &child)) {
      case Step::kConsumed:
        AddStack(stack, out);
        return;
      case Step::kConsumedDone:
        stack.pop_back();
        machine.ChildDone(stack.back());
        AddStack(stack, out);
        return;
      case Step::kDoneRetry:
        stack.pop_back();
        machine.ChildDone(stack.back());
        continue;
      case Step::kReject:
        return;
      case Step::kPush:
        if (child < 0) return;
        if (g.nodes[child].kind == grammar_internal::NodeKind::kUnion) {
          // One parse per alternative whose shallowest value still fits.
          if (forks > 8) return;
          for (uint32_t branch : g.nodes[child].branches) {
            if (!machine.Fits(stack.size(), static_cast<int32_t>(branch))) continue;
            std::vector<Frame> copy = stack;
            copy.push_back(Machine::Start(g, branch));
            StepStack(copy, byte, out, forks + 1);
          }
          return;
        }
        stack.push_back(Machine::Start(g, static_cast<uint32_t>(child)));
        continue;
    }
  }
}

bool GrammarMatcher::Advance(const StackSet& in, int byte, StackSet* out) const {
  out->Clear();
  uint32_t begin = 0;
  for (uint32_t end : in.ends) {
    scratch_.assign(in.frames.begin() + begin, in.frames.begin() + end);
    StepStack(scratch_, byte, out, 0);
    begin = end;
  }
  return !out->Empty();
}

Status GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (terminated_) return InvalidArgument("the grammar already accepted an end of sequence");
  StackSet current = state_, next;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!Advance(current, static_cast<unsigned char>(bytes[i]), &next)) {
      return InvalidArgument("byte " + std::to_string(i) + " of '" + std::string(bytes) +
                             "' does not continue the structured output");
    }
    std::swap(current, next);
  }
  state_ = std::move(current);
  return Status::Ok();
}

Status GrammarMatcher::Accept(int32_t token) {
  if (token < 0 || token >= vocab_->size()) {
    return OutOfRange("token " + std::to_string(token) + " is outside the vocabulary");
  }
  if (terminated_) return InvalidArgument("the grammar already accepted an end of sequence");
  switch (vocab_->kind_[token]) {
    case TokenVocabulary::kEos:
      if (!IsComplete()) {
        return InvalidArgument("end of sequence before the structured output is complete");
      }
      terminated_ = true;
      return Status::Ok();
    case TokenVocabulary::kNever:
      return InvalidArgument("token " + std::to_string(token) +
                             " is never allowed in structured output");
    default:
      return AcceptBytes(vocab_->bytes(token));
  }
}

bool GrammarMatcher::IsComplete() const {
  if (terminated_) return true;
  StackSet out;
  return Advance(state_, kEnd, &out);
}

bool GrammarMatcher::CanContinue() const {
  if (terminated_) return false;
  StackSet out;
  for (int b = 0; b < 256; ++b) {
    if (Advance(state_, b, &out)) return true;
  }
  return false;
}

const TokenVocabulary::PlainSet* GrammarMatcher::InFreeStringContent(
    uint32_t* remaining_chars, std::bitset<256>* pending) const {
  const TokenVocabulary::PlainSet* set = nullptr;
  uint32_t remaining = 0;
  for (uint32_t end : state_.ends) {
    Frame top = state_.frames[end - 1];
    const Node* n = &grammar_->nodes[top.node];
    if (n->kind == NodeKind::kObject && n->xml && top.phase == kXmlBeforeValue) {
      // Before an XML parameter's first byte: as its raw string's empty content, when it is one
      // (its first token would otherwise walk the whole vocabulary).
      top = Machine::Start(*grammar_, n->props[top.b].node);
      n = &grammar_->nodes[top.node];
    }
    if (n->kind != NodeKind::kString || n->pattern >= 0 || top.phase != kStrContent) {
      return nullptr;
    }
    // With part of a forbidden text pending, a set token (it holds no '<') may complete it
    // only by beginning with the byte that continues it; any other first byte ends the match.
    if (n->xml_guard && top.value != 0) {
      for (size_t i = 0; i < std::size(grammar_internal::kXmlForbidden); ++i) {
        const uint64_t k = (top.value >> (8 * i)) & 0xff;
        if (k > 0) pending->set(static_cast<uint8_t>(grammar_internal::kXmlForbidden[i][k]));
      }
    }
    const TokenVocabulary::PlainSet* mine = n->raw         ? &vocab_->raw_
                                            : n->xml_guard ? &vocab_->json_guarded_
                                                           : &vocab_->plain_;
    if (set != nullptr && mine != set) return nullptr;
    set = mine;
    remaining = std::max(remaining, n->max_len - top.a);
  }
  *remaining_chars = remaining;
  return set;
}

void GrammarMatcher::Walk(const TokenVocabulary::Trie& trie, uint32_t node, size_t depth,
                          std::span<uint64_t> mask) {
  const TokenVocabulary::Trie::TrieNode& here = trie.nodes[node];
  for (uint32_t e = here.edge_begin; e < here.edge_end; ++e) {
    const TokenVocabulary::Trie::Edge edge = trie.edges[e];
    if (!Advance(walk_sets_[depth], edge.byte, &walk_sets_[depth + 1])) continue;
    const TokenVocabulary::Trie::TrieNode& child = trie.nodes[edge.child];
    for (uint32_t t = child.token_begin; t < child.token_end; ++t) {
      const int32_t id = trie.tokens[t];
      mask[id / 64] |= uint64_t{1} << (id % 64);
    }
    if (child.edge_begin != child.edge_end) Walk(trie, edge.child, depth + 1, mask);
  }
}

void GrammarMatcher::FillMask(std::span<uint64_t> mask) {
  std::fill(mask.begin(), mask.end(), 0);
  if (terminated_ || mask.size() < vocab_->mask_words()) return;
  if (walk_sets_.size() < vocab_->max_token_bytes_ + 1) {
    walk_sets_.resize(vocab_->max_token_bytes_ + 1);
  }
  walk_sets_[0] = state_;
  uint32_t remaining = 0;
  std::bitset<256> pending;
  if (const TokenVocabulary::PlainSet* set = InFreeStringContent(&remaining, &pending)) {
    // Plain text tokens stay inside the string: allowed by their character count alone.
    if (remaining >= set->max_chars) {
      std::copy(set->mask.begin(), set->mask.end(), mask.begin());
    } else {
      for (size_t i = 0; i < set->by_chars.size(); ++i) {
        if (set->chars[i] > remaining) break;
        const int32_t id = set->by_chars[i];
        mask[id / 64] |= uint64_t{1} << (id % 64);
      }
    }
    // The set's tokens that may continue a pending forbidden text: each walked byte by byte.
    for (int c = 0; pending.any() && c < 256; ++c) {
      if (!pending.test(static_cast<size_t>(c))) continue;
      for (uint32_t i = set->first[c]; i < set->first[c + 1]; ++i) {
        const int32_t id = set->by_first_byte[i];
        mask[id / 64] &= ~(uint64_t{1} << (id % 64));
        const std::string& bytes = vocab_->bytes_[static_cast<size_t>(id)];
        size_t d = 0;
        while (d < bytes.size() &&
               Advance(walk_sets_[d], static_cast<uint8_t>(bytes[d]), &walk_sets_[d + 1])) {
          ++d;
        }
        if (d == bytes.size()) mask[id / 64] |= uint64_t{1} << (id % 64);
      }
    }
    Walk(set->others, 0, 0, mask);
  } else {
    Walk(vocab_->all_, 0, 0, mask);
  }
  if (IsComplete()) {
    for (int32_t id : vocab_->eos_ids_) mask[id / 64] |= uint64_t{1} << (id % 64);
  }
}

}  // namespace tessera
