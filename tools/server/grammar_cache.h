// What tern-server remembers of the grammars it has made: a GBNF text's key (its FNV-1a hash
// and length, as the library compares grammars to skip a recompile), and a small LRU of JSON
// Schema -> GBNF conversions, so a repeated schema is not converted again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <utility>

namespace tern::server {

// 64-bit FNV-1a of `text`.
inline uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// A grammar text as a session slot remembers it; size 0: no grammar.
struct GrammarKey {
  uint64_t hash = 0;
  size_t size = 0;
  bool operator==(const GrammarKey& o) const { return hash == o.hash && size == o.size; }
  bool operator!=(const GrammarKey& o) const { return !(*this == o); }
};

inline GrammarKey grammar_key(const std::string& grammar) {
  return grammar.empty() ? GrammarKey{} : GrammarKey{fnv1a64(grammar), grammar.size()};
}

// Schema text -> grammar, the least recently used dropped past `max_entries` or `max_bytes`
// (schema and grammar bytes together; a conversion larger than a quarter of that is not kept).
// The key is the hash, confirmed by the whole schema text: two schemas that share a hash (FNV-1a
// collisions are easy to make) never share a grammar. Thread-safe. `hash`: for the tests.
class SchemaGrammarCache {
 public:
  explicit SchemaGrammarCache(size_t max_entries = 64, size_t max_bytes = size_t{4} << 20,
                              uint64_t (*hash)(const std::string&) = fnv1a64)
      : max_entries_(max_entries), max_bytes_(max_bytes), hash_(hash) {}

  bool find(const std::string& schema, std::string* grammar) {
    const uint64_t h = hash_(schema);
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->hash == h && it->schema == schema) {
        lru_.splice(lru_.begin(), lru_, it);  // now the most recently used
        *grammar = it->grammar;
        ++hits_;
        return true;
      }
    }
    ++misses_;
    return false;
  }

  void insert(const std::string& schema, std::string grammar) {
    const size_t bytes = schema.size() + grammar.size();
    if (max_entries_ == 0 || bytes > max_bytes_ / 4) return;
    const uint64_t h = hash_(schema);
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : lru_) {
      if (e.hash == h && e.schema == schema) return;  // another thread converted it too
    }
    lru_.push_front(Entry{h, schema, std::move(grammar)});
    bytes_ += bytes;
    while (lru_.size() > max_entries_ || bytes_ > max_bytes_) {
      bytes_ -= lru_.back().schema.size() + lru_.back().grammar.size();
      lru_.pop_back();
    }
  }

  struct Stats {
    uint64_t hits = 0, misses = 0;
    size_t entries = 0, bytes = 0;
  };
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return Stats{hits_, misses_, lru_.size(), bytes_};
  }

 private:
  struct Entry {
    uint64_t hash;
    std::string schema, grammar;
  };
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recently used first
  size_t max_entries_, max_bytes_, bytes_ = 0;
  uint64_t (*hash_)(const std::string&);
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace tern::server
