// GBNF -> syntax tree -> per-rule NFAs over byte DFAs -> analyses -> token caches, all in
// the caller's region: the compiled grammar grows from its start, temporaries from its end.
// The parser (gbnf_parser), the DFAs (utf8_dfa) and the caches (token_caches) are stages of
// their own; this file lowers the tree to NFAs, analyses them and drives the stages.
#include <algorithm>
#include <cstring>
#include <new>

#include "runtime/base/hash.h"
#include "runtime/structured/gbnf_parser.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/grammar_program.h"
#include "runtime/structured/literal_trie.h"
#include "runtime/structured/region.h"
#include "runtime/structured/token_caches.h"
#include "runtime/structured/utf8_dfa.h"
#include "runtime/text/unicode.h"

namespace tern {

using namespace grammar_detail;

namespace {

// ---- The compiler ----

class Compiler {
 public:
  Compiler(const char* text, size_t size, Region& region, Grammar::Program& g, const std::atomic<int>* abort)
      : text_(text), region_(region), g_(g), parser_(text, size, region), dfas_(region), abort_(abort) {}

  Error run() {
    TERN_RETURN_IF_ERROR(parser_.run());
    TERN_RETURN_IF_ERROR(resolve());
    TERN_RETURN_IF_ERROR(build_dfas());
    TERN_RETURN_IF_ERROR(check_abort("building character classes"));
    TERN_RETURN_IF_ERROR(lower_rules());
    TERN_RETURN_IF_ERROR(check_abort("building the automaton"));
    TERN_RETURN_IF_ERROR(analyse());
    return make_positions();
  }

 private:
  // Which rules are inlined into their callers, which are reachable, and their numbers.
  Error resolve() {
    RuleDef* rules = parser_.rules();
    const uint32_t n = parser_.rule_count();
    root_ = parser_.find("root");  // the parser checked that it is there
    // Sizes and references per rule, from each node's owner.
    AstNode* nodes = parser_.nodes();
    uint32_t* owner = region_.high<uint32_t>(parser_.node_count());
    if (owner == nullptr) return no_room(region_, "the syntax tree");
    for (uint32_t i = 0; i < parser_.node_count(); ++i) owner[i] = kNone;
    for (uint32_t r = 0; r < n; ++r) mark_owner(rules[r].body, r, owner);
    for (uint32_t i = 0; i < parser_.node_count(); ++i) {
      if (owner[i] == kNone) continue;
      ++rules[owner[i]].ast_size;
      if (nodes[i].kind == Ast::Ref) rules[owner[i]].has_ref = true;
    }
    // Small rules that call nothing are copied into their callers (e.g. white space), so
    // the caches see their callers' context.
    for (uint32_t r = 0; r < n; ++r) rules[r].inlined = r != root_ && !rules[r].has_ref && rules[r].ast_size <= 12;
    // Rules reachable from the root (through the tree; inlined rules have no references).
    uint32_t* work = owner;  // reused: owners are no longer needed
    uint32_t n_work = 0;
    rules[root_].reachable = true;
    work[n_work++] = root_;
    while (n_work > 0) {
      const uint32_t r = work[--n_work];
      refs_of(rules[r].body, [&](uint32_t callee) {
        if (!rules[callee].reachable) {
          rules[callee].reachable = true;
          work[n_work++] = callee;
        }
      });
    }
    for (uint32_t r = 0; r < n; ++r) {
      if (rules[r].reachable && !rules[r].inlined) rules[r].compiled = n_compiled_++;
    }
    // Large repetitions are counted: their item becomes a rule of its own (one per syntax
    // node, shared by every place the node is lowered).
    body_rule_ = region_.high<uint32_t>(parser_.node_count());
    body_owner_ = region_.high<uint32_t>(parser_.node_count());
    if (body_rule_ == nullptr || body_owner_ == nullptr) return no_room(region_, "the syntax tree");
    for (uint32_t i = 0; i < parser_.node_count(); ++i) body_owner_[i] = kNone;
    for (uint32_t r = 0; r < n; ++r) mark_owner(rules[r].body, r, body_owner_);
    // References per rule: an inlined rule is lowered once per reference, and so are the
    // counted repetitions in it (each lowering is a loop of its own).
    uint32_t* refs = region_.high<uint32_t>(n + 1);
    uint32_t* firsts = region_.high<uint32_t>(parser_.node_count() + 1);  // bodies made so far
    if (refs == nullptr || firsts == nullptr) return no_room(region_, "the syntax tree");
    for (uint32_t r = 0; r < n; ++r) refs[r] = 0;
    for (uint32_t i = 0; i < parser_.node_count(); ++i) {
      if (nodes[i].kind == Ast::Ref && body_owner_[i] != kNone && rules[body_owner_[i]].reachable) ++refs[nodes[i].a];
    }
    uint32_t n_firsts = 0;
    for (uint32_t i = 0; i < parser_.node_count(); ++i) {
      body_rule_[i] = kNone;
      const uint32_t owner = body_owner_[i];
      if (owner == kNone || !rules[owner].reachable || !counted(i)) continue;
      loop_capacity_ += rules[owner].inlined ? refs[owner] : 1;
      // Items written alike share one body, and so its caches (a schema's string character).
      for (uint32_t k = 0; k < n_firsts && body_rule_[i] == kNone; ++k) {
        if (same_tree(nodes, text_, nodes[firsts[k]].child, nodes[i].child)) body_rule_[i] = body_rule_[firsts[k]];
      }
      if (body_rule_[i] != kNone) continue;
      body_rule_[i] = n_compiled_++;
      firsts[n_firsts++] = i;
      ++n_bodies_;
    }
    return Error::Ok;
  }

