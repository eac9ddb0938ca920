// The official JSON-Schema-Test-Suite (drafts 2020-12 and 7, tests/data/json-schema-test-suite)
// against the converter: every schema is converted (tern's JSON Schema -> GBNF) or refused, every
// grammar compiled over the byte vocabulary, and every instance checked, compact and
// pretty-printed, by the automaton; the compact one also through the token masks, which must
// agree. The rule (issue 37): a schema is refused naming a keyword, or no invalid instance is
// accepted. Valid instances the grammar's one spelling rejects are counted per keyword, and each
// keyword with any has its reason below (kWhyIncomplete).
//
// TERN_SUITE_TABLE=FILE writes the counts as the Markdown of docs/structured-output.md's
// "Conformance" section; TERN_SUITE_VERBOSE=1 prints each refusal and rejected valid instance.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "platform/error.h"
#include "tests/support/byte_vocab.h"
#include "tests/support/json_suite.h"

namespace tern {
namespace {

using testing::suite::Group;
using testing::suite::Node;

// Why a keyword's valid instances may be rejected: the grammar writes each value one way.
#define TERN_IMPLIED(KIND, WHAT)                              \
  "without `type`, " WHAT " makes the value " KIND            \
  ": other kinds, which JSON Schema lets through unchecked, " \
  "are rejected"
const std::map<std::string, std::string> kWhyIncomplete = {
    {"const",
     "the constant is written as the schema spells it: `-2.0` rejects `-2`, `0` rejects `0.0`, and an "
     "object's keys come in the schema's order"},
    {"enum", "each value is written as the schema spells it: `0` rejects `0.0`, `[1]` rejects `[1.0]`"},
    {"type", "`integer` is written without a fraction or exponent: `1.0` is rejected"},
    {"format",
     TERN_IMPLIED("a string", "`format`") "; and draft 2020-12 reads `format` as an annotation, so strings "
                                          "that are not dates (`\"06/19/1963\"`) are valid there but not written"},
    {"minimum", TERN_IMPLIED("a number", "a bound")},
    {"maximum", TERN_IMPLIED("a number", "a bound")},
    {"exclusiveMaximum", TERN_IMPLIED("a number", "a bound")},
    {"minLength", TERN_IMPLIED("a string", "a length")},
    {"maxLength", TERN_IMPLIED("a string", "a length")},
    {"items", TERN_IMPLIED("an array", "`items`")},
    {"minItems", TERN_IMPLIED("an array", "a count")},
    {"maxItems", TERN_IMPLIED("an array", "a count")},
    {"properties", TERN_IMPLIED("an object", "`properties`")},
    {"required", TERN_IMPLIED("an object", "`required`")},
    {"ref", TERN_IMPLIED("an object", "`properties` (in the schema `#` points at)")},
};
#undef TERN_IMPLIED

struct Counts {
  int groups = 0, converted = 0, refused = 0, unsound = 0, incomplete = 0;
  int valid = 0, invalid = 0;
  int valid_rejected = 0, pretty_rejected = 0, invalid_accepted = 0;
};

// The keywords a schema uses: every object key in it (names of properties too, which only
// widens what a refusal may name).
void collect_keys(const Node& n, std::set<std::string>* keys) {
  for (const auto& m : n.members) {
    if (n.kind == Node::Kind::Object) keys->insert(m.first);
    collect_keys(m.second, keys);
  }
}

// A refusal names a keyword of the schema in quotes, or the false schema it reached.
bool names_a_keyword(const std::string& message, const Node& schema) {
  std::set<std::string> keys;
  collect_keys(schema, &keys);
  for (const std::string& k : keys) {
    if (message.find("'" + k + "'") != std::string::npos) return true;
  }
  return message.find("the schema false") != std::string::npos;
}

class JsonSchemaSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    vocab_ = new testing::ByteVocab();
    ASSERT_EQ(vocab_->build(), Error::Ok) << last_error_message();
  }
  static void TearDownTestSuite() { delete vocab_; }
  static testing::ByteVocab* vocab_;
};

testing::ByteVocab* JsonSchemaSuite::vocab_ = nullptr;

std::string table(const std::map<std::string, Counts>& drafts, const std::map<std::string, Counts>& keywords) {
  std::string out = "| draft | groups | converted | refused | unsound | incomplete | instances checked |\n";
  out += "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& [draft, c] : drafts) {
    char row[256];
    std::snprintf(row, sizeof row, "| %s | %d | %d | %d | %d | %d | %d |\n", draft.c_str(), c.groups, c.converted,
                  c.refused, c.unsound, c.incomplete, c.valid + c.invalid);
    out += row;
  }
  out += "\n| keyword | groups converted | valid instances rejected (compact / pretty) | why |\n";
  out += "| --- | ---: | ---: | --- |\n";
  for (const auto& [keyword, c] : keywords) {
    if (c.converted == 0) continue;
    const auto why = kWhyIncomplete.find(keyword);
    const bool any = c.valid_rejected + c.pretty_rejected > 0;
    char row[256];
    std::snprintf(row, sizeof row, "| `%s` | %d of %d | %d / %d of %d | ", keyword.c_str(), c.converted, c.groups,
                  c.valid_rejected, c.pretty_rejected, c.valid);
    out += row;
    out += any && why != kWhyIncomplete.end() ? why->second : any ? "(unexplained)" : "";
    out += " |\n";
  }
  return out;
}

