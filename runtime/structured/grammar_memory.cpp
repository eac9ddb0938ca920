// A compiled grammar's working memory (parse stacks, expansion marks, walk levels, states and
// the mask), carved from its region's high end once the compiled part is in: what must fit is
// checked first, by the same counts that carve it.
#include <cstring>

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

}  // namespace tern