  // Whether a repetition is counted in the parse state rather than unrolled: large counts of
  // an item that always reads something (a count that reads nothing would never advance).
  bool counted(uint32_t node) const {
    const AstNode& n = parser_.nodes()[node];
    if (n.kind != Ast::Repeat) return false;
    const uint32_t bound = n.b == kUnbounded ? n.a : n.b;
    return bound > kUnrollLimit && reads_something(parser_.nodes(), n.child);
  }

  // Recursive: the depth is bounded by the parser's nesting limit.
  void mark_owner(uint32_t node, uint32_t rule, uint32_t* owner) {
    AstNode* nodes = parser_.nodes();
    owner[node] = rule;
    for (uint32_t c = nodes[node].child; c != kNone; c = nodes[c].sibling) mark_owner(c, rule, owner);
  }

  template <typename F>
  void refs_of(uint32_t node, F f) {
    AstNode* nodes = parser_.nodes();
    if (nodes[node].kind == Ast::Ref) {
      f(nodes[node].a);
      return;
    }
    for (uint32_t c = nodes[node].child; c != kNone; c = nodes[c].sibling) refs_of(c, f);
  }

  Error check_abort(const char* stage) const {
    if (abort_ == nullptr || abort_->load(std::memory_order_relaxed) == 0) return Error::Ok;
    return fail(Error::Aborted, "the grammar's compile was aborted (%s)", stage);
  }

  // A class written the same way as an earlier one shares its DFA (a schema repeats the
  // string character's class for every length-bounded property). Returns the earlier node, or
  // kNone after recording this one. `seen`: an open-addressed table of node index + 1.
  uint32_t same_class(uint32_t node, uint32_t* seen, uint32_t mask) const {
    const AstNode* nodes = parser_.nodes();
    const AstNode& n = nodes[node];
    const uint64_t h =
        fnv1a(text_ + n.a, n.b - n.a, fnv1a_u64(kFnv1aBasis, static_cast<uint64_t>(n.kind) << 8 | n.negated));
    for (uint32_t slot = static_cast<uint32_t>(h) & mask;; slot = (slot + 1) & mask) {
      if (seen[slot] == 0) {
        seen[slot] = node + 1;
        return kNone;
      }
      if (same_tree(nodes, text_, seen[slot] - 1, node)) return seen[slot] - 1;
    }
  }

