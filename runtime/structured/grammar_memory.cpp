// A compiled grammar's memory: its working memory (parse stacks, expansion marks, walk
// levels, states and the mask), carved from its region's high end once the compiled part is
// in (what must fit is checked first, by the same counts that carve it), and copies of the
// compiled part into another region.
#include <cstring>
#include <new>

#include "runtime/structured/grammar.h"
#include "runtime/structured/grammar_program.h"
#include "runtime/structured/region.h"

namespace tern {

using namespace grammar_detail;

Error Grammar::carve_working_memory(Program& program, const GrammarVocab& vocab, Region& r, uint32_t** mask_out) {
  Program* g = &program;
  constexpr uint32_t kNodes = 32768, kVisits = 16384, kWorklist = 8192, kWalk = 32768, kMaxLeaves = 1024;
  {
    // What must fit besides the caches: the working memory, and the walk's temporaries.
    const size_t states = 4 + kMaxDraftSlots;
    const size_t working = kNodes * sizeof(Node) + 2 * kNodes * sizeof(uint32_t) + kVisits * sizeof(Visit) +
                           2 * kWorklist * sizeof(uint32_t) + kWalk * sizeof(uint32_t) +
                           (vocab.max_length() + 2) * sizeof(WalkLevel) + (vocab.size() + 31) / 32 * sizeof(uint32_t) +
                           states * kMaxLeaves * sizeof(uint32_t) + (7 + states) * 64;
    const size_t walk = g->n_positions * sizeof(TokenCache) +
                        (vocab.size() + 4 * static_cast<size_t>(vocab.sorted_size()) + 4) * sizeof(uint32_t) + 192;
    if (r.used() + working + walk > r.size()) {
      return fail(Error::GrammarTooLarge,
                  "the grammar needs at least %zu bytes of grammar memory, and its token "
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
  *mask_out = mask;
  return Error::Ok;
}

Error Grammar::copy_from(const Grammar& other, void* region, size_t bytes) {
  clear();
  TERN_CHECK_OR_RETURN(other.program_ != nullptr, Error::InvalidState, "no compiled grammar to copy");
  TERN_CHECK_OR_RETURN(region != nullptr, Error::InvalidArgument, "null grammar memory");
  const Program& from = *other.program_;
  Region r(region, bytes);
  Program* g = r.low<Program>(1);
  if (g == nullptr || other.compiled_bytes_ > bytes) return no_room(r, "a copy of a compiled grammar");
  // The regions' offsets are alike (the region aligns offsets), so the compiled part is copied
  // whole past the header, and its pointers moved by the distance between the regions.
  const size_t head = r.low_mark();
  uint8_t* to = static_cast<uint8_t*>(region);
  std::memcpy(to + head, other.region_ + head, other.compiled_bytes_ - head);
  (void)r.low<uint8_t>(other.compiled_bytes_ - head);
  auto moved = [&](auto* p) {
    return p == nullptr ? p : reinterpret_cast<decltype(p)>(to + (reinterpret_cast<const uint8_t*>(p) - other.region_));
  };
  new (g) Program();
  g->states = moved(from.states);
  g->n_states = from.n_states;
  g->positions = moved(from.positions);
  g->n_positions = from.n_positions;
  g->dfa = moved(from.dfa);
  g->n_dfa = from.n_dfa;
  g->rules = moved(from.rules);
  g->n_rules = from.n_rules;
  g->root = from.root;
  g->names = moved(from.names);
  g->source = moved(from.source);
  g->source_size = from.source_size;
  g->loops = moved(from.loops);
  g->n_loops = from.n_loops;
  g->caches = moved(from.caches);
  g->tier_caches = moved(from.tier_caches);
  g->cache_data = moved(from.cache_data);
  uint32_t* mask = nullptr;
  TERN_RETURN_IF_ERROR(carve_working_memory(*g, *other.vocab_, r, &mask));
  program_ = g;
  vocab_ = other.vocab_;
  mask_ = mask;
  const Error e = start_state();
  if (e != Error::Ok) {
    clear();
    return e;
  }
  used_bytes_ = r.used();
  region_ = to;
  compiled_bytes_ = other.compiled_bytes_;
  copied_ = true;
  return Error::Ok;
}

}  // namespace tern
