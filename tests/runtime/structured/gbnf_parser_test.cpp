// The GBNF parser alone: grammars parse into the syntax tree the GBNF definition gives them
// (rules, alternatives, groups, repetitions, classes, literals and their escapes, comments),
// and malformed ones fail with InvalidGrammar naming the line and column. The expected trees
// and positions are worked out by hand from the grammar text.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/structured/gbnf_parser.h"
#include "runtime/structured/region.h"

namespace tern::grammar_detail {
namespace {

// A code point as itself when it is a letter, digit or one of " _.,:;!?#", else as <U+XXXX>.
std::string cp_text(uint32_t cp) {
  const bool plain = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
                     (cp < 0x80 && std::string(" _.,:;!?#").find(static_cast<char>(cp)) != std::string::npos);
  if (plain) return std::string(1, static_cast<char>(cp));
  char buf[16];
  std::snprintf(buf, sizeof buf, "<U+%04X>", cp);
  return buf;
}

class Parsed {
 public:
  explicit Parsed(const std::string& text)
      : text_(text),
        memory_(1 << 20),
        region_(memory_.data(), memory_.size()),
        parser_(text_.data(), text_.size(), region_) {
    error_ = parser_.run();
  }

  Error error() const { return error_; }

  // The body of rule `name`: alternatives joined by " | ", items by spaces, a group as
  // (...), a repetition as rep<min,max>(item) (max "inf" when unbounded), an empty
  // sequence as ().
  std::string rule(const char* name) const {
    const uint32_t r = parser_.find(name);
    if (r == kNone) return "<no rule>";
    return alternatives(parser_.rules()[r].body);
  }

 private:
  std::string alternatives(uint32_t alt) const {
    std::string out;
    for (uint32_t c = parser_.nodes()[alt].child; c != kNone; c = parser_.nodes()[c].sibling) {
      if (!out.empty()) out += " | ";
      out += show(c);
    }
    return out;
  }

  std::string show(uint32_t id) const {
    const AstNode& n = parser_.nodes()[id];
    switch (n.kind) {
      case Ast::Alt: return "(" + alternatives(id) + ")";
      case Ast::Seq: {
        std::string out;
        for (uint32_t c = n.child; c != kNone; c = parser_.nodes()[c].sibling)
          out += (out.empty() ? "" : " ") + show(c);
        return out.empty() ? "()" : out;
      }
      case Ast::Literal: {
        std::string out = "\"";
        for (size_t p = n.a; p < n.b;) {
          uint32_t cp = 0;
          if (read_char(text_.data(), n.b, &p, &cp) != nullptr) return "<bad literal>";
          out += cp_text(cp);
        }
        return out + "\"";
      }
      case Ast::Class: {
        std::string out = n.negated ? "[^" : "[";
        for (size_t p = n.a; p < n.b;) {
          uint32_t lo = 0, hi = 0;
          if (read_char(text_.data(), n.b, &p, &lo) != nullptr) return "<bad class>";
          out += cp_text(lo);
          if (p + 1 < n.b && text_[p] == '-') {
            ++p;
            if (read_char(text_.data(), n.b, &p, &hi) != nullptr) return "<bad class>";
            out += "-" + cp_text(hi);
          }
        }
        return out + "]";
      }
      case Ast::Any: return ".";
      case Ast::Ref: {
        const RuleDef& r = parser_.rules()[n.a];
        return text_.substr(r.name_begin, r.name_size);
      }
      case Ast::Repeat:
        return "rep<" + std::to_string(n.a) + "," + (n.b == kUnbounded ? "inf" : std::to_string(n.b)) + ">(" +
               show(n.child) + ")";
    }
    return "<unknown node>";
  }