  Error build_dfas() {
    TERN_RETURN_IF_ERROR(dfas_.init());
    AstNode* nodes = parser_.nodes();
    uint32_t mask = 1;
    while (mask < 2 * parser_.node_count()) mask <<= 1;
    uint32_t* seen = region_.high<uint32_t>(mask);
    if (seen == nullptr) return no_room(region_, "character classes");
    std::memset(seen, 0, mask * sizeof(uint32_t));
    --mask;
    for (uint32_t i = 0; i < parser_.node_count(); ++i) {
      AstNode& n = nodes[i];
      if ((n.kind == Ast::Class || n.kind == Ast::Any)) {
        const uint32_t earlier = same_class(i, seen, mask);
        if (earlier != kNone) {
          n.dfa = nodes[earlier].dfa;
          n.dfa_states = nodes[earlier].dfa_states;
          continue;
        }
        TERN_RETURN_IF_ERROR(check_abort("building character classes"));
      }
      if (n.kind == Ast::Literal) {
        for (size_t p = n.a; p < n.b;) {
          uint32_t cp;
          read_char(text_, n.b, &p, &cp);
          uint8_t bytes[4];
          const size_t k = unicode::encode_utf8(cp, bytes);
          for (size_t j = 0; j < k; ++j) TERN_RETURN_IF_ERROR(dfas_.byte(bytes[j]).error());
        }
        continue;
      }
      if (n.kind != Ast::Class && n.kind != Ast::Any) continue;
      const size_t mark = region_.high_mark();
      const uint32_t capacity = n.kind == Ast::Any ? 4 : (n.b - n.a) + 4;
      CpRange* ranges = region_.high<CpRange>(capacity);
      if (ranges == nullptr) return no_room(region_, "a character class");
      uint32_t count = 0;
      if (n.kind == Ast::Any) {
        ranges[count++] = CpRange{0, 0x10FFFF};
      } else {
        for (size_t p = n.a; p < n.b;) {
          uint32_t lo, hi;
          read_char(text_, n.b, &p, &lo);
          hi = lo;
          if (p + 1 < n.b && text_[p] == '-') {
            ++p;
            read_char(text_, n.b, &p, &hi);
          }
          ranges[count++] = CpRange{lo, hi};
        }
      }
      count = normalize_ranges(ranges, count, n.negated != 0);
      uint32_t states = 0;
      TERN_ASSIGN_OR_RETURN(n.dfa, dfas_.chars(ranges, count, &states));
      n.dfa_states = static_cast<uint16_t>(states);
      region_.high_release(mark);
    }
    return Error::Ok;
  }

  // ---- NFA ----

  Result<uint32_t> state(NfaKind kind, uint32_t arg, uint32_t next, uint32_t next2) {
    if (++work_ > kMaxWork) {
      return fail(Error::GrammarTooLarge,
                  "the grammar expands to more than %u automaton states (repetition counts "
                  "multiply)",
                  kMaxWork);
    }
    if (region_.low<NfaState>(1) == nullptr) return no_room(region_, "the automaton");
    NfaState& s = states_[n_states_];
    s = NfaState{kind, 0, 0, 0, arg, next, next2, rule_, 0};
    return n_states_++;
  }

  Error lower_rules() {
    RuleDef* rules = parser_.rules();
    const uint32_t n = parser_.rule_count();
    // Rule records and names (low), then the states. A loop's body is named after the rule
    // it is written in.
    infos_ = region_.low<RuleInfo>(n_compiled_);
    size_t name_bytes = 0;
    for (uint32_t r = 0; r < n; ++r) name_bytes += rules[r].compiled != kNone ? rules[r].name_size + 1 : 0;
    for (uint32_t i = 0; i < parser_.node_count(); ++i) {
      if (body_rule_[i] != kNone) name_bytes += rules[body_owner_[i]].name_size + 1;
    }
    names_ = region_.low<char>(name_bytes + 1);
    loop_capacity_ += n_bodies_ * (kTierRounds + 1);
    loops_ = region_.high<LoopInfo>(loop_capacity_ + 1);
    if (infos_ == nullptr || names_ == nullptr || loops_ == nullptr) return no_room(region_, "rule names");
    size_t at = 0;
    auto name = [&](uint32_t compiled, const RuleDef& def) {
      RuleInfo& info = infos_[compiled];
      std::memset(&info, 0, sizeof info);
      info.name_offset = static_cast<uint32_t>(at);
      info.name_size = def.name_size;
      std::memcpy(names_ + at, text_ + def.name_begin, def.name_size);
      at += def.name_size;
      names_[at++] = '\0';
    };
    for (uint32_t r = 0; r < n; ++r) {
      if (rules[r].compiled != kNone) name(rules[r].compiled, rules[r]);
    }
    for (uint32_t i = 0; i < parser_.node_count(); ++i) {
      if (body_rule_[i] != kNone) name(body_rule_[i], rules[body_owner_[i]]);
    }
    states_ = region_.low<NfaState>(0);
    if (states_ == nullptr) return no_room(region_, "the automaton");
    for (uint32_t r = 0; r < n; ++r) {
      if (rules[r].compiled == kNone) continue;
      rule_ = rules[r].compiled;
      TERN_ASSIGN_OR_RETURN(const uint32_t final_state, state(NfaKind::Final, 0, 0, 0));
      TERN_ASSIGN_OR_RETURN(infos_[rule_].start, lower(rules[r].body, final_state));
    }
    for (uint32_t i = 0; i < parser_.node_count(); ++i) {
      if (body_rule_[i] == kNone || infos_[body_rule_[i]].loop_body) continue;  // a shared body is made once
      rule_ = body_rule_[i];
      infos_[rule_].loop_body = 1;
      TERN_ASSIGN_OR_RETURN(const uint32_t final_state, state(NfaKind::Final, 0, 0, 0));
      TERN_ASSIGN_OR_RETURN(infos_[rule_].start, lower(parser_.nodes()[i].child, final_state));
      // The caches' probes: r rounds left for r < kTierRounds, then rounds without end.
      infos_[rule_].probes = n_loops_;
      for (uint32_t r = 0; r <= kTierRounds; ++r) {
        const bool endless = r == kTierRounds;
        loops_[n_loops_++] = LoopInfo{rule_, 0, endless ? kUnboundedLoop : r + 1, endless ? 1 : r + 1, final_state, 0};
      }
    }
    return Error::Ok;
  }

