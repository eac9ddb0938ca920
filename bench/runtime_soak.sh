#!/usr/bin/env bash
# Soak of the runtime: one long sampled generation with eviction per KV mode family (dense
# with eviction, q4, adaptive:3, aging q3>2@50%, per-head budgets q4/hh) in the budget
# tern_plan() states for a 260-token cache, each in a child process. Prints a table: the
# plan, the child's peak RSS, decode speed over the first tenth once the cache is full and over
# the last tenth (tokens per CPU second, one compute thread, each tenth at its fastest
# hundredth: robust to neighbours on a shared machine), and fails when a peak RSS passes its
# plan, anything is allocated while generating, or the end is more than 10 % slower.
# The code is runtime_kv_budget_test's (KvBudget.EveryKvModeFamilyStaysWithinItsPlan,
# 20,000 tokens in .ci/test); this runs it longer.
#   bench/runtime_soak.sh [BUILD_DIR] [TOKENS]     (defaults: build/release, 100000)
set -euo pipefail
build=${1:-build/release}
tokens=${2:-100000}
test_bin="$build/tests/runtime/kv/runtime_kv_budget_test"
bundles="$build/test-bundles"
for need in "$test_bin" "$bundles/tiny-austen-packed.tern" "$bundles/tiny-austen-calibrated.tern"; do
  [ -e "$need" ] || { echo "runtime_soak: $need is missing (build, then .ci/test converts the bundles)" >&2; exit 1; }
done
out=$(TERN_TEST_BUNDLE_DIR="$bundles" TERN_SOAK_TOKENS="$tokens" "$test_bin" \
  --gtest_filter=KvBudget.EveryKvModeFamilyStaysWithinItsPlan 2>&1) || { echo "$out"; exit 1; }
echo "$out" | grep '^|'
# The last column: last tenth's speed against the first's.
echo "$out" | grep '^| [a-z]' | awk -F'|' '{
  gsub(/[ %+]/, "", $10); if ($10 + 0 < -10) { print "FAIL: " $3 " is " $10 " % slower at the end"; bad = 1 } }
  END { if (bad) exit 1; print "every family: peak RSS within its plan, nothing allocated, the end within 10 % of the start" }'
