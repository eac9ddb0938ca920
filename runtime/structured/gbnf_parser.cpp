// The GBNF parser: rules, alternatives, sequences, literals, character classes, groups and
// repetitions into the syntax tree, with a name table for the rules.
#include "runtime/structured/gbnf_parser.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>

#include "runtime/base/hash.h"
#include "runtime/text/unicode.h"

namespace tern::grammar_detail {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

uint32_t name_hash(const char* s, size_t n) { return static_cast<uint32_t>(fnv1a(s, n)); }

}  // namespace

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
    case '\\':
    case '"':
    case '\'':
    case '[':
    case ']':
    case '-':
    case '^':
    case '/': *cp = static_cast<uint8_t>(e); break;
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

Error Parser::run() {
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
  return rules_defined();
}

Error Parser::rules_defined() {
  for (uint32_t i = 0; i < n_rules_; ++i) {
    if (!rules_[i].defined) {
      return error(rules_[i].first_use, "the rule '%.*s' is used but never defined",
                   static_cast<int>(rules_[i].name_size), text_ + rules_[i].name_begin);
    }
  }
  if (find("root") == kNone)
    return fail(Error::InvalidGrammar, "the grammar has no 'root' rule (where the text starts)");
  return Error::Ok;
}

uint32_t Parser::find(const char* name) const {
  const size_t n = std::strlen(name);
  for (uint32_t slot = name_hash(name, n) & table_mask_; table_[slot] != 0; slot = (slot + 1) & table_mask_) {
    const RuleDef& r = rules_[table_[slot] - 1];
    if (r.name_size == n && std::memcmp(text_ + r.name_begin, name, n) == 0) return table_[slot] - 1;
  }
  return kNone;
}

Error Parser::error(size_t at, const char* fmt, ...) const {
  char what[320];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(what, sizeof what, fmt, args);
  va_end(args);
  uint32_t line, column;
  line_column(text_, at, &line, &column);
  return fail(Error::InvalidGrammar, "grammar line %u column %u: %s", line, column, what);
}

Result<uint32_t> Parser::lookup(size_t begin, size_t size) {
  uint32_t slot = name_hash(text_ + begin, size) & table_mask_;
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

Result<uint32_t> Parser::node(Ast kind) {
  if (n_nodes_ == node_capacity_) return no_room(region_, "the syntax tree");
  AstNode& n = nodes_[n_nodes_];
  n = AstNode{kind, 0, 0, kNone, kNone, 0, 0, 0};
  return n_nodes_++;
}

// White space, newlines and comments.
void Parser::skip_space() {
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
bool Parser::at_rule_start() const {
  size_t p = pos_;
  if (p >= size_ || !is_name_char(text_[p])) return false;
  while (p < size_ && is_name_char(text_[p])) ++p;
  while (p < size_ && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\r' || text_[p] == '\n')) ++p;
  return size_ - p >= 3 && std::memcmp(text_ + p, "::=", 3) == 0;
}

Result<uint32_t> Parser::alternates(bool nested) {
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

Result<uint32_t> Parser::sequence(bool nested) {
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

Result<uint32_t> Parser::item() {
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
Error Parser::repeat_counts(size_t at, uint32_t* min, uint32_t* max) {
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

// Recursive, as the two below: the depth is bounded by the parser's nesting limit.
bool same_tree(const AstNode* nodes, const char* text, uint32_t x, uint32_t y) {
  const AstNode& a = nodes[x];
  const AstNode& b = nodes[y];
  if (a.kind != b.kind || a.negated != b.negated) return false;
  switch (a.kind) {
    case Ast::Literal:
    case Ast::Class: return a.b - a.a == b.b - b.a && std::memcmp(text + a.a, text + b.a, a.b - a.a) == 0;
    case Ast::Any: return true;
    case Ast::Ref: return a.a == b.a;
    case Ast::Repeat: return a.a == b.a && a.b == b.b && same_tree(nodes, text, a.child, b.child);
    case Ast::Seq:
    case Ast::Alt: {
      uint32_t i = a.child, j = b.child;
      for (; i != kNone && j != kNone; i = nodes[i].sibling, j = nodes[j].sibling) {
        if (!same_tree(nodes, text, i, j)) return false;
      }
      return i == kNone && j == kNone;
    }
  }
  return false;
}

bool reads_something(const AstNode* nodes, uint32_t node) {
  const AstNode& n = nodes[node];
  switch (n.kind) {
    case Ast::Literal: return n.b > n.a;
    case Ast::Class:
    case Ast::Any: return true;
    case Ast::Ref: return false;
    case Ast::Repeat: return n.a > 0 && reads_something(nodes, n.child);
    case Ast::Seq:
      for (uint32_t c = n.child; c != kNone; c = nodes[c].sibling) {
        if (reads_something(nodes, c)) return true;
      }
      return false;
    case Ast::Alt:
      for (uint32_t c = n.child; c != kNone; c = nodes[c].sibling) {
        if (!reads_something(nodes, c)) return false;
      }
      return n.child != kNone;
  }
  return false;
}

}  // namespace tern::grammar_detail