  // The children of a list node into a temporary array (released by the caller's mark).
  Result<uint32_t*> children(uint32_t node, uint32_t* count) {
    AstNode* nodes = parser_.nodes();
    uint32_t n = 0;
    for (uint32_t c = nodes[node].child; c != kNone; c = nodes[c].sibling) ++n;
    uint32_t* out = region_.high<uint32_t>(n + 1);
    if (out == nullptr) return no_room(region_, "the automaton");
    n = 0;
    for (uint32_t c = nodes[node].child; c != kNone; c = nodes[c].sibling) out[n++] = c;
    *count = n;
    return out;
  }

  // States for `node` that continue at `next`; returns the first.
  Result<uint32_t> lower(uint32_t node, uint32_t next) {
    if (++work_ > kMaxWork) {
      return fail(Error::GrammarTooLarge,
                  "the grammar expands to more than %u automaton states (repetition counts "
                  "multiply)",
                  kMaxWork);
    }
    const AstNode n = parser_.nodes()[node];
    switch (n.kind) {
      case Ast::Alt:
      case Ast::Seq: {
        const size_t mark = region_.high_mark();
        uint32_t count = 0;
        TERN_ASSIGN_OR_RETURN(uint32_t * items, children(node, &count));
        uint32_t s = next;
        if (n.kind == Ast::Seq) {
          for (uint32_t i = count; i-- > 0;) {
            TERN_ASSIGN_OR_RETURN(s, lower(items[i], s));
          }
        } else {
          // Alternatives that are literals alone are folded into one trie (an enum of 10,000
          // values is at most one branch per next byte), the others are branches of their own.
          uint32_t n_literals = 0;
          for (uint32_t i = 0; i < count; ++i) n_literals += literal_of(items[i]) != kNone ? 1 : 0;
          const bool fold = n_literals >= kFoldLiterals;
          bool have = false;
          if (fold) {
            TERN_ASSIGN_OR_RETURN(s, lower_trie(items, count, next));
            have = true;
          }
          for (uint32_t i = count; i-- > 0;) {
            if (fold && literal_of(items[i]) != kNone) continue;
            TERN_ASSIGN_OR_RETURN(const uint32_t branch, lower(items[i], next));
            if (have) {
              TERN_ASSIGN_OR_RETURN(s, state(NfaKind::Split, 0, branch, s));
            } else {
              s = branch;
              have = true;
            }
          }
        }
        region_.high_release(mark);
        return s;
      }
      case Ast::Literal: {
        uint8_t bytes[4];
        uint32_t total = 0;
        for (size_t p = n.a; p < n.b;) {
          uint32_t cp;
          read_char(text_, n.b, &p, &cp);
          total += static_cast<uint32_t>(unicode::encode_utf8(cp, bytes));
        }
        if (total == 0) return next;
        // Forward: state i reads byte i and goes to i + 1, the last one to `next`.
        const uint32_t first = n_states_;
        uint32_t i = 0;
        for (size_t p = n.a; p < n.b;) {
          uint32_t cp;
          read_char(text_, n.b, &p, &cp);
          const size_t k = unicode::encode_utf8(cp, bytes);
          for (size_t j = 0; j < k; ++j, ++i) {
            TERN_ASSIGN_OR_RETURN(const uint32_t dfa, dfas_.byte(bytes[j]));
            TERN_RETURN_IF_ERROR(state(NfaKind::Terminal, dfa, i + 1 == total ? next : first + i + 1, 1).error());
          }
        }
        return first;
      }
      case Ast::Class:
      case Ast::Any: return state(NfaKind::Terminal, n.dfa, next, n.dfa_states);
      case Ast::Ref: {
        const RuleDef& callee = parser_.rules()[n.a];
        if (callee.inlined) return lower(callee.body, next);
        return state(NfaKind::Ref, callee.compiled, next, 0);
      }
      case Ast::Repeat: {
        if (body_rule_[node] != kNone) {
          if (n_loops_ == loop_capacity_) return fail(Error::Internal, "grammar: more loops than counted");
          const uint32_t cap = n.b == kUnbounded ? n.a : n.b;
          loops_[n_loops_] = LoopInfo{body_rule_[node], n.a, n.b == kUnbounded ? kUnboundedLoop : n.b, cap, next, 0};
          return state(NfaKind::Count, n_loops_++, next, 0);
        }
        uint32_t s = next;
        if (n.b == kUnbounded) {
          // loop: Split(item -> loop, next)
          TERN_ASSIGN_OR_RETURN(const uint32_t loop, state(NfaKind::Split, 0, next, next));
          TERN_ASSIGN_OR_RETURN(const uint32_t body, lower(n.child, loop));
          states_[loop].next = body;
          s = loop;
        } else {
          for (uint32_t i = n.a; i < n.b; ++i) {  // the optional copies: (item (item ...)?)?
            TERN_ASSIGN_OR_RETURN(const uint32_t body, lower(n.child, s));
            TERN_ASSIGN_OR_RETURN(s, state(NfaKind::Split, 0, body, next));
          }
        }
        for (uint32_t i = 0; i < n.a; ++i) {
          TERN_ASSIGN_OR_RETURN(s, lower(n.child, s));
        }
        return s;
      }
    }
    return fail(Error::Internal, "grammar: unknown syntax node");
  }

