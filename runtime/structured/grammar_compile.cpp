// GBNF -> syntax tree -> per-rule NFAs over byte DFAs -> analyses -> token caches, all in
// the caller's region: the compiled grammar grows from its start, temporaries from its end.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

#include "runtime/base/hash.h"
#include "runtime/structured/grammar.h"
#include "runtime/structured/grammar_program.h"
#include "runtime/text/unicode.h"

namespace tern {

using namespace grammar_detail;

namespace {

// ---- The region: compiled data from the bottom up, temporaries from the top down ----

class Region {
 public:
  Region(void* base, size_t size) : base_(static_cast<uint8_t*>(base)), size_(size), hi_(size) {}
  template <typename T>
  T* low(size_t count) {
    const size_t start = align_up(lo_, alignof(T));
    if (count > (hi_ - (start < hi_ ? start : hi_)) / sizeof(T) || start > hi_) return nullptr;
    lo_ = start + count * sizeof(T);
    return reinterpret_cast<T*>(base_ + start);
  }
  template <typename T>
  T* high(size_t count) {
    if (count > hi_ / sizeof(T)) return nullptr;
    const size_t start = (hi_ - count * sizeof(T)) & ~static_cast<size_t>(63);
    if (start < lo_) return nullptr;
    hi_ = start;
    return reinterpret_cast<T*>(base_ + start);
  }
  size_t low_mark() const { return lo_; }
  void low_release(size_t mark) { lo_ = mark; }
  size_t high_mark() const { return hi_; }
  void high_release(size_t mark) { hi_ = mark; }
  size_t used() const { return lo_ + (size_ - hi_); }
  size_t size() const { return size_; }

 private:
  uint8_t* base_;
  size_t size_;
  size_t lo_ = 0;
  size_t hi_;
};

Error no_room(const Region& r, const char* what) {
  return fail(Error::GrammarTooLarge, "the grammar does not fit in its %zu bytes of memory (%s); reserve more "
              "(tern_model_params.grammar_bytes)", r.size(), what);
}

// ---- The syntax tree ----

enum class Ast : uint8_t { Alt, Seq, Literal, Class, Any, Ref, Repeat };
inline constexpr uint32_t kNone = UINT32_MAX;
inline constexpr uint32_t kUnbounded = UINT32_MAX;
inline constexpr uint32_t kMaxRepeat = 65535;
inline constexpr int kMaxNesting = 128;

struct AstNode {
  Ast kind;
  uint8_t negated;
  uint16_t dfa_states;  // Class/Any: how many states its DFA has
  uint32_t child;    // Alt: first Seq; Seq: first item; Repeat: the item
  uint32_t sibling;  // next in the parent's list
  uint32_t a, b;     // Literal/Class: the content's text span; Ref: rule; Repeat: min, max
  uint32_t dfa;      // Class/Any: the DFA's first state
};

struct RuleDef {
  uint32_t name_begin, name_size;
  uint32_t body = kNone;     // an Alt node
  uint32_t defined_at = 0;   // text offsets, for messages
  uint32_t first_use = kNone;
  uint32_t compiled = kNone;  // its index among the compiled rules
  uint32_t ast_size = 0;
  bool defined = false;
  bool has_ref = false;
  bool reachable = false;
  bool inlined = false;
};

void line_column(const char* text, size_t at, uint32_t* line, uint32_t* column) {
  *line = 1;
  *column = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++*line;
      *column = 1;
    } else if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) {
      ++*column;
    }
  }
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// One character of a literal or class at text[*i] (< end): an escape or a UTF-8 sequence.
// Null on success, else why not.
const char* read_char(const char* text, size_t end, size_t* i, uint32_t* cp) {
  const uint8_t c = static_cast<uint8_t>(text[*i]);
  if (c != '\\') {
    const unicode::Decoded d = unicode::decode_utf8(reinterpret_cast<const uint8_t*>(text + *i), end - *i);
    if (!d.valid) return "invalid UTF-8";
    *cp = d.cp;
    *i += d.length;
    return nullptr;
  }
  if (*i + 1 >= end) return "an escape at the end";
  const char e = text[*i + 1];
  int digits = 0;
  switch (e) {
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    case 'n': *cp = '\n'; break;
    case 'r': *cp = '\r'; break;
    case 't': *cp = '\t'; break;
    case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
      *cp = static_cast<uint8_t>(e);
      break;
    default: return "an unknown escape (\\x \\u \\U \\n \\r \\t \\\\ \\\" \\' \\[ \\] \\- \\^ \\/)";
  }
  if (digits == 0) {
    *i += 2;
    return nullptr;
  }
  if (*i + 2 + digits > end) return "too few hex digits in an escape";
  uint32_t v = 0;
  for (int k = 0; k < digits; ++k) {
    const int h = hex_digit(text[*i + 2 + k]);
    if (h < 0) return "too few hex digits in an escape";
    v = v * 16 + static_cast<uint32_t>(h);
  }
  if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return "an escape outside Unicode (or a surrogate)";
  *cp = v;
  *i += 2 + digits;
  return nullptr;
}

class Parser {
 public:
  Parser(const char* text, size_t size, Region& region) : text_(text), size_(size), region_(region) {}

