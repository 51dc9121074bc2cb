#include "grammar/pattern.h"

#include <algorithm>
#include <bitset>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessera {
namespace {

using grammar_internal::PatternDfa;
using CharSet = std::bitset<PatternDfa::kColumns>;

constexpr size_t kMaxNfaStates = 20000;
constexpr size_t kMaxDfaStates = 2000;
constexpr int kMaxRepeat = 256;
constexpr int kUnbounded = -1;

CharSet Generatable() {
  CharSet s;
  for (int c = 0x20; c < 0x7f; ++c) s.set(c);
  s.reset('"');
  s.reset('\\');
  return s;
}

struct Ast {
  enum Kind { kSet, kConcat, kAlt, kRepeat } kind = kSet;
  CharSet set;
  std::vector<std::unique_ptr<Ast>> children;
  int min = 0, max = 0;  // kRepeat; max kUnbounded
};
using AstPtr = std::unique_ptr<Ast>;

int FirstMember(const CharSet& s) {
  for (int c = 0; c < PatternDfa::kColumns; ++c) {
    if (s[c]) return c;
  }
  return -1;
}

AstPtr MakeSet(const CharSet& set) {
  auto a = std::make_unique<Ast>();
  a->kind = Ast::kSet;
  a->set = set & Generatable();
  return a;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Expected<AstPtr> Parse() {
    bool anchored_start = false, anchored_end = false;
    if (!text_.empty() && text_[0] == '^') {
      anchored_start = true;
      pos_ = 1;
    }
    if (text_.size() > pos_ && text_.back() == '$') {
      size_t backslashes = 0;
      for (size_t i = text_.size() - 1; i > pos_ && text_[i - 1] == '\\'; --i) ++backslashes;
      if (backslashes % 2 == 0) {
        anchored_end = true;
        end_ = text_.size() - 1;
      }
    }
    if (end_ == std::string_view::npos) end_ = text_.size();
    TS_ASSIGN_OR_RETURN(AstPtr body, ParseAlt(0));
    if (pos_ != end_) return Fail("unbalanced ')'");
    auto whole = std::make_unique<Ast>();
    whole->kind = Ast::kConcat;
    auto any_run = [] {
      auto r = std::make_unique<Ast>();
      r->kind = Ast::kRepeat;
      r->min = 0;
      r->max = kUnbounded;
      r->children.push_back(MakeSet(Generatable()));
      return r;
    };
    if (!anchored_start) whole->children.push_back(any_run());
    whole->children.push_back(std::move(body));
    if (!anchored_end) whole->children.push_back(any_run());
    return whole;
  }

 private:
  Status Fail(const std::string& what) const {
    return Unsupported("uses unsupported syntax: " + what + " (at offset " + std::to_string(pos_) +
                       ")");
  }
  bool AtEnd() const { return pos_ >= end_; }

  Expected<AstPtr> ParseAlt(int depth) {
    if (depth > 32) return Fail("groups nested too deeply");
    auto alt = std::make_unique<Ast>();
    alt->kind = Ast::kAlt;
    while (true) {
      TS_ASSIGN_OR_RETURN(AstPtr branch, ParseConcat(depth));
      alt->children.push_back(std::move(branch));
      if (AtEnd() || text_[pos_] != '|') break;
      ++pos_;
    }
    return alt;
  }

  Expected<AstPtr> ParseConcat(int depth) {
    auto seq = std::make_unique<Ast>();
    seq->kind = Ast::kConcat;
    while (!AtEnd() && text_[pos_] != '|' && text_[pos_] != ')') {
      TS_ASSIGN_OR_RETURN(AstPtr atom, ParseAtom(depth));
      TS_ASSIGN_OR_RETURN(atom, ParseQuantifiers(std::move(atom)));
      seq->children.push_back(std::move(atom));
    }
    return seq;
  }

  Expected<AstPtr> ParseQuantifiers(AstPtr atom) {
    while (!AtEnd()) {
      char c = text_[pos_];
      int min = 0, max = 0;
      if (c == '*') {
        min = 0, max = kUnbounded, ++pos_;
      } else if (c == '+') {
        min = 1, max = kUnbounded, ++pos_;
      } else if (c == '?') {
        min = 0, max = 1, ++pos_;
      } else if (c == '{') {
        size_t save = pos_++;
        auto number = [&](int* out) {
          size_t start = pos_;
          long v = 0;
          while (!AtEnd() && text_[pos_] >= '0' && text_[pos_] <= '9' && v <= kMaxRepeat) {
            v = v * 10 + (text_[pos_++] - '0');
          }
          *out = static_cast<int>(v);
          return pos_ > start;
        };
        if (!number(&min)) {
          pos_ = save;
          return atom;  // a literal '{' follows
        }
        max = min;
        if (!AtEnd() && text_[pos_] == ',') {
          ++pos_;
          if (!number(&max)) max = kUnbounded;
        }
        if (AtEnd() || text_[pos_] != '}') return Fail("malformed {n,m}");
        ++pos_;
        if (min > kMaxRepeat || max > kMaxRepeat) return Fail("repeat count above 256");
        if (max != kUnbounded && max < min) return Fail("{n,m} with m < n");
      } else {
        return atom;
      }
      if (!AtEnd() && text_[pos_] == '?') ++pos_;  // lazy: same set of matches
      if (!AtEnd() && text_[pos_] == '+') return Fail("possessive quantifier");
      auto rep = std::make_unique<Ast>();
      rep->kind = Ast::kRepeat;
      rep->min = min;
      rep->max = max;
      rep->children.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  // \d \w \s and friends, shared by atoms and classes; false when `c` is no class escape.
  static bool ClassEscape(char c, CharSet* out) {
    CharSet s;
    switch (c) {
      case 'd':
      case 'D':
        for (int d = '0'; d <= '9'; ++d) s.set(d);
        break;
      case 'w':
      case 'W':
        for (int d = '0'; d <= '9'; ++d) s.set(d);
        for (int d = 'a'; d <= 'z'; ++d) s.set(d), s.set(d - 'a' + 'A');
        s.set('_');
        break;
      case 's':
      case 'S':
        s.set(' ');  // other white space needs escapes, which patterns never generate
        break;
      default:
        return false;
    }
    *out = (c >= 'A' && c <= 'Z') ? (Generatable() & ~s) : s;
    return true;
  }

  // The character after a backslash (pos_ at it), for atoms and class members.
  Expected<CharSet> Escape() {
    if (AtEnd()) return Fail("trailing backslash");
    char c = text_[pos_++];
    CharSet s;
    if (ClassEscape(c, &s)) return s;
    if (c == 'n' || c == 't' || c == 'r' || c == 'f' || c == 'v') return CharSet();  // controls
    if (c == 'u' && pos_ + 4 <= end_) {
      int v = 0;
      for (int i = 0; i < 4; ++i) {
        char h = text_[pos_ + i];
        int d = (h >= '0' && h <= '9')   ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) return Fail("malformed \\u escape");
        v = v * 16 + d;
      }
      pos_ += 4;
      if (v >= 0x80) return Fail("non-ASCII character");
      s.set(v);
      return s;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      --pos_;
      return Fail(std::string("escape \\") + c);
    }
    if (static_cast<unsigned char>(c) >= 0x80) return Fail("non-ASCII character");
    s.set(static_cast<unsigned char>(c));
    return s;
  }

  Expected<AstPtr> ParseAtom(int depth) {
    char c = text_[pos_];
    if (static_cast<unsigned char>(c) >= 0x80) return Fail("non-ASCII character");
    if (c == '(') {
      ++pos_;
      if (!AtEnd() && text_[pos_] == '?') {
        if (pos_ + 1 < end_ && text_[pos_ + 1] == ':') {
          pos_ += 2;
        } else {
          return Fail("group modifier (?...)");
        }
      }
      TS_ASSIGN_OR_RETURN(AstPtr inner, ParseAlt(depth + 1));
      if (AtEnd() || text_[pos_] != ')') return Fail("unclosed '('");
      ++pos_;
      return inner;
    }
    if (c == '[') return ParseClass();
    if (c == '.') {
      ++pos_;
      return MakeSet(Generatable());
    }
    if (c == '\\') {
      ++pos_;
      TS_ASSIGN_OR_RETURN(CharSet s, Escape());
      return MakeSet(s);
    }
    if (c == '^' || c == '$') return Fail("anchor inside the pattern");
    if (c == '*' || c == '+' || c == '?') return Fail("quantifier without an operand");
    ++pos_;
    CharSet s;
    s.set(static_cast<unsigned char>(c));
    return MakeSet(s);
  }

  Expected<AstPtr> ParseClass() {
    ++pos_;  // '['
    bool negate = !AtEnd() && text_[pos_] == '^';
    if (negate) ++pos_;
    CharSet s;
    bool first = true;
    while (true) {
      if (AtEnd()) return Fail("unclosed '['");
      char c = text_[pos_];
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      int lo;
      if (c == '\\') {
        ++pos_;
        TS_ASSIGN_OR_RETURN(CharSet e, Escape());
        if (e.count() != 1) {  // a class escape such as \d: no range may follow
          s |= e;
          continue;
        }
        lo = static_cast<int>(FirstMember(e));
      } else {
        if (static_cast<unsigned char>(c) >= 0x80) return Fail("non-ASCII character");
        lo = static_cast<unsigned char>(c);
        ++pos_;
      }
      if (pos_ + 1 < end_ && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        int hi;
        if (text_[pos_] == '\\') {
          ++pos_;
          TS_ASSIGN_OR_RETURN(CharSet e, Escape());
          if (e.count() != 1) return Fail("class escape as a range end");
          hi = static_cast<int>(FirstMember(e));
        } else {
          if (static_cast<unsigned char>(text_[pos_]) >= 0x80) return Fail("non-ASCII character");
          hi = static_cast<unsigned char>(text_[pos_++]);
        }
        if (hi < lo) return Fail("range out of order");
        for (int v = lo; v <= hi; ++v) s.set(v);
      } else {
        s.set(lo);
      }
    }
    return MakeSet(negate ? (Generatable() & ~s) : s);
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t end_ = std::string_view::npos;
};

// Thompson NFA: each state has epsilon edges and at most one character-set edge.
struct Nfa {
  struct State {
    std::vector<int> epsilon;
    CharSet set;
    int next = -1;
  };
  std::vector<State> states;
  bool overflow = false;

  int Add() {
    if (states.size() >= kMaxNfaStates) {
      overflow = true;
      return 0;
    }
    states.emplace_back();
    return static_cast<int>(states.size() - 1);
  }
  void Eps(int from, int to) {
    if (!overflow) states[from].epsilon.push_back(to);
  }

  // Returns (start, end) of a fragment for the AST.
  std::pair<int, int> Build(const Ast& a) {
    int s = Add(), e = Add();
    if (overflow) return {0, 0};
    switch (a.kind) {
      case Ast::kSet:
        states[s].set = a.set;
        states[s].next = e;
        break;
      case Ast::kConcat: {
        int at = s;
        for (const AstPtr& c : a.children) {
          auto [cs, ce] = Build(*c);
          Eps(at, cs);
          at = ce;
        }
        Eps(at, e);
        break;
      }
      case Ast::kAlt:
        for (const AstPtr& c : a.children) {
          auto [cs, ce] = Build(*c);
          Eps(s, cs);
          Eps(ce, e);
        }
        break;
      case Ast::kRepeat: {
        int at = s;
        for (int i = 0; i < a.min && !overflow; ++i) {
          auto [cs, ce] = Build(*a.children[0]);
          Eps(at, cs);
          at = ce;
        }
        if (a.max == kUnbounded) {
          auto [cs, ce] = Build(*a.children[0]);
          Eps(at, cs);
          Eps(ce, cs);
          Eps(ce, e);
        } else {
          for (int i = a.min; i < a.max && !overflow; ++i) {
            auto [cs, ce] = Build(*a.children[0]);
            Eps(at, e);
            Eps(at, cs);
            at = ce;
          }
        }
        Eps(at, e);
        break;
      }
    }
    return {s, e};
  }

  void Closure(std::vector<int>* set) const {
    std::vector<char> in(states.size(), 0);
    std::vector<int> todo = *set;
    for (int s : *set) in[s] = 1;
    while (!todo.empty()) {
      int s = todo.back();
      todo.pop_back();
      for (int t : states[s].epsilon) {
        if (!in[t]) {
          in[t] = 1;
          set->push_back(t);
          todo.push_back(t);
        }
      }
    }
    std::sort(set->begin(), set->end());
  }
};

}  // namespace

Status PruneToAcceptance(PatternDfa& dfa) {
  const size_t n = dfa.accepting.size();
  // Characters still needed to reach an accepting state: reverse breadth-first search.
  std::vector<std::vector<int>> into(n);
  for (size_t d = 0; d < n; ++d) {
    for (int c = 0; c < PatternDfa::kColumns; ++c) {
      int t = dfa.next[d * PatternDfa::kColumns + c];
      if (t >= 0) into[t].push_back(static_cast<int>(d));
    }
  }
  dfa.dist_to_accept.assign(n, UINT32_MAX);
  std::deque<int> queue;
  for (size_t d = 0; d < n; ++d) {
    if (dfa.accepting[d]) dfa.dist_to_accept[d] = 0, queue.push_back(static_cast<int>(d));
  }
  while (!queue.empty()) {
    int t = queue.front();
    queue.pop_front();
    for (int d : into[t]) {
      if (dfa.dist_to_accept[d] == UINT32_MAX) {
        dfa.dist_to_accept[d] = dfa.dist_to_accept[t] + 1;
        queue.push_back(d);
      }
    }
  }
  if (dfa.dist_to_accept[0] == UINT32_MAX) {
    return InvalidArgument(
        "has no match made of printable ASCII characters other than '\"' and '\\'");
  }
  // Transitions into states that cannot reach acceptance would be dead ends: drop them.
  for (size_t i = 0; i < dfa.next.size(); ++i) {
    if (dfa.next[i] >= 0 && dfa.dist_to_accept[dfa.next[i]] == UINT32_MAX) dfa.next[i] = -1;
  }
  return Status::Ok();
}

Expected<PatternDfa> CompilePattern(std::string_view pattern) {
  Parser parser(pattern);
  TS_ASSIGN_OR_RETURN(AstPtr ast, parser.Parse());
  Nfa nfa;
  auto [start, accept] = nfa.Build(*ast);
  if (nfa.overflow) return ResourceExhausted("is too large (more than 20000 NFA states)");

  PatternDfa dfa;
  std::map<std::vector<int>, int> ids;
  std::vector<std::vector<int>> sets;
  std::vector<int> first = {start};
  nfa.Closure(&first);
  ids[first] = 0;
  sets.push_back(first);
  const CharSet generatable = Generatable();
  for (size_t d = 0; d < sets.size(); ++d) {
    dfa.next.resize((d + 1) * PatternDfa::kColumns, -1);
    const std::vector<int> current = sets[d];
    for (int c = 0; c < PatternDfa::kColumns; ++c) {
      if (!generatable[c]) continue;
      std::vector<int> moved;
      for (int s : current) {
        if (nfa.states[s].next >= 0 && nfa.states[s].set[c]) moved.push_back(nfa.states[s].next);
      }
      if (moved.empty()) continue;
      nfa.Closure(&moved);
      moved.erase(std::unique(moved.begin(), moved.end()), moved.end());
      auto [it, added] = ids.emplace(moved, static_cast<int>(sets.size()));
      if (added) {
        if (sets.size() >= kMaxDfaStates)
          return ResourceExhausted("needs more than 2000 DFA states");
        sets.push_back(moved);
      }
      dfa.next[d * PatternDfa::kColumns + c] = it->second;
    }
  }
  const size_t n = sets.size();
  dfa.accepting.assign(n, 0);
  for (size_t d = 0; d < n; ++d) {
    dfa.accepting[d] = std::binary_search(sets[d].begin(), sets[d].end(), accept) ? 1 : 0;
  }
  TS_RETURN_IF_ERROR(PruneToAcceptance(dfa));
  return dfa;
}

}  // namespace tessera
