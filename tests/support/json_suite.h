// The JSON-Schema-Test-Suite (tests/data/json-schema-test-suite) for the structured-output
// tests: its groups (a schema and instances, each valid or not), JSON texts spelled compact
// (nlohmann's dump()) or pretty-printed (dump(2)) with every number as written (a double would
// turn 9007199254740993 into ...992), and a schema's grammar over the byte vocabulary.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "platform/error.h"
#include "runtime/structured/grammar.h"
#include "tests/support/byte_vocab.h"
#include "tests/support/schema_convert.h"
#include "tests/support/test_util.h"

namespace tern::testing::suite {

// A JSON value; numbers keep their text.
struct Node {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  std::string text;                                   // a number as written, a string's value, true/false
  std::vector<std::pair<std::string, Node>> members;  // objects (key, value) and arrays ("", item), in order
};

namespace detail {

class TreeBuilder : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit TreeBuilder(Node* root) : root_(root) {}
  bool null() override { return put(Node::Kind::Null, ""); }
  bool boolean(bool v) override { return put(Node::Kind::Bool, v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return put(Node::Kind::Number, std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(Node::Kind::Number, std::to_string(v)); }
  bool number_float(number_float_t, const string_t& s) override { return put(Node::Kind::Number, s); }
  bool string(string_t& v) override { return put(Node::Kind::String, v); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(Node::Kind::Object); }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Node::Kind::Array); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  Node* place() {
    if (stack_.empty()) return root_;
    Node* parent = stack_.back();
    parent->members.emplace_back(parent->kind == Node::Kind::Object ? key_ : std::string(), Node{});
    return &parent->members.back().second;
  }
  bool put(Node::Kind kind, std::string text) {
    Node* n = place();
    n->kind = kind;
    n->text = std::move(text);
    return true;
  }
  bool open(Node::Kind kind) {
    Node* n = place();
    n->kind = kind;
    stack_.push_back(n);
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  Node* root_;
  std::vector<Node*> stack_;  // members are appended only to the top, so pointers below stay valid
  std::string key_;
};

inline void write(const Node& n, int indent, int depth, std::string* out) {
  switch (n.kind) {
    case Node::Kind::String: *out += nlohmann::json(n.text).dump(); return;
    case Node::Kind::Null: *out += "null"; return;
    case Node::Kind::Bool:
    case Node::Kind::Number: *out += n.text; return;
    case Node::Kind::Array:
    case Node::Kind::Object: break;
  }
  const bool object = n.kind == Node::Kind::Object;
  *out += object ? '{' : '[';
  for (size_t i = 0; i < n.members.size(); ++i) {
    if (i > 0) *out += ',';
    if (indent > 0) *out += '\n' + std::string(static_cast<size_t>(indent * (depth + 1)), ' ');
    if (object) {
      *out += nlohmann::json(n.members[i].first).dump();
      *out += indent > 0 ? ": " : ":";
    }
    write(n.members[i].second, indent, depth + 1, out);
  }
  if (indent > 0 && !n.members.empty()) *out += '\n' + std::string(static_cast<size_t>(indent * depth), ' ');
  *out += object ? '}' : ']';
}

}  // namespace detail

// Parses JSON text; false when it is not JSON.
inline bool parse(const std::string& text, Node* out) {
  *out = Node{};
  detail::TreeBuilder builder(out);
  return nlohmann::json::sax_parse(text, &builder);
}
// dump() / dump(2) of the value, numbers as written.
inline std::string compact(const Node& n) {
  std::string out;
  detail::write(n, 0, 0, &out);
  return out;
}
inline std::string pretty(const Node& n) {
  std::string out;
  detail::write(n, 2, 0, &out);
  return out;
}
inline const Node* member(const Node& object, const std::string& key) {
  for (const auto& m : object.members) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

struct Instance {
  std::string description;
  Node data;
  bool valid = false;
};

struct Group {
  std::string keyword;  // the file's name: the keyword its groups are about
  std::string description;
  Node schema;
  std::vector<Instance> tests;
};

inline const char* const kDrafts[] = {"draft2020-12", "draft7"};

// Every group of one draft's files, in file-name order.
inline std::vector<Group> read_draft(const std::string& draft) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(repo_path("tests/data/json-schema-test-suite/" + draft))) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<Group> groups;
  for (const auto& path : files) {
    Node file;
    if (!parse(read_file_text(path.string()), &file) || file.kind != Node::Kind::Array) {
      ADD_FAILURE() << path << " is not a JSON array";
      continue;
    }
    for (const auto& g : file.members) {
      Group group;
      group.keyword = path.stem().string();
      const Node* description = member(g.second, "description");
      const Node* schema = member(g.second, "schema");
      const Node* tests = member(g.second, "tests");
      if (description == nullptr || schema == nullptr || tests == nullptr) {
        ADD_FAILURE() << path << ": a group without description, schema or tests";
        continue;
      }
      group.description = description->text;
      group.schema = *schema;
      for (const auto& t : tests->members) {
        const Node* data = member(t.second, "data");
        const Node* valid = member(t.second, "valid");
        const Node* what = member(t.second, "description");
        if (data == nullptr || valid == nullptr || what == nullptr) {
          ADD_FAILURE() << path << ": a test without description, data or valid";
          continue;
        }
        group.tests.push_back(Instance{what->text, *data, valid->text == "true"});
      }
      groups.push_back(std::move(group));
    }
  }
  return groups;
}

// A schema's grammar compiled over the byte vocabulary: the converter's refusal (error and
// message), or the grammar ready to step.
class SchemaGrammar {
 public:
  static constexpr size_t kRegionBytes = size_t{32} << 20;
  SchemaGrammar() : region_(new uint8_t[kRegionBytes]) {}