  Error run() {
    node_capacity_ = static_cast<uint32_t>(size_ + 16);
    rule_capacity_ = static_cast<uint32_t>(size_ / 2 + 4);
    table_mask_ = 1;
    while (table_mask_ < rule_capacity_ * 2) table_mask_ <<= 1;
    nodes_ = region_.high<AstNode>(node_capacity_);
    rules_ = region_.high<RuleDef>(rule_capacity_);
    table_ = region_.high<uint32_t>(table_mask_);
    if (nodes_ == nullptr || rules_ == nullptr || table_ == nullptr) return no_room(region_, "the syntax tree");
    std::memset(table_, 0, table_mask_ * sizeof(uint32_t));
    --table_mask_;
    skip_space();
    if (pos_ >= size_) return error(pos_, "the grammar is empty (it needs a 'root' rule)");
    while (pos_ < size_) {
      const size_t at = pos_;
      if (!is_name_char(text_[pos_])) return error(pos_, "expected a rule name");
      const size_t name_begin = pos_;
      while (pos_ < size_ && is_name_char(text_[pos_])) ++pos_;
      const size_t name_end = pos_;
      skip_space();
      if (size_ - pos_ < 3 || std::memcmp(text_ + pos_, "::=", 3) != 0) {
        return error(pos_, "expected '::=' after the rule name '%.*s'", static_cast<int>(name_end - name_begin),
                     text_ + name_begin);
      }
      pos_ += 3;
      skip_space();
      TERN_ASSIGN_OR_RETURN(const uint32_t body, alternates(false));
      if (pos_ < size_ && text_[pos_] == ')') return error(pos_, "')' without '('");
      TERN_ASSIGN_OR_RETURN(const uint32_t rule, lookup(name_begin, name_end - name_begin));
      RuleDef& r = rules_[rule];
      if (r.defined) {
        return error(at, "the rule '%.*s' is defined twice", static_cast<int>(r.name_size), text_ + r.name_begin);
      }
      r.defined = true;
      r.body = body;
      r.defined_at = static_cast<uint32_t>(at);
      skip_space();
    }
    return Error::Ok;
  }

  AstNode* nodes() const { return nodes_; }
  uint32_t node_count() const { return n_nodes_; }
  RuleDef* rules() const { return rules_; }
  uint32_t rule_count() const { return n_rules_; }
  // The rule named `name`, or kNone.
  uint32_t find(const char* name) const {
    const size_t n = std::strlen(name);
    for (uint32_t slot = hash(name, n) & table_mask_; table_[slot] != 0; slot = (slot + 1) & table_mask_) {
      const RuleDef& r = rules_[table_[slot] - 1];
      if (r.name_size == n && std::memcmp(text_ + r.name_begin, name, n) == 0) return table_[slot] - 1;
    }
    return kNone;
  }

  Error error(size_t at, const char* fmt, ...) const __attribute__((format(printf, 3, 4))) {
    char what[320];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(what, sizeof what, fmt, args);
    va_end(args);
    uint32_t line, column;
    line_column(text_, at, &line, &column);
    return fail(Error::InvalidGrammar, "grammar line %u column %u: %s", line, column, what);
  }

 private:
  static uint32_t hash(const char* s, size_t n) { return static_cast<uint32_t>(fnv1a(s, n)); }

  Result<uint32_t> lookup(size_t begin, size_t size) {
    uint32_t slot = hash(text_ + begin, size) & table_mask_;
    for (; table_[slot] != 0; slot = (slot + 1) & table_mask_) {
      const RuleDef& r = rules_[table_[slot] - 1];
      if (r.name_size == size && std::memcmp(text_ + r.name_begin, text_ + begin, size) == 0) return table_[slot] - 1;
    }
    if (n_rules_ == rule_capacity_) return no_room(region_, "rule names");
    RuleDef& r = rules_[n_rules_];
    new (&r) RuleDef();
    r.name_begin = static_cast<uint32_t>(begin);
    r.name_size = static_cast<uint32_t>(size);
    table_[slot] = ++n_rules_;
    return n_rules_ - 1;
  }

  Result<uint32_t> node(Ast kind) {
    if (n_nodes_ == node_capacity_) return no_room(region_, "the syntax tree");
    AstNode& n = nodes_[n_nodes_];
    n = AstNode{kind, 0, 0, kNone, kNone, 0, 0, 0};
    return n_nodes_++;
  }

