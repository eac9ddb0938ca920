#include "converter/calibration/kv_calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tern::kvcal {

namespace {

double row_sum(const float* p, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}

}  // namespace

double shannon_entropy_bits(const float* p, size_t n) {
  const double total = row_sum(p, n);
  if (total <= 0) return 0.0;
  double h = 0;
  for (size_t i = 0; i < n; ++i) {
    const double q = p[i] / total;
    if (q > 0) h -= q * std::log2(q);
  }
  return h;
}

double renyi2_entropy_bits(const float* p, size_t n) {
  const double total = row_sum(p, n);
  if (total <= 0) return 0.0;
  double collision = 0;
  for (size_t i = 0; i < n; ++i) {
    const double q = p[i] / total;
    collision += q * q;
  }
  return -std::log2(collision);
}

HeadClass classify_entropy(double h) {
  if (h < 0.5) return HeadClass::Sink;
  if (h < 1.5) return HeadClass::Focused;
  if (h < 2.5) return HeadClass::Moderate;
  if (h <= 3.5) return HeadClass::Mixed;
  return HeadClass::Diffuse;
}

const char* to_string(HeadClass c) {
  switch (c) {
    case HeadClass::Sink: return "sink";
    case HeadClass::Focused: return "focused";
    case HeadClass::Moderate: return "moderate";
    case HeadClass::Mixed: return "mixed";
    case HeadClass::Diffuse: return "diffuse";
  }
  return "unknown";
}

void HeadEntropy::add(const float* p, size_t n) {
  shannon_sum += shannon_entropy_bits(p, n);
  renyi2_sum += renyi2_entropy_bits(p, n);
  ++rows;
}

std::vector<double> combine_gqa(const std::vector<double>& per_query_head, size_t group, GqaCombine rule) {
  std::vector<double> out;
  if (group == 0) return out;
  for (size_t g = 0; g + group <= per_query_head.size(); g += group) {
    double acc = rule == GqaCombine::Min ? std::numeric_limits<double>::infinity() : 0.0;
    for (size_t i = g; i < g + group; ++i)
      acc = rule == GqaCombine::Min ? std::fmin(acc, per_query_head[i]) : acc + per_query_head[i];
    out.push_back(rule == GqaCombine::Min ? acc : acc / static_cast<double>(group));
  }
  return out;
}

int target_total_bits(size_t n, double avg_bits) {
  return static_cast<int>(std::floor(static_cast<double>(n) * avg_bits + 1e-9));
}

Allocation allocate_min_cost(const std::vector<std::array<double, 4>>& cost, int target_total) {
  const size_t n = cost.size();
  const int max_total = kWidths.back() * static_cast<int>(n);
  const double inf = std::numeric_limits<double>::infinity();
  // best[s]: least cost of the items so far summing to s; choice[i][s]: width index used.
  std::vector<double> best(max_total + 1, inf), next(max_total + 1);
  std::vector<std::vector<int8_t>> choice(n, std::vector<int8_t>(max_total + 1, -1));
  best[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    std::fill(next.begin(), next.end(), inf);
    for (int s = 0; s <= max_total; ++s) {
      if (best[s] == inf) continue;
      for (int w = 0; w < 4; ++w) {
        const int t = s + kWidths[w];
        if (t > max_total) continue;
        const double c = best[s] + cost[i][w];
        if (c < next[t]) {
          next[t] = c;
          choice[i][t] = static_cast<int8_t>(w);
        }
      }
    }
    best.swap(next);
  }
  Allocation a;
  int total = std::min(target_total, max_total);
  while (total > 0 && best[total] == inf) --total;
  if (n == 0 || total <= 0 || best[total] == inf) return a;
  a.total_bits = total;
  a.exact = total == target_total;
  a.bits.resize(n);
  for (size_t i = n; i-- > 0;) {
    const int w = choice[i][total];
    a.bits[i] = static_cast<uint8_t>(kWidths[w]);
    total -= kWidths[w];
  }
  return a;
}

namespace {

std::vector<std::array<double, 4>> squared_distance_costs(const std::vector<double>& targets) {
  std::vector<std::array<double, 4>> cost(targets.size());
  for (size_t i = 0; i < targets.size(); ++i)
    for (int w = 0; w < 4; ++w) cost[i][w] = (kWidths[w] - targets[i]) * (kWidths[w] - targets[i]);
  return cost;
}

}  // namespace

Allocation allocate_uniform(size_t n, double avg_bits) {
  return allocate_min_cost(squared_distance_costs(std::vector<double>(n, avg_bits)), target_total_bits(n, avg_bits));
}

Allocation allocate_entropy_rule(const std::vector<double>& renyi2_bits, double avg_bits, double alpha) {
  double mean = 0;
  for (double h : renyi2_bits) mean += h;
  mean /= renyi2_bits.empty() ? 1.0 : static_cast<double>(renyi2_bits.size());
  std::vector<double> targets;
  for (double h : renyi2_bits) targets.push_back(avg_bits + alpha * (mean - h));
  return allocate_min_cost(squared_distance_costs(targets), target_total_bits(renyi2_bits.size(), avg_bits));
}

Allocation allocate_by_sensitivity(const std::vector<std::array<double, 4>>& error, double avg_bits) {
  return allocate_min_cost(error, target_total_bits(error.size(), avg_bits));
}

}  // namespace tern::kvcal