  // Converts the schema; Ok and the compiled grammar, or the converter's or the compiler's
  // error with its message in message().
  Error build(const std::string& schema, const GrammarVocab& vocab) {
    grammar_.clear();
    Error e = convert_schema(schema, &text_);
    converted_ = e == Error::Ok;
    if (!converted_) {
      message_ = text_;
      return e;
    }
    e = grammar_.compile(text_.data(), text_.size(), vocab, region_.get(), kRegionBytes);
    message_ = e == Error::Ok ? "" : last_error_message();
    return e;
  }
  bool converted() const { return converted_; }
  const std::string& message() const { return message_; }
  const std::string& text() const { return text_; }
  Grammar& grammar() { return grammar_; }

  // Whether the automaton accepts the whole text as a sentence.
  bool accepts(const std::string& s) {
    grammar_.restart();
    auto all = grammar_.accept_bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    return all.ok() && *all && grammar_.accepting();
  }
  // The same through the token masks: each byte in the mask at its step, then the end token.
  // *disagree is set when the mask allows a byte the automaton then refuses.
  bool mask_accepts(const std::string& s, bool* disagree) {
    std::vector<uint32_t> words(grammar_.mask_words());
    grammar_.restart();
    for (const char c : s) {
      const auto b = static_cast<uint8_t>(c);
      if (!grammar_.compute_mask(grammar_.state(), words.data()).ok()) return false;
      if (((words[b / 32] >> (b % 32)) & 1) == 0) return false;
      auto stepped = grammar_.accept_bytes(&b, 1);
      if (!stepped.ok() || !*stepped) {
        *disagree = true;
        return false;
      }
    }
    if (!grammar_.compute_mask(grammar_.state(), words.data()).ok()) return false;
    const bool end = ((words[ByteVocab::kEndToken / 32] >> (ByteVocab::kEndToken % 32)) & 1) != 0;
    if (end != grammar_.accepting()) *disagree = true;
    return end;
  }

 private:
  std::unique_ptr<uint8_t[]> region_;
  Grammar grammar_;
  std::string text_, message_;
  bool converted_ = false;
};

}  // namespace tern::testing::suite