  // White space, newlines and comments.
  void skip_space() {
    while (pos_ < size_) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < size_ && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  // At `name ::=`: the next rule starts (a rule body may span lines).
  bool at_rule_start() const {
    size_t p = pos_;
    if (p >= size_ || !is_name_char(text_[p])) return false;
    while (p < size_ && is_name_char(text_[p])) ++p;
    while (p < size_ && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\r' || text_[p] == '\n')) ++p;
    return size_ - p >= 3 && std::memcmp(text_ + p, "::=", 3) == 0;
  }

  Result<uint32_t> alternates(bool nested) {
    TERN_ASSIGN_OR_RETURN(const uint32_t alt, node(Ast::Alt));
    TERN_ASSIGN_OR_RETURN(uint32_t last, sequence(nested));
    nodes_[alt].child = last;
    while (pos_ < size_ && text_[pos_] == '|') {
      ++pos_;
      TERN_ASSIGN_OR_RETURN(const uint32_t seq, sequence(nested));
      nodes_[last].sibling = seq;
      last = seq;
    }
    return alt;
  }

  Result<uint32_t> sequence(bool nested) {
    TERN_ASSIGN_OR_RETURN(const uint32_t seq, node(Ast::Seq));
    uint32_t last = kNone;
    for (;;) {
      skip_space();
      if (pos_ >= size_) break;
      const char c = text_[pos_];
      if (c == '|' || c == ')') break;
      if (!nested && at_rule_start()) break;
      TERN_ASSIGN_OR_RETURN(const uint32_t item, this->item());
      if (last == kNone) {
        nodes_[seq].child = item;
      } else {
        nodes_[last].sibling = item;
      }
      last = item;
    }
    return seq;
  }

  Result<uint32_t> item() {
    const size_t at = pos_;
    const char c = text_[pos_];
    uint32_t id = kNone;
    if (c == '"') {
      TERN_ASSIGN_OR_RETURN(id, node(Ast::Literal));
      ++pos_;
      nodes_[id].a = static_cast<uint32_t>(pos_);
      while (pos_ < size_ && text_[pos_] != '"') {
        uint32_t cp;
        if (const char* why = read_char(text_, size_, &pos_, &cp)) return error(pos_, "%s in a literal", why);
      }
      if (pos_ >= size_) return error(at, "a literal without its closing '\"'");
      nodes_[id].b = static_cast<uint32_t>(pos_++);
    } else if (c == '[') {
      TERN_ASSIGN_OR_RETURN(id, node(Ast::Class));
      ++pos_;
      if (pos_ < size_ && text_[pos_] == '^') nodes_[id].negated = 1, ++pos_;
      nodes_[id].a = static_cast<uint32_t>(pos_);
      while (pos_ < size_ && text_[pos_] != ']') {
        uint32_t lo, hi;
        const size_t item_at = pos_;
        if (const char* why = read_char(text_, size_, &pos_, &lo)) return error(pos_, "%s in a character class", why);
        if (pos_ + 1 < size_ && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
          ++pos_;
          if (const char* why = read_char(text_, size_, &pos_, &hi)) return error(pos_, "%s in a character class", why);
          if (hi < lo) return error(item_at, "a character range whose end comes before its start");
        }
      }
      if (pos_ >= size_) return error(at, "a character class without its closing ']'");
      nodes_[id].b = static_cast<uint32_t>(pos_++);
    } else if (c == '.') {
      TERN_ASSIGN_OR_RETURN(id, node(Ast::Any));
      ++pos_;
    } else if (c == '(') {
      if (++depth_ > kMaxNesting) return error(at, "nested deeper than %d levels", kMaxNesting);
      ++pos_;
      skip_space();
      TERN_ASSIGN_OR_RETURN(id, alternates(true));
      if (pos_ >= size_ || text_[pos_] != ')') return error(at, "'(' without its ')'");
      ++pos_;
      --depth_;
    } else if (is_name_char(c)) {
      const size_t begin = pos_;
      while (pos_ < size_ && is_name_char(text_[pos_])) ++pos_;
      TERN_ASSIGN_OR_RETURN(const uint32_t rule, lookup(begin, pos_ - begin));
      if (rules_[rule].first_use == kNone) rules_[rule].first_use = static_cast<uint32_t>(begin);
      TERN_ASSIGN_OR_RETURN(id, node(Ast::Ref));
      nodes_[id].a = rule;
    } else if (c == '<') {
      return error(at, "token references (<...>) are not supported; write the token's text as a literal");
    } else {
      return error(at, "unexpected character '%c'", c);
    }
    // Postfix operators (white space before them is allowed, as llama.cpp does).
    int wrapped = 0;
    for (;;) {
      size_t p = pos_;
      while (p < size_ && (text_[p] == ' ' || text_[p] == '\t')) ++p;
      if (p >= size_) break;
      const char op = text_[p];
      uint32_t min = 0, max = kUnbounded;
      if (op == '*') {
        pos_ = p + 1;
      } else if (op == '+') {
        min = 1;
        pos_ = p + 1;
      } else if (op == '?') {
        max = 1;
        pos_ = p + 1;
      } else if (op == '{') {
        pos_ = p + 1;
        TERN_RETURN_IF_ERROR(repeat_counts(p, &min, &max));
      } else {
        break;
      }
      if (depth_ + ++wrapped > kMaxNesting) return error(p, "nested deeper than %d levels", kMaxNesting);
      TERN_ASSIGN_OR_RETURN(const uint32_t rep, node(Ast::Repeat));
      nodes_[rep].child = id;
      nodes_[rep].a = min;
      nodes_[rep].b = max;
      id = rep;
    }
    return id;
  }

  // {m}, {m,}, {m,n}, {,n} (pos_ after the '{').
  Error repeat_counts(size_t at, uint32_t* min, uint32_t* max) {
    auto number = [&](uint32_t* out) -> bool {
      while (pos_ < size_ && text_[pos_] == ' ') ++pos_;
      if (pos_ >= size_ || text_[pos_] < '0' || text_[pos_] > '9') return false;
      uint64_t v = 0;
      while (pos_ < size_ && text_[pos_] >= '0' && text_[pos_] <= '9') {
        v = v * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
        if (v > kMaxRepeat) v = kMaxRepeat + 1;
      }
      while (pos_ < size_ && text_[pos_] == ' ') ++pos_;
      *out = static_cast<uint32_t>(v);
      return true;
    };
    const bool has_min = number(min);
    if (!has_min) *min = 0;
    if (pos_ < size_ && text_[pos_] == ',') {
      ++pos_;
      if (!number(max)) *max = kUnbounded;
    } else {
      if (!has_min) return error(at, "expected a count in '{...}'");
      *max = *min;
    }
    if (pos_ >= size_ || text_[pos_] != '}') return error(at, "expected '}' to end the repetition count");
    ++pos_;
    if (*min > kMaxRepeat || (*max != kUnbounded && *max > kMaxRepeat)) {
      return error(at, "a repetition count above %u", kMaxRepeat);
    }
    if (*max < *min) return error(at, "a repetition whose maximum is below its minimum");
    return Error::Ok;
  }

  const char* text_;
  size_t size_;
  Region& region_;
  size_t pos_ = 0;
  int depth_ = 0;
  AstNode* nodes_ = nullptr;
  uint32_t n_nodes_ = 0, node_capacity_ = 0;
  RuleDef* rules_ = nullptr;
  uint32_t n_rules_ = 0, rule_capacity_ = 0;
  uint32_t* table_ = nullptr;
  uint32_t table_mask_ = 0;
};

// ---- Byte DFAs for characters ----

struct CpRange {
  uint32_t lo, hi;
};

class DfaBuilder {
 public:
  explicit DfaBuilder(Region& region) : region_(region) {}

  Error init() {
    if ((tables_ = region_.low<uint16_t>(0)) == nullptr) return no_room(region_, "character tables");
    built_ = region_.high<uint32_t>(2 * kMaxDfas);
    if (built_ == nullptr) return no_room(region_, "character tables");
    for (uint32_t& b : byte_dfa_) b = kNone;
    return Error::Ok;
  }
  const uint16_t* tables() const { return tables_; }
  uint32_t count() const { return n_; }

  // The DFA matching one byte.
  Result<uint32_t> byte(uint8_t b) {
    if (byte_dfa_[b] != kNone) return byte_dfa_[b];
    TERN_ASSIGN_OR_RETURN(const uint32_t s, new_state());
    table(s)[b] = kDfaAccept;
    byte_dfa_[b] = s;
    return s;
  }

  // The DFA matching one character of the sorted, disjoint, merged ranges (no surrogates).
  // Returns its first state; *states: how many it has.
  Result<uint32_t> chars(const CpRange* ranges, uint32_t n, uint32_t* states) {
    ranges_ = ranges;
    n_ranges_ = n;
    const size_t mark = region_.low_mark();
    const uint32_t first = n_;
    TERN_ASSIGN_OR_RETURN(const uint32_t start, new_state());
    for (uint32_t b = 0; b < 0x80; ++b) table(start)[b] = contains(b) ? kDfaAccept : kDfaReject;
    for (uint32_t b = 0xC2; b <= 0xDF; ++b) {
      TERN_ASSIGN_OR_RETURN(table(start)[b], last_byte(first, (b & 0x1F) << 6));
    }
    for (uint32_t b = 0xE0; b <= 0xEF; ++b) {
      const uint32_t lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
      uint16_t row[64];
      for (uint32_t c = 0; c < 64; ++c) row[c] = kDfaReject;
      for (uint32_t c = lo; c <= hi; ++c) {
        TERN_ASSIGN_OR_RETURN(row[c - 0x80], last_byte(first, ((b & 0x0F) << 12) | ((c & 0x3F) << 6)));
      }
      TERN_ASSIGN_OR_RETURN(table(start)[b], middle(first, row));
    }
    for (uint32_t b = 0xF0; b <= 0xF4; ++b) {
      const uint32_t lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
      uint16_t row2[64];
      for (uint32_t c = 0; c < 64; ++c) row2[c] = kDfaReject;
      for (uint32_t c1 = lo; c1 <= hi; ++c1) {
        const uint32_t base1 = ((b & 0x07) << 18) | ((c1 & 0x3F) << 12);
        if (!any_in(base1, base1 + 0xFFF)) continue;
        uint16_t row3[64];
        for (uint32_t c2 = 0x80; c2 <= 0xBF; ++c2) {
          TERN_ASSIGN_OR_RETURN(row3[c2 - 0x80], last_byte(first, base1 | ((c2 & 0x3F) << 6)));
        }
        TERN_ASSIGN_OR_RETURN(row2[c1 - 0x80], middle(first, row3));
      }
      TERN_ASSIGN_OR_RETURN(table(start)[b], middle(first, row2));
    }
    *states = n_ - first;
    // The same table built before (a class written twice): use that one.
    for (uint32_t k = 0; k < n_built_; ++k) {
      const uint32_t other = built_[2 * k], count = built_[2 * k + 1];
      if (count == *states && same_dfa(other, first, count)) {
        n_ = first;
        region_.low_release(mark);
        return other;
      }
    }
    if (n_built_ < kMaxDfas) {
      built_[2 * n_built_] = first;
      built_[2 * n_built_ + 1] = *states;
      ++n_built_;
    }
    return first;
  }

 private:
  static constexpr uint32_t kMaxDfas = 1024;

  uint16_t* table(uint32_t s) { return tables_ + static_cast<size_t>(s) * 256; }

  Result<uint32_t> new_state() {
    if (n_ >= kMaxDfaStates) return fail(Error::GrammarTooLarge, "the grammar's characters need more than %u DFA states", kMaxDfaStates);
    if (region_.low<uint16_t>(256) == nullptr) return no_room(region_, "character tables");
    uint16_t* t = table(n_);
    for (int i = 0; i < 256; ++i) t[i] = kDfaReject;
    return n_++;
  }

  bool contains(uint32_t cp) const { return any_in(cp, cp); }
  bool any_in(uint32_t a, uint32_t b) const {
    uint32_t lo = 0, hi = n_ranges_;
    while (lo < hi) {
      const uint32_t mid = (lo + hi) / 2;
      if (ranges_[mid].hi < a) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo < n_ranges_ && ranges_[lo].lo <= b;
  }

  // The state for a sequence's last byte over code points [base, base + 64); reject if none.
  Result<uint16_t> last_byte(uint32_t first, uint32_t base) {
    if (!any_in(base, base + 63)) return kDfaReject;
    uint16_t row[64];
    for (uint32_t c = 0; c < 64; ++c) row[c] = contains(base + c) ? kDfaAccept : kDfaReject;
    return middle(first, row);
  }

  // A state whose continuation bytes 0x80..0xBF go to row[]; reject if all do, and the
  // existing state of this DFA with the same row if there is one.
  Result<uint16_t> middle(uint32_t first, const uint16_t* row) {
    bool any = false;
    for (uint32_t c = 0; c < 64 && !any; ++c) any = row[c] != kDfaReject;
    if (!any) return kDfaReject;
    for (uint32_t s = first + 1; s < n_; ++s) {
      if (std::memcmp(table(s) + 0x80, row, 64 * sizeof(uint16_t)) == 0) return static_cast<uint16_t>(s);
    }
    TERN_ASSIGN_OR_RETURN(const uint32_t s, new_state());
    std::memcpy(table(s) + 0x80, row, 64 * sizeof(uint16_t));
    return static_cast<uint16_t>(s);
  }

  bool same_dfa(uint32_t a, uint32_t b, uint32_t count) {
    for (uint32_t s = 0; s < count; ++s) {
      const uint16_t* x = table(a + s);
      const uint16_t* y = table(b + s);
      for (int i = 0; i < 256; ++i) {
        const bool xs = x[i] < kMaxDfaStates, ys = y[i] < kMaxDfaStates;
        if (xs != ys || (xs ? x[i] - a != y[i] - b : x[i] != y[i])) return false;
      }
    }
    return true;
  }

  Region& region_;
  uint16_t* tables_ = nullptr;
  uint32_t n_ = 0;
  uint32_t byte_dfa_[256];
  uint32_t* built_ = nullptr;
  uint32_t n_built_ = 0;
  const CpRange* ranges_ = nullptr;
  uint32_t n_ranges_ = 0;
};

// ---- The compiler ----

class Compiler {
 public:
  Compiler(const char* text, size_t size, Region& region, Grammar::Program& g)
      : text_(text), region_(region), g_(g), parser_(text, size, region), dfas_(region) {}

  Error run() {
    TERN_RETURN_IF_ERROR(parser_.run());
    TERN_RETURN_IF_ERROR(resolve());
    TERN_RETURN_IF_ERROR(build_dfas());
    TERN_RETURN_IF_ERROR(lower_rules());
    TERN_RETURN_IF_ERROR(analyse());
    return make_positions();
  }

 private:
  Error resolve() {
    RuleDef* rules = parser_.rules();
    const uint32_t n = parser_.rule_count();
    for (uint32_t i = 0; i < n; ++i) {
      if (!rules[i].defined) {
        return parser_.error(rules[i].first_use, "the rule '%.*s' is used but never defined",
                             static_cast<int>(rules[i].name_size), text_ + rules[i].name_begin);
      }
    }
    root_ = parser_.find("root");
    if (root_ == kNone) return fail(Error::InvalidGrammar, "the grammar has no 'root' rule (where the text starts)");
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
    return Error::Ok;
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

  Error build_dfas() {
    TERN_RETURN_IF_ERROR(dfas_.init());
    AstNode* nodes = parser_.nodes();
    for (uint32_t i = 0; i < parser_.node_count(); ++i) {
      AstNode& n = nodes[i];
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
      count = normalize(ranges, count, n.negated != 0);
      uint32_t states = 0;
      TERN_ASSIGN_OR_RETURN(n.dfa, dfas_.chars(ranges, count, &states));
      n.dfa_states = static_cast<uint16_t>(states);
      region_.high_release(mark);
    }
    return Error::Ok;
  }

  // Sorts and merges ranges, complements them when negated, removes the surrogates. `r`
  // has room for n + 2 ranges.
  static uint32_t normalize(CpRange* r, uint32_t n, bool negated) {
    for (uint32_t i = 1; i < n; ++i) {  // insertion sort: classes are short
      const CpRange x = r[i];
      uint32_t j = i;
      while (j > 0 && r[j - 1].lo > x.lo) r[j] = r[j - 1], --j;
      r[j] = x;
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
        if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
      } else {
        r[m++] = r[i];
      }
    }
    if (negated) {  // the gaps, in place: gap k is written after range k was read
      uint32_t k = 0, next = 0;
      for (uint32_t i = 0; i < m; ++i) {
        const CpRange x = r[i];
        if (x.lo > next) r[k++] = CpRange{next, x.lo - 1};
        next = x.hi + 1;
      }
      if (next <= 0x10FFFF) r[k++] = CpRange{next, 0x10FFFF};
      m = k;
    }
    // U+D800..U+DFFF cannot be encoded in UTF-8.
    for (uint32_t i = 0; i < m; ++i) {
      const CpRange x = r[i];
      if (x.hi < 0xD800 || x.lo > 0xDFFF) continue;
      const bool left = x.lo < 0xD800, right = x.hi > 0xDFFF;
      if (left && right) {
        std::memmove(r + i + 2, r + i + 1, (m - i - 1) * sizeof(CpRange));
        r[i] = CpRange{x.lo, 0xD7FF};
        r[i + 1] = CpRange{0xE000, x.hi};
        ++m;
        ++i;
      } else if (left) {
        r[i].hi = 0xD7FF;
      } else if (right) {
        r[i].lo = 0xE000;
      } else {
        std::memmove(r + i, r + i + 1, (m - i - 1) * sizeof(CpRange));
        --m;
        --i;
      }
    }
    return m;
  }

  // ---- NFA ----

  Result<uint32_t> state(NfaKind kind, uint32_t arg, uint32_t next, uint32_t next2) {
    if (++work_ > kMaxWork) {
      return fail(Error::GrammarTooLarge, "the grammar expands to more than %u automaton states (repetition counts "
                  "multiply)", kMaxWork);
    }
    if (region_.low<NfaState>(1) == nullptr) return no_room(region_, "the automaton");
    NfaState& s = states_[n_states_];
    s = NfaState{kind, 0, 0, arg, next, next2, rule_, 0};
    return n_states_++;
  }

  Error lower_rules() {
    RuleDef* rules = parser_.rules();
    const uint32_t n = parser_.rule_count();
    // Rule records and names (low), then the states.
    infos_ = region_.low<RuleInfo>(n_compiled_);
    size_t name_bytes = 0;
    for (uint32_t r = 0; r < n; ++r) name_bytes += rules[r].compiled != kNone ? rules[r].name_size + 1 : 0;
    names_ = region_.low<char>(name_bytes + 1);
    if (infos_ == nullptr || names_ == nullptr) return no_room(region_, "rule names");
    size_t at = 0;
    for (uint32_t r = 0; r < n; ++r) {
      if (rules[r].compiled == kNone) continue;
      RuleInfo& info = infos_[rules[r].compiled];
      std::memset(&info, 0, sizeof info);
      info.name_offset = static_cast<uint32_t>(at);
      info.name_size = rules[r].name_size;
      std::memcpy(names_ + at, text_ + rules[r].name_begin, rules[r].name_size);
      at += rules[r].name_size;
      names_[at++] = '\0';
    }
    states_ = region_.low<NfaState>(0);
    if (states_ == nullptr) return no_room(region_, "the automaton");
    for (uint32_t r = 0; r < n; ++r) {
      if (rules[r].compiled == kNone) continue;
      rule_ = rules[r].compiled;
      TERN_ASSIGN_OR_RETURN(const uint32_t final_state, state(NfaKind::Final, 0, 0, 0));
      TERN_ASSIGN_OR_RETURN(infos_[rule_].start, lower(rules[r].body, final_state));
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
      return fail(Error::GrammarTooLarge, "the grammar expands to more than %u automaton states (repetition counts "
                  "multiply)", kMaxWork);
    }
    const AstNode n = parser_.nodes()[node];
    switch (n.kind) {
      case Ast::Alt:
      case Ast::Seq: {
        const size_t mark = region_.high_mark();
        uint32_t count = 0;
        TERN_ASSIGN_OR_RETURN(uint32_t* items, children(node, &count));
        uint32_t s = next;
        if (n.kind == Ast::Seq) {
          for (uint32_t i = count; i-- > 0;) {
            TERN_ASSIGN_OR_RETURN(s, lower(items[i], s));
          }
        } else {
          TERN_ASSIGN_OR_RETURN(s, lower(items[count - 1], next));
          for (uint32_t i = count - 1; i-- > 0;) {
            TERN_ASSIGN_OR_RETURN(const uint32_t branch, lower(items[i], next));
            TERN_ASSIGN_OR_RETURN(s, state(NfaKind::Split, 0, branch, s));
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
      case Ast::Any:
        return state(NfaKind::Terminal, n.dfa, next, n.dfa_states);
      case Ast::Ref: {
        const RuleDef& callee = parser_.rules()[n.a];
        if (callee.inlined) return lower(callee.body, next);
        return state(NfaKind::Ref, callee.compiled, next, 0);
      }
      case Ast::Repeat: {
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
    }
  }

  void first_bytes(const NfaState& s, uint32_t* set) {
    if (s.kind == NfaKind::Terminal) {
      const uint16_t* t = dfas_.tables() + static_cast<size_t>(s.arg) * 256;
      for (uint32_t b = 0; b < 256; ++b) {
        if (t[b] != kDfaReject) set_bit(set, b);
      }
    } else if (s.kind == NfaKind::Ref) {
      for (int w = 0; w < 8; ++w) set[w] |= first_[s.arg * 8 + w];
    }
  }

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
      for (uint32_t r = 0; r < n_compiled_; ++r) {
        uint32_t set[8] = {};
        closure(infos_[r].start, true, [&](const NfaState& s) { first_bytes(s, set); });
        for (int w = 0; w < 8; ++w) {
          if ((first_[r * 8 + w] | set[w]) != first_[r * 8 + w]) first_[r * 8 + w] |= set[w], changed = true;
        }
      }
    }
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t i = 0; i < n_states_; ++i) {
        const NfaState& call = states_[i];
        if (call.kind != NfaKind::Ref) continue;
        uint32_t set[8] = {};
        bool reaches_end = false;
        closure(call.next, true, [&](const NfaState& s) {
          first_bytes(s, set);
          reaches_end |= s.kind == NfaKind::Final;
        });
        if (reaches_end) {
          for (int w = 0; w < 8; ++w) set[w] |= infos_[call.rule].follow[w];
        }
        uint32_t* follow = infos_[call.arg].follow;
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
        if (s.kind == NfaKind::Ref) callees[n_callees++] = s.arg;
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
    return Error::Ok;
  }

  static constexpr uint32_t kMaxWork = 1u << 22;
  const char* text_;
  Region& region_;
  Grammar::Program& g_;
  Parser parser_;
  DfaBuilder dfas_;
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

// ---- Token caches ----

// For every terminal position: the tokens its rule accepts whole from there, and the ranges
// of tokens that leave the rule with bytes that may follow it (uncertain). Written into the
// region's low end; `needed` gets the bytes they take (also when they do not fit).
Error build_caches(Grammar::Program& g, const GrammarVocab& v, Region& region, size_t* needed) {
  TokenCache* caches = region.low<TokenCache>(g.n_positions);
  if (caches == nullptr) return no_room(region, "token caches");
  for (uint32_t p = 0; p < g.n_positions; ++p) caches[p] = TokenCache{};
  g.caches = caches;
  const size_t temp_mark = region.high_mark();
  uint32_t* accepted = region.high<uint32_t>(v.size());
  uint32_t* ranges = region.high<uint32_t>(2 * static_cast<size_t>(v.sorted_size()) + 2);
  if (accepted == nullptr || ranges == nullptr) return no_room(region, "the token walk");
  uint32_t* data = region.low<uint32_t>(0);
  size_t data_size = 0;
  bool fits = data != nullptr;
  Walker walker;
  for (uint32_t p = 0; p < g.n_positions; ++p) {
    const Position& at = g.positions[p];
    if (!at.terminal) continue;
    const uint32_t* follow = g.rules[g.states[at.state].rule].follow;
    truncate(g, 2);
    new_step(g);
    const uint32_t leaf = intern(g, p, kMarkerNode);
    if (leaf == UINT32_MAX) return fail(Error::GrammarTooLarge, "no room for parse stacks");
    TERN_RETURN_IF_ERROR(walker.start(g, &leaf, 1, false));
    uint32_t n_accepted = 0, n_ranges = 0;
    auto uncertain = [&](uint32_t begin, uint32_t end) {
      if (n_ranges > 0 && ranges[2 * n_ranges - 1] == begin) {
        ranges[2 * n_ranges - 1] = end;
      } else {
        ranges[2 * n_ranges] = begin;
        ranges[2 * n_ranges + 1] = end;
        ++n_ranges;
      }
    };
    const uint16_t* first_row = g.dfa + static_cast<size_t>(at.dfa) * 256;
    for (uint32_t b = 0; b < 256; ++b) {
      if (first_row[b] == kDfaReject) continue;  // no token starting with b
      const uint32_t end = v.first_rank(b + 1);
      uint32_t depth_made = 0;
      for (uint32_t r = v.first_rank(b); r < end;) {
        const uint8_t* bytes = v.rank_bytes(r);
        const uint32_t n = v.rank_length(r);
        const uint32_t shared = r == v.first_rank(b) ? 0 : std::min(v.lcp(r), depth_made);
        auto reached = walker.descend(bytes, n, shared, follow);
        if (!reached.ok()) {
          walker.finish();
          return reached.error();
        }
        const uint32_t depth = *reached;
        depth_made = depth;
        const WalkLevel& level = walker.level(depth);
        if (depth == n) {
          if (level.count > 0 || level.can_end || level.accepting) {
            accepted[n_accepted++] = r;
          } else if (level.uncertain_before) {
            uncertain(r, r + 1);
          }
          ++r;
          continue;
        }
        // Every token with the same first `depth` bytes (and the next one, when the rule
        // can end just before it) ends the same way.
        const bool maybe = level.uncertain_before || (level.can_end && bit_set(follow, bytes[depth]));
        const uint32_t stop = std::min(end, v.subtree_end(r, level.can_end ? depth + 1 : depth));
        if (maybe) uncertain(r, stop);
        r = stop;
      }
    }
    walker.finish();
    TokenCache& c = caches[p];
    // Accepted ranks are ascending: count their runs for the range encoding. Large sets are
    // bitsets (one OR per word at run time), the rest whichever of ids and runs is smaller.
    uint32_t runs = 0;
    for (uint32_t k = 0; k < n_accepted; ++k) runs += k == 0 || accepted[k] != accepted[k - 1] + 1 ? 1 : 0;
    if (static_cast<uint64_t>(n_accepted) * 8 > v.size()) {
      c.encoding = Accepted::Bitset;
    } else {
      c.encoding = 2 * runs < n_accepted ? Accepted::RankRanges : Accepted::Ids;
    }
    const size_t accepted_words = c.encoding == Accepted::Bitset ? g.mask_words
                                  : c.encoding == Accepted::Ids  ? n_accepted
                                                                 : 2 * static_cast<size_t>(runs);
    const size_t words = accepted_words + 2 * static_cast<size_t>(n_ranges);
    if (fits && region.low<uint32_t>(words) == nullptr) fits = false;
    if (fits) {
      uint32_t* out = data + data_size;
      if (c.encoding == Accepted::Bitset) {
        std::memset(out, 0, g.mask_words * sizeof(uint32_t));
        for (uint32_t k = 0; k < n_accepted; ++k) set_bit(out, v.sorted(accepted[k]));
      } else if (c.encoding == Accepted::Ids) {
        for (uint32_t k = 0; k < n_accepted; ++k) out[k] = v.sorted(accepted[k]);
      } else {
        uint32_t m = 0;
        for (uint32_t k = 0; k < n_accepted; ++k) {
          if (k == 0 || accepted[k] != accepted[k - 1] + 1) {
            out[2 * m] = accepted[k];
            ++m;
          }
          out[2 * m - 1] = accepted[k] + 1;
        }
      }
      std::memcpy(out + accepted_words, ranges, 2 * n_ranges * sizeof(uint32_t));
    }
    c.accepted = static_cast<uint32_t>(data_size);
    c.accepted_count = c.encoding == Accepted::RankRanges ? runs : n_accepted;
    c.uncertain = static_cast<uint32_t>(data_size + accepted_words);
    c.uncertain_count = n_ranges;
    data_size += words;
  }
  truncate(g, 2);
  g.cache_data = data;
  region.high_release(temp_mark);
  *needed = data_size * sizeof(uint32_t);
  if (!fits) return fail(Error::GrammarTooLarge, "token caches");
  return Error::Ok;
}

}  // namespace

Error Grammar::compile(const char* text, size_t size, const GrammarVocab& vocab, void* region, size_t bytes) {
  clear();
  TERN_CHECK_OR_RETURN(vocab.built(), Error::InvalidState, "no vocabulary for grammars (the model reserved no grammar "
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
  const size_t high0 = r.high_mark();
  {
    Compiler compiler(text, size, r, *g);
    TERN_RETURN_IF_ERROR(compiler.run());
  }
  r.high_release(high0);
  // Working memory, kept at the high end.
  constexpr uint32_t kNodes = 32768, kVisits = 16384, kWorklist = 8192, kWalk = 32768, kMaxLeaves = 1024;
  {
    // What must fit besides the caches: the working memory, and the walk's temporaries.
    const size_t states = 4 + kMaxDraftSlots;
    const size_t working = kNodes * sizeof(Node) + 2 * kNodes * sizeof(uint32_t) + kVisits * sizeof(Visit) +
                           2 * kWorklist * sizeof(uint32_t) +
                           kWalk * sizeof(uint32_t) + (vocab.max_length() + 2) * sizeof(WalkLevel) +
                           (vocab.size() + 31) / 32 * sizeof(uint32_t) + states * kMaxLeaves * sizeof(uint32_t) +
                           (7 + states) * 64;
    const size_t walk = g->n_positions * sizeof(TokenCache) +
                        (vocab.size() + 2 * static_cast<size_t>(vocab.sorted_size()) + 2) * sizeof(uint32_t) + 192;
    if (r.used() + working + walk > r.size()) {
      return fail(Error::GrammarTooLarge, "the grammar needs at least %zu bytes of grammar memory, and its token "
                  "caches more; the session has %zu (reserve more: tern_model_params.grammar_bytes)",
                  r.used() + working + walk, r.size());
    }
  }
  g->node_capacity = kNodes;
  g->nodes = r.high<Node>(kNodes);
  g->table = r.high<uint32_t>(2 * kNodes);
  g->table_mask = 2 * kNodes - 1;
  g->visits = r.high<Visit>(kVisits);
  g->visit_mask = kVisits - 1;
  g->worklist = r.high<uint32_t>(2 * kWorklist);
  g->worklist_capacity = kWorklist;
  g->walk = r.high<uint32_t>(kWalk);
  g->walk_capacity = kWalk;
  g->levels = r.high<WalkLevel>(vocab.max_length() + 2);
  g->max_leaves = kMaxLeaves;
  g->mask_words = (vocab.size() + 31) / 32;
  uint32_t* mask = r.high<uint32_t>(g->mask_words);
  State* states[] = {&current_, &scratch_[0], &scratch_[1], &staged_};
  bool ok = g->nodes != nullptr && g->table != nullptr && g->visits != nullptr && g->worklist != nullptr &&
            g->walk != nullptr && g->levels != nullptr && mask != nullptr;
  for (State* s : states) {
    *s = State{};
    s->leaves = r.high<uint32_t>(kMaxLeaves);
    s->capacity = kMaxLeaves;
    ok &= s->leaves != nullptr;
  }
  for (State& s : drafts_) {
    s = State{};
    s.leaves = r.high<uint32_t>(kMaxLeaves);
    s.capacity = kMaxLeaves;
    ok &= s.leaves != nullptr;
  }
  if (!ok) return no_room(r, "parse stacks");
  std::memset(g->table, 0, 2 * static_cast<size_t>(kNodes) * sizeof(uint32_t));
  std::memset(g->visits, 0, kVisits * sizeof(Visit));
  g->nodes[kRootNode] = Node{kNoPos, kRootNode, 0, 0};
  g->nodes[kMarkerNode] = Node{kNoPos, kMarkerNode, 0, 0};
  g->node_top = 2;
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
  e = build_caches(*g, vocab, r, &cache_bytes);
  if (e != Error::Ok) {
    clear();
    if (e == Error::GrammarTooLarge && cache_bytes > 0) {
      const size_t need = before_caches + g->n_positions * sizeof(TokenCache) + cache_bytes +
                         (vocab.size() + 2 * static_cast<size_t>(vocab.sorted_size()) + 2) * sizeof(uint32_t) + 256;
      return fail(Error::GrammarTooLarge, "the grammar needs about %zu bytes of grammar memory; the session has %zu "
                  "(reserve more: tern_model_params.grammar_bytes)", need, bytes);
    }
    return e;
  }
  used_bytes_ = r.used();
  restart();
  return Error::Ok;
}

}  // namespace tern
