// The GBNF parser: grammar text -> the syntax tree and its rules, each rule defined once and a
// 'root' among them; InvalidGrammar errors name the line and column.
#pragma once

#include <cstddef>
#include <cstdint>

#include "platform/error.h"
#include "runtime/structured/region.h"

namespace tern::grammar_detail {

enum class Ast : uint8_t { Alt, Seq, Literal, Class, Any, Ref, Repeat };
inline constexpr uint32_t kNone = UINT32_MAX;
inline constexpr uint32_t kUnbounded = UINT32_MAX;
inline constexpr uint32_t kMaxRepeat = 65535;
inline constexpr int kMaxNesting = 128;

// A node of the syntax tree (dfa_states and dfa are the compiler's).
struct AstNode {
  Ast kind;
  uint8_t negated;
  uint16_t dfa_states;  // Class/Any: how many states its DFA has
  uint32_t child;       // Alt: first Seq; Seq: first item; Repeat: the item
  uint32_t sibling;     // next in the parent's list
  uint32_t a, b;        // Literal/Class: the content's text span; Ref: rule; Repeat: min, max
  uint32_t dfa;         // Class/Any: the DFA's first state
};

// A rule: its name (a span of the text) and body; `compiled`, `ast_size` and the flags but
// `defined` are the compiler's.
struct RuleDef {
  uint32_t name_begin, name_size;
  uint32_t body = kNone;    // an Alt node
  uint32_t defined_at = 0;  // text offsets, for messages
  uint32_t first_use = kNone;
  uint32_t compiled = kNone;  // its index among the compiled rules
  uint32_t ast_size = 0;
  bool defined = false;
  bool has_ref = false;
  bool reachable = false;
  bool inlined = false;
};

// The line and column (1-based, in code points) of text[at].
void line_column(const char* text, size_t at, uint32_t* line, uint32_t* column);

// One character of a literal or class at text[*i] (< end): an escape or a UTF-8 sequence.
// Null on success, else why not.
const char* read_char(const char* text, size_t end, size_t* i, uint32_t* cp);

// Whether the trees at x and y are written alike (the same text, references to the same
// rules).
bool same_tree(const AstNode* nodes, const char* text, uint32_t x, uint32_t y);
// Whether the tree at `node` reads at least a byte wherever it matches (conservative: a
// reference counts as possibly empty).
bool reads_something(const AstNode* nodes, uint32_t node);

// Parses into the region's high end: the nodes and rules stay there until the caller
// releases them.
class Parser {
 public:
  Parser(const char* text, size_t size, Region& region) : text_(text), size_(size), region_(region) {}

  // The whole text; then every rule used is defined and there is a 'root'.
  Error run();

  AstNode* nodes() const { return nodes_; }
  uint32_t node_count() const { return n_nodes_; }
  RuleDef* rules() const { return rules_; }
  uint32_t rule_count() const { return n_rules_; }
  // The rule named `name`, or kNone.
  uint32_t find(const char* name) const;
  // InvalidGrammar with `fmt` after the line and column of text[at].
  Error error(size_t at, const char* fmt, ...) const __attribute__((format(printf, 3, 4)));

 private:
  Error rules_defined();
  Result<uint32_t> lookup(size_t begin, size_t size);
  Result<uint32_t> node(Ast kind);
  void skip_space();
  bool at_rule_start() const;
  Result<uint32_t> alternates(bool nested);
  Result<uint32_t> sequence(bool nested);
  Result<uint32_t> item();
  Error repeat_counts(size_t at, uint32_t* min, uint32_t* max);

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

}  // namespace tern::grammar_detail