  std::string text_;
  std::vector<uint8_t> memory_;
  Region region_;
  Parser parser_;
  Error error_ = Error::Ok;
};

TEST(GbnfParser, RulesReferencesAndAlternatives) {
  Parsed p("root ::= \"a\" item-2_x | \"b\"\nitem-2_x ::= \"x\" | \"y\" | \"z\"\n");
  ASSERT_EQ(p.error(), Error::Ok) << last_error_message();
  EXPECT_EQ(p.rule("root"), "\"a\" item-2_x | \"b\"");
  EXPECT_EQ(p.rule("item-2_x"), "\"x\" | \"y\" | \"z\"");
}

TEST(GbnfParser, GroupsAndRepetitions) {
  Parsed p("root ::= (\"a\" | \"b\")* \"c\"+ \"d\"? \"e\"{2} \"f\"{2,} \"g\"{,3} \"h\"{1,4} (\"i\" \"j\") *");
  ASSERT_EQ(p.error(), Error::Ok) << last_error_message();
  EXPECT_EQ(p.rule("root"),
            "rep<0,inf>((\"a\" | \"b\")) rep<1,inf>(\"c\") rep<0,1>(\"d\") rep<2,2>(\"e\") rep<2,inf>(\"f\") "
            "rep<0,3>(\"g\") rep<1,4>(\"h\") rep<0,inf>((\"i\" \"j\"))");
}

TEST(GbnfParser, RepetitionCountsWithSpacesAndStackedOperators) {
  Parsed p("root ::= \"a\"{ 2 , 3 } \"b\"+? ((\"c\"))");
  ASSERT_EQ(p.error(), Error::Ok) << last_error_message();
  EXPECT_EQ(p.rule("root"), "rep<2,3>(\"a\") rep<0,1>(rep<1,inf>(\"b\")) ((\"c\"))");
}

TEST(GbnfParser, EmptyAlternativesAndAny) {
  Parsed p("root ::= \"a\" | | . .\n");
  ASSERT_EQ(p.error(), Error::Ok) << last_error_message();
  EXPECT_EQ(p.rule("root"), "\"a\" | () | . .");
}

TEST(GbnfParser, CharacterClasses) {
  Parsed p("root ::= [a-z0-9_] [^\\n\\]] [\\x41-\\x43] [-a] [a-] [\\^] [é-ë] [\\u4e00-\\u9fff] [^\\U0001F600]");
  ASSERT_EQ(p.error(), Error::Ok) << last_error_message();
  EXPECT_EQ(p.rule("root"),
            "[a-z0-9_] [^<U+000A><U+005D>] [A-C] [<U+002D>a] [a<U+002D>] [<U+005E>] [<U+00E9>-<U+00EB>] "
            "[<U+4E00>-<U+9FFF>] [^<U+1F600>]");
}

TEST(GbnfParser, LiteralsAndTheirEscapes) {
  Parsed p("root ::= \"ab c\" \"\\x41\\u00e9\\U0001F600\" \"\\t\\n\\r\\\\\\\"\\'\\/\\[\\]\\-\\^\" \"é東\" \"\"");
  ASSERT_EQ(p.error(), Error::Ok) << last_error_message();
  EXPECT_EQ(p.rule("root"),
            "\"ab c\" \"A<U+00E9><U+1F600>\" "
            "\"<U+0009><U+000A><U+000D><U+005C><U+0022><U+0027><U+002F><U+005B><U+005D><U+002D><U+005E>\" "
            "\"<U+00E9><U+6771>\" \"\"");
}

TEST(GbnfParser, CommentsAndRulesOverSeveralLines) {
  Parsed p("# a comment before\nroot ::= \"a\" # after an item\n  | \"b\"\n    next\n\n# between\nnext ::=\n  \"c\"\n");
  ASSERT_EQ(p.error(), Error::Ok) << last_error_message();
  EXPECT_EQ(p.rule("root"), "\"a\" | \"b\" next");
  EXPECT_EQ(p.rule("next"), "\"c\"");
}

// The message is "grammar line L column C: <what>", C counted in code points.
void expect_invalid(const std::string& text, const std::string& where, const std::string& what) {
  Parsed p(text);
  EXPECT_EQ(p.error(), Error::InvalidGrammar) << text;
  const std::string message = last_error_message();
  EXPECT_EQ(message.rfind("grammar " + where + ": ", 0), 0u) << text << "\n" << message;
  EXPECT_NE(message.find(what), std::string::npos) << text << "\n" << message;
}

TEST(GbnfParser, UndefinedRules) {
  expect_invalid("root ::= \"a\" undefined-rule", "line 1 column 14", "'undefined-rule' is used but never defined");
  expect_invalid("root ::= a\na ::= b", "line 2 column 7", "'b' is used but never defined");
  // Columns count code points: "é" is one.
  expect_invalid("root ::= \"é\" x", "line 1 column 14", "'x' is used but never defined");
}

TEST(GbnfParser, UnterminatedLiteralsClassesAndGroups) {
  expect_invalid("root ::= \"abc", "line 1 column 10", "a literal without its closing '\"'");
  expect_invalid("root ::= \"a\"\nx ::= [abc", "line 2 column 7", "a character class without its closing ']'");
  expect_invalid("root ::= (\"a\"", "line 1 column 10", "'(' without its ')'");
  expect_invalid("root ::= \"a\")", "line 1 column 13", "')' without '('");
}

TEST(GbnfParser, BadEscapes) {
  expect_invalid("root ::= \"\\q\"", "line 1 column 11", "an unknown escape");
  expect_invalid("root ::= [\\q]", "line 1 column 11", "an unknown escape");
  expect_invalid("root ::= \"\\x4\"", "line 1 column 11", "too few hex digits");
  expect_invalid("root ::= \"\\U00110000\"", "line 1 column 11", "outside Unicode");
  expect_invalid("root ::= \"\\uD800\"", "line 1 column 11", "outside Unicode (or a surrogate)");
}

TEST(GbnfParser, BadRepetitionBounds) {
  expect_invalid("root ::= \"a\"{3,1}", "line 1 column 13", "maximum is below its minimum");
  expect_invalid("root ::= \"a\"{70000}", "line 1 column 13", "a repetition count above 65535");
  expect_invalid("root ::= \"a\"{}", "line 1 column 13", "expected a count");
  expect_invalid("root ::= \"a\"{2", "line 1 column 13", "expected '}'");
  expect_invalid("root ::= \"a\"{x}", "line 1 column 13", "expected a count");
}

TEST(GbnfParser, OtherMistakes) {
  expect_invalid("root ::= [z-a]", "line 1 column 11", "a character range whose end comes before its start");
  expect_invalid("root = \"a\"", "line 1 column 6", "expected '::=' after the rule name 'root'");
  expect_invalid("root ::= \"a\"\nroot ::= \"b\"", "line 2 column 1", "the rule 'root' is defined twice");
  expect_invalid("root ::= \"a\" !", "line 1 column 14", "unexpected character '!'");
  expect_invalid("root ::= <tok>", "line 1 column 10", "token references");
  expect_invalid("", "line 1 column 1", "the grammar is empty");
  expect_invalid("  # only a comment\n", "line 2 column 1", "the grammar is empty");
  expect_invalid("root ::= " + std::string(129, '(') + "\"a\"" + std::string(129, ')'), "line 1 column 138",
                 "nested deeper than 128 levels");
}

TEST(GbnfParser, MissingRoot) {
  // Not at a place in the text: the message says what is missing.
  Parsed p("a ::= \"x\"\nb ::= a");
  EXPECT_EQ(p.error(), Error::InvalidGrammar);
  EXPECT_NE(std::string(last_error_message()).find("no 'root' rule"), std::string::npos) << last_error_message();
}

}  // namespace
}  // namespace tern::grammar_detail