  // The Literal node an alternative (a Seq) consists of alone, or kNone.
  uint32_t literal_of(uint32_t seq) const {
    const AstNode* nodes = parser_.nodes();
    const uint32_t c = nodes[seq].child;
    if (nodes[seq].kind != Ast::Seq || c == kNone || nodes[c].sibling != kNone) return kNone;
    return nodes[c].kind == Ast::Literal ? c : kNone;
  }

  // The literal alternatives among items[0, count) as one trie (literal_trie.h) of walked
  // byte states that go on at `next`; returns its first state.
  Result<uint32_t> lower_trie(const uint32_t* items, uint32_t count, uint32_t next) {
    const AstNode* nodes = parser_.nodes();
    size_t total = 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t lit = literal_of(items[i]);
      if (lit == kNone) continue;
      ++n;
      total += 4 * static_cast<size_t>(nodes[lit].b - nodes[lit].a);
    }
    Literals set;
    set.bytes = region_.high<uint8_t>(total + 1);
    set.begin = region_.high<uint32_t>(n + 1);
    set.length = region_.high<uint32_t>(n + 1);
    if (set.bytes == nullptr || set.begin == nullptr || set.length == nullptr) {
      return no_room(region_, "an alternation of literals");
    }
    uint32_t at = 0;
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t lit = literal_of(items[i]);
      if (lit == kNone) continue;
      set.begin[set.count] = at;
      for (size_t p = nodes[lit].a; p < nodes[lit].b;) {
        uint32_t cp;
        read_char(text_, nodes[lit].b, &p, &cp);
        at += static_cast<uint32_t>(unicode::encode_utf8(cp, set.bytes + at));
      }
      set.length[set.count] = at - set.begin[set.count];
      ++set.count;
    }
    struct Builder : TrieStates {
      Compiler& c;
      explicit Builder(Compiler& compiler) : c(compiler) {}
      Result<uint32_t> byte(uint8_t b, uint32_t next) override {
        TERN_ASSIGN_OR_RETURN(const uint32_t dfa, c.dfas_.byte(b));
        TERN_ASSIGN_OR_RETURN(const uint32_t s, c.state(NfaKind::Terminal, dfa, next, 1));
        c.states_[s].walked = 1;
        return s;
      }
      Result<uint32_t> either(uint32_t first, uint32_t second) override {
        return c.state(NfaKind::Split, 0, first, second);
      }
      void go_on(uint32_t from, uint32_t to) override { c.states_[from].next = to; }
    } builder(*this);
    return build_literal_trie(set, next, region_, builder);
  }

