// Statistics and bit allocation for the per-head KV profile (host side): attention
// entropies per query head, the seeds' head classes, combining the query heads of a
// GQA group, and allocation rules that meet an average-bits target exactly.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::kvcal {

// Shannon entropy -Σ p log2 p of a probability row (renormalized if it does not sum to 1).
double shannon_entropy_bits(const float* p, size_t n);
// Rényi-2 (collision) entropy -log2 Σ p² of a probability row (renormalized likewise).
double renyi2_entropy_bits(const float* p, size_t n);

// Classes of research/KV_RESEARCH.md, by mean Shannon entropy in bits:
// sink < 0.5 <= focused < 1.5 <= moderate < 2.5 <= mixed <= 3.5 < diffuse.
// Values match schema::KvClass.
enum class HeadClass : uint8_t { Sink = 0, Focused = 1, Moderate = 2, Mixed = 3, Diffuse = 4 };
HeadClass classify_entropy(double shannon_bits);
const char* to_string(HeadClass c);

// Running means of one query head's entropies over calibration positions.
struct HeadEntropy {
  double shannon_sum = 0;
  double renyi2_sum = 0;
  uint64_t rows = 0;
  void add(const float* p, size_t n);
  double mean_shannon() const { return rows ? shannon_sum / rows : 0.0; }
  double mean_renyi2() const { return rows ? renyi2_sum / rows : 0.0; }
};

// How the query heads reading one KV head combine: Min takes the most focused head of
// the group (the safe choice: the KV head must serve its sharpest reader), Mean averages.
enum class GqaCombine { Min, Mean };
// Query head q reads KV head q / group (contiguous groups, as in LLaMA/BitNet GQA).
std::vector<double> combine_gqa(const std::vector<double>& per_query_head, size_t group, GqaCombine rule);

// Supported quantized widths, in the order of the cost columns below.
constexpr std::array<int, 4> kWidths = {2, 3, 4, 8};

struct Allocation {
  std::vector<uint8_t> bits;  // one width per item
  int total_bits = 0;
  bool exact = false;  // total == the target (else the largest reachable total below it)
};

// Σ widths the target asks for: floor(n * avg_bits) (never above the budget).
int target_total_bits(size_t n, double avg_bits);
// Minimizes Σ cost[i][w] subject to Σ widths == target (dynamic programming over the
// reachable totals, so the answer is optimal, not greedy); falls back to the largest
// reachable total below the target when the target cannot be met.
Allocation allocate_min_cost(const std::vector<std::array<double, 4>>& cost, int target_total);

// All items at avg_bits (mixing the two nearest widths when it is not a width).
Allocation allocate_uniform(size_t n, double avg_bits);
// The seeds' rule b_i = avg + alpha * (mean(H2) - H2_i), rounded to widths and repaired
// to the exact total by least squares around those targets.
Allocation allocate_entropy_rule(const std::vector<double>& renyi2_bits, double avg_bits, double alpha);
// Per-item, per-width error estimates (columns in kWidths order): the allocation with
// the least total error at the exact bit budget.
Allocation allocate_by_sensitivity(const std::vector<std::array<double, 4>>& error, double avg_bits);

}  // namespace tern::kvcal