TEST_F(JsonSchemaSuite, NoInvalidInstanceAcceptedAndRefusalsNameAKeyword) {
  const bool verbose = std::getenv("TERN_SUITE_VERBOSE") != nullptr;
  std::map<std::string, Counts> drafts, keywords;
  testing::suite::SchemaGrammar g;
  for (const char* draft : testing::suite::kDrafts) {
    const std::vector<Group> groups = testing::suite::read_draft(draft);
    EXPECT_GT(groups.size(), 200u) << draft;
    Counts& d = drafts[draft];
    for (const Group& group : groups) {
      Counts& k = keywords[group.keyword];
      const std::string where = std::string(draft) + "/" + group.keyword + ".json: " + group.description;
      const std::string schema = testing::suite::compact(group.schema);
      ++d.groups, ++k.groups;
      const Error e = g.build(schema, vocab_->vocab());
      if (!g.converted()) {
        ++d.refused, ++k.refused;
        EXPECT_EQ(e, Error::UnsupportedSchema) << where << "\n" << schema << "\n" << g.message();
        EXPECT_TRUE(names_a_keyword(g.message(), group.schema)) << where << "\n" << schema << "\n" << g.message();
        if (verbose) std::printf("refused %s\n  %s\n", where.c_str(), g.message().c_str());
        continue;
      }
      ASSERT_EQ(e, Error::Ok) << where << "\n" << schema << "\n" << g.message() << "\n" << g.text();
      ++d.converted, ++k.converted;
      bool unsound = false, incomplete = false;
      for (const auto& t : group.tests) {
        const std::string compact = testing::suite::compact(t.data), pretty = testing::suite::pretty(t.data);
        const bool accepted = g.accepts(compact), pretty_accepted = g.accepts(pretty);
        bool disagree = false;
        const bool mask_accepted = g.mask_accepts(compact, &disagree);
        EXPECT_FALSE(disagree) << where << ": " << t.description << "\n" << compact << "\n" << g.text();
        EXPECT_EQ(mask_accepted, accepted) << where << ": " << t.description << "\n" << compact << "\n" << g.text();
        if (t.valid) {
          ++d.valid, ++k.valid;
          d.valid_rejected += !accepted, k.valid_rejected += !accepted;
          d.pretty_rejected += !pretty_accepted, k.pretty_rejected += !pretty_accepted;
          incomplete |= !accepted || !pretty_accepted;
          if (verbose && (!accepted || !pretty_accepted))
            std::printf("rejects valid (%s) %s: %s\n  %s\n", accepted ? "pretty" : "compact", where.c_str(),
                        t.description.c_str(), compact.c_str());
        } else {
          ++d.invalid, ++k.invalid;
          const int wrong = accepted || pretty_accepted;
          d.invalid_accepted += wrong, k.invalid_accepted += wrong;
          unsound |= wrong != 0;
          EXPECT_FALSE(accepted) << "invalid instance accepted: " << where << ": " << t.description << "\n"
                                 << schema << "\n"
                                 << compact << "\n"
                                 << g.text();
          EXPECT_FALSE(pretty_accepted) << "invalid instance accepted (pretty): " << where << ": " << t.description
                                        << "\n"
                                        << pretty << "\n"
                                        << g.text();
        }
      }
      d.unsound += unsound, k.unsound += unsound;
      d.incomplete += incomplete, k.incomplete += incomplete;
    }
  }
  const std::string markdown = table(drafts, keywords);
  std::printf("%s", markdown.c_str());
  if (const char* path = std::getenv("TERN_SUITE_TABLE")) std::ofstream(path) << markdown;
  for (const auto& [draft, c] : drafts) {
    ::testing::Test::RecordProperty(draft + "_converted", c.converted);
    ::testing::Test::RecordProperty(draft + "_refused", c.refused);
    ::testing::Test::RecordProperty(draft + "_unsound", c.unsound);
    ::testing::Test::RecordProperty(draft + "_incomplete", c.incomplete);
    EXPECT_EQ(c.invalid_accepted, 0) << draft;
  }
  // Every keyword whose valid instances the grammar may reject says why.
  for (const auto& [keyword, c] : keywords) {
    if (c.valid_rejected + c.pretty_rejected > 0) {
      EXPECT_TRUE(kWhyIncomplete.count(keyword)) << "'" << keyword << "' rejects valid instances; say why";
    }
  }
}

}  // namespace
}  // namespace tern