  // ---- Analyses ----

  // Visits the Terminal, Ref and Final states reachable from `from` without reading a byte
  // (through Split states; with `through`, also past Ref states of nullable rules).
  template <typename F>
  void closure(uint32_t from, bool through, F visit) {
    if (++mark_ == 0) {
      for (uint32_t i = 0; i < n_states_; ++i) seen_[i] = 0;
      mark_ = 1;
    }
    uint32_t n = 0;
    stack_[n++] = from;
    seen_[from] = mark_;
    while (n > 0) {
      const NfaState& s = states_[stack_[--n]];
      auto push = [&](uint32_t x) {
        if (seen_[x] != mark_) seen_[x] = mark_, stack_[n++] = x;
      };
      if (s.kind == NfaKind::Split) {
        push(s.next);
        push(s.next2);
        continue;
      }
      visit(s);
      if (s.kind == NfaKind::Ref && through && infos_[s.arg].nullable) push(s.next);
      if (s.kind == NfaKind::Count && through && loops_[s.arg].min == 0) push(s.next);
    }
  }

  void first_bytes(const NfaState& s, uint32_t* set) {
    if (s.kind == NfaKind::Terminal) {
      const uint16_t* t = dfas_.tables() + static_cast<size_t>(s.arg) * 256;
      for (uint32_t b = 0; b < 256; ++b) {
        if (t[b] != kDfaReject) set_bit(set, b);
      }
    } else if (s.kind == NfaKind::Ref || s.kind == NfaKind::Count) {
      const uint32_t rule = callee(s);
      for (int w = 0; w < 8; ++w) set[w] |= first_[rule * 8 + w];
    }
  }

  // The rule a Ref or Count state calls.
  uint32_t callee(const NfaState& s) const { return s.kind == NfaKind::Count ? loops_[s.arg].body : s.arg; }

  Error analyse() {
    seen_ = region_.high<uint32_t>(n_states_);
    stack_ = region_.high<uint32_t>(2 * n_states_ + 2);
    first_ = region_.high<uint32_t>(static_cast<size_t>(n_compiled_) * 8);
    if (seen_ == nullptr || stack_ == nullptr || first_ == nullptr) return no_room(region_, "the grammar's analysis");
    for (uint32_t i = 0; i < n_states_; ++i) seen_[i] = 0;
    std::memset(first_, 0, static_cast<size_t>(n_compiled_) * 8 * sizeof(uint32_t));
    // Tail calls: nothing but the rule's end can follow the call.
    for (uint32_t i = 0; i < n_states_; ++i) {
      if (states_[i].kind != NfaKind::Ref) continue;
      bool only_final = true;
      closure(states_[i].next, false, [&](const NfaState& s) { only_final &= s.kind == NfaKind::Final; });
      states_[i].tail = only_final ? 1 : 0;
    }
    // Rules that can match nothing.
    for (bool changed = true; changed;) {
      changed = false;
      TERN_RETURN_IF_ERROR(check_abort("analysing the automaton"));
      for (uint32_t r = 0; r < n_compiled_; ++r) {
        if (infos_[r].nullable) continue;
        bool final_reached = false;
        closure(infos_[r].start, true, [&](const NfaState& s) { final_reached |= s.kind == NfaKind::Final; });
        if (final_reached) infos_[r].nullable = 1, changed = true;
      }
    }
    TERN_RETURN_IF_ERROR(check_left_recursion());
    // First bytes of each rule, then the bytes that can follow each rule.
    for (bool changed = true; changed;) {
      changed = false;
      TERN_RETURN_IF_ERROR(check_abort("analysing the automaton"));
      for (uint32_t r = 0; r < n_compiled_; ++r) {
        uint32_t set[8] = {};
        closure(infos_[r].start, true, [&](const NfaState& s) { first_bytes(s, set); });
        for (int w = 0; w < 8; ++w) {
          if ((first_[r * 8 + w] | set[w]) != first_[r * 8 + w]) first_[r * 8 + w] |= set[w], changed = true;
        }
      }
    }
    // A loop's body is followed by what follows the loop and, for the rules it calls, by
    // its own first bytes too (the next round).
    for (bool changed = true; changed;) {
      changed = false;
      TERN_RETURN_IF_ERROR(check_abort("analysing the automaton"));
      for (uint32_t i = 0; i < n_states_; ++i) {
        const NfaState& call = states_[i];
        if (call.kind != NfaKind::Ref && call.kind != NfaKind::Count) continue;
        uint32_t set[8] = {};
        bool reaches_end = false;
        closure(call.next, true, [&](const NfaState& s) {
          first_bytes(s, set);
          reaches_end |= s.kind == NfaKind::Final;
        });
        if (reaches_end) {
          const RuleInfo& caller = infos_[call.rule];
          for (int w = 0; w < 8; ++w) set[w] |= caller.follow[w] | (caller.loop_body ? first_[call.rule * 8 + w] : 0);
        }
        uint32_t* follow = infos_[callee(call)].follow;
        for (int w = 0; w < 8; ++w) {
          if ((follow[w] | set[w]) != follow[w]) follow[w] |= set[w], changed = true;
        }
      }
    }
    return Error::Ok;
  }

  // A rule that can reach itself before reading a byte would expand forever.
  Error check_left_recursion() {
    // color: 0 unvisited, 1 on the path, 2 done. Iterative DFS over "calls first" edges,
    // recomputed per rule from its closure (rules are few).
    uint32_t* color = region_.high<uint32_t>(n_compiled_ + 1);
    uint32_t* path = region_.high<uint32_t>(n_compiled_ + 1);
    uint32_t* edge = region_.high<uint32_t>(n_compiled_ + 1);
    uint32_t* callees = region_.high<uint32_t>(static_cast<size_t>(n_states_) + 1);
    uint32_t* offsets = region_.high<uint32_t>(n_compiled_ + 1);
    if (color == nullptr || path == nullptr || edge == nullptr || callees == nullptr || offsets == nullptr) {
      return no_room(region_, "the grammar's analysis");
    }
    uint32_t n_callees = 0;
    for (uint32_t r = 0; r < n_compiled_; ++r) {
      offsets[r] = n_callees;
      closure(infos_[r].start, true, [&](const NfaState& s) {
        if (s.kind == NfaKind::Ref || s.kind == NfaKind::Count) callees[n_callees++] = callee(s);
      });
      color[r] = 0;
    }
    offsets[n_compiled_] = n_callees;
    for (uint32_t r0 = 0; r0 < n_compiled_; ++r0) {
      if (color[r0] != 0) continue;
      uint32_t depth = 0;
      path[depth] = r0;
      edge[depth] = offsets[r0];
      color[r0] = 1;
      ++depth;
      while (depth > 0) {
        const uint32_t r = path[depth - 1];
        if (edge[depth - 1] == offsets[r + 1]) {
          color[r] = 2;
          --depth;
          continue;
        }
        const uint32_t c = callees[edge[depth - 1]++];
        if (color[c] == 1) {
          return fail(Error::InvalidGrammar,
                      "the rule '%s' is left-recursive: it can reach itself before reading a character (rewrite it "
                      "with a repetition, e.g. x ::= y (\",\" y)*)",
                      names_ + infos_[c].name_offset);
        }
        if (color[c] == 0) {
          color[c] = 1;
          path[depth] = c;
          edge[depth] = offsets[c];
          ++depth;
        }
      }
    }
    return Error::Ok;
  }

  Error make_positions() {
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_states_; ++i) {
      states_[i].pos = n;
      n += states_[i].kind == NfaKind::Terminal ? states_[i].next2 : 1;
    }
    Position* p = region_.low<Position>(n);
    if (p == nullptr) return no_room(region_, "positions");
    for (uint32_t i = 0; i < n_states_; ++i) {
      const NfaState& s = states_[i];
      if (s.kind == NfaKind::Terminal) {
        for (uint32_t k = 0; k < s.next2; ++k) p[s.pos + k] = Position{i, static_cast<uint16_t>(s.arg + k), 1};
      } else {
        p[s.pos] = Position{i, 0, 0};
      }
    }
    g_.states = states_;
    g_.n_states = n_states_;
    g_.positions = p;
    g_.n_positions = n;
    g_.dfa = dfas_.tables();
    g_.n_dfa = dfas_.count();
    g_.rules = infos_;
    g_.n_rules = n_compiled_;
    g_.root = parser_.rules()[root_].compiled;
    g_.names = names_;
    // Loops, with the virtual positions of their counts after the real ones.
    LoopInfo* loops = region_.low<LoopInfo>(n_loops_);
    if (loops == nullptr) return no_room(region_, "repetition counts");
    uint64_t base = 0;
    for (uint32_t l = 0; l < n_loops_; ++l) {
      loops[l] = loops_[l];
      loops[l].base = static_cast<uint32_t>(base);
      base += loops[l].cap;
    }
    if (n + base >= 0x7FFFFFFFu) {
      return fail(Error::GrammarTooLarge, "the grammar's repetition counts add up to more than 2^31");
    }
    g_.loops = loops;
    g_.n_loops = n_loops_;
    return Error::Ok;
  }

  static constexpr uint32_t kMaxWork = 1u << 22;
  static constexpr uint32_t kUnrollLimit = 4;   // repetitions up to this count are copied out
  static constexpr uint32_t kFoldLiterals = 4;  // alternations with this many literals become tries
  uint32_t* body_rule_ = nullptr;               // per syntax node: a counted repetition's body rule, or kNone
  uint32_t* body_owner_ = nullptr;              // per syntax node: the rule it is written in
  uint32_t n_bodies_ = 0;
  uint32_t loop_capacity_ = 0;
  LoopInfo* loops_ = nullptr;
  uint32_t n_loops_ = 0;
  const char* text_;
  Region& region_;
  Grammar::Program& g_;
  Parser parser_;
  DfaBuilder dfas_;
  const std::atomic<int>* abort_;
  uint32_t root_ = kNone;
  uint32_t n_compiled_ = 0;
  RuleInfo* infos_ = nullptr;
  char* names_ = nullptr;
  NfaState* states_ = nullptr;
  uint32_t n_states_ = 0;
  uint32_t rule_ = 0;
  uint32_t work_ = 0;
  uint32_t* seen_ = nullptr;
  uint32_t* stack_ = nullptr;
  uint32_t mark_ = 0;
  uint32_t* first_ = nullptr;
};

}  // namespace

Error Grammar::compile(const char* text, size_t size, const GrammarVocab& vocab, void* region, size_t bytes,
                       const std::atomic<int>* abort) {
  clear();
  TERN_CHECK_OR_RETURN(vocab.built(), Error::InvalidState,
                       "no vocabulary for grammars (the model reserved no grammar "
                       "memory: tern_model_params.grammar_bytes)");
  TERN_CHECK_OR_RETURN(text != nullptr || size == 0, Error::InvalidArgument, "null grammar text");
  TERN_CHECK_OR_RETURN(region != nullptr || bytes == 0, Error::InvalidArgument, "null grammar memory");
  for (size_t i = 0; i < size;) {
    const unicode::Decoded d = unicode::decode_utf8(reinterpret_cast<const uint8_t*>(text + i), size - i);
    if (!d.valid) {
      uint32_t line, column;
      line_column(text, i, &line, &column);
      return fail(Error::InvalidUtf8, "grammar line %u column %u: invalid UTF-8", line, column);
    }
    i += d.length;
  }
  Region r(region, bytes);
  Program* g = r.low<Program>(1);
  if (g == nullptr) return no_room(r, "its header");
  new (g) Program();
  char* source = r.low<char>(size + 1);
  if (source == nullptr) return no_room(r, "its text");
  if (size > 0) std::memcpy(source, text, size);
  source[size] = '\0';
  g->source = source;
  g->source_size = size;
  const size_t high0 = r.high_mark();
  {
    Compiler compiler(text, size, r, *g, abort);
    TERN_RETURN_IF_ERROR(compiler.run());
  }
  r.high_release(high0);
  uint32_t* mask = nullptr;
  TERN_RETURN_IF_ERROR(carve_working_memory(*g, vocab, r, &mask));
  program_ = g;
  vocab_ = &vocab;
  mask_ = mask;
  Error e = start_state();
  if (e != Error::Ok) {
    clear();
    return e;
  }
  size_t cache_bytes = 0;
  const size_t before_caches = r.used();
  e = build_caches(*g, vocab, r, &cache_bytes, abort);
  if (e != Error::Ok) {
    clear();
    if (e == Error::GrammarTooLarge && cache_bytes > 0) {
      const size_t need = before_caches + g->n_positions * sizeof(TokenCache) + cache_bytes +
                          (vocab.size() + 4 * static_cast<size_t>(vocab.sorted_size()) + 4) * sizeof(uint32_t) + 256;
      return fail(Error::GrammarTooLarge,
                  "the grammar needs about %zu bytes of grammar memory; the session has %zu "
                  "(reserve more: tern_model_params.grammar_bytes)",
                  need, bytes);
    }
    return e;
  }
  used_bytes_ = r.used();
  region_ = static_cast<const uint8_t*>(region);
  compiled_bytes_ = r.low_mark();
  restart();
  return Error::Ok;
}

}  // namespace tern
