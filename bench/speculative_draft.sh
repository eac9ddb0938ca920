#!/usr/bin/env bash
# Acceptance and end-to-end decode speed of speculative decoding with a draft model
# (bitllama2c-1M drafting for bitllama2c-3M) against plain decoding and prompt lookup, on the
# three kinds of text of docs/perf/2026-11-24-speculative.md. Prints a markdown table.
#   bench/speculative_draft.sh BUILD_DIR [SHARED_DIR] [TEMPERATURE]
# Bundles: BUILD_DIR/test-bundles/bitllama2c-{3M,1M}.tern (the runtime_make_bundles fixture).
set -euo pipefail
build=${1:?build dir}
shared=${2:-$(dirname "$0")/../../shared}
temp=${3:-0}
run="$build/tools/tern-run"
target="$build/test-bundles/bitllama2c-3M.tern"
draft="$build/test-bundles/bitllama2c-1M.tern"
repeats=${REPEATS:-5}
tokens=${TOKENS:-200}
# 400 characters of TinyStories from character 8,000 (the file has 15,991), cut back to whole words.
passage=$(python3 -c "import sys; t=open(sys.argv[1]).read()[8000:8400]; t=t[t.find(' ')+1:]; print(t[:t.rfind(' ')].strip())" \
  "$shared/corpus/tinystories-sample-a.txt")
declare -A prompts=(
  [story]="$passage"
  [summarize]="$passage

Summarize this story.
"
  [rewrite]="$passage

Rewrite this story.
")

# Over $repeats runs: the best decode tok/s, the least prefill + decode seconds, the last
# run's draft line (the same in every run: greedy, or the same seed) and text.
measure() {  # text args...
  local text=$1; shift
  local best=0 least=1e9 line="" out
  for _ in $(seq $repeats); do
    out=$("$run" "$target" -p "$text" -n $tokens --temp "$temp" --seed 1 --kv f32 -c 512 -t 1 "$@" 2>&1 >/tmp/spec_text.$$)
    local tps=$(sed -n 's/^decode: [0-9]* tokens, \([0-9.]*\) tok\/s$/\1/p' <<<"$out")
    local dn=$(sed -n 's/^decode: \([0-9]*\) tokens.*/\1/p' <<<"$out")
    local pn=$(sed -n 's/^prefill: \([0-9]*\) tokens.*/\1/p' <<<"$out")
    local pps=$(sed -n 's/^prefill: [0-9]* tokens, \([0-9.]*\) tok\/s$/\1/p' <<<"$out")
    best=$(python3 -c "print(max($best, $tps))")
    least=$(python3 -c "print(min($least, $pn / $pps + $dn / $tps))")
    line="$dn $(grep '^draft:' <<<"$out" || true)"
  done
  echo "$best|$least|$line"
}

echo "| text | drafts | K | drafted | accepted | acceptance | passes | target forward passes | decode tok/s | x plain | x lookup (same K) | prefill + decode ms | x plain | same text as plain |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
for kind in story summarize rewrite; do
  text=${prompts[$kind]}
  IFS='|' read -r plain_tps plain_s plain_line <<<"$(measure "$text")"
  cp /tmp/spec_text.$$ /tmp/spec_plain.$$
  echo "| $kind | none (plain) | - | - | - | - | - | ${plain_line%% *} | $plain_tps | 1.00x | - | $(python3 -c "print(f'{1000*$plain_s:.1f}')") | 1.00x | - |"
  declare -A lookup_tps=()
  for source in lookup draft; do
    for k in 2 4; do
      if [[ $source == lookup ]]; then args=(--draft lookup --draft-max $k); else args=(--draft "$draft" --draft-max $k); fi
      IFS='|' read -r tps secs line <<<"$(measure "$text" "${args[@]}")"
      same=$(cmp -s /tmp/spec_text.$$ /tmp/spec_plain.$$ && echo yes || echo no)
      [[ $temp != 0 ]] && same="(sampled)"
      decoded=${line%% *}
      read -r drafted accepted passes < <(sed -n 's/^[0-9]* draft: \([0-9]*\) drafted, \([0-9]*\) accepted .*, \([0-9]*\) verification passes$/\1 \2 \3/p' <<<"$line")
      drafted=${drafted:-0} accepted=${accepted:-0} passes=${passes:-0}
      forwards=$((decoded - accepted))  # each pass runs 1 + accepted of the decoded tokens, a plain step 1
      acc=$(python3 -c "print(f'{100*$accepted/max($drafted,1):.1f} %')")
      xp=$(python3 -c "print(f'{$tps/$plain_tps:.2f}x')")
      if [[ $source == lookup ]]; then lookup_tps[$k]=$tps; xl="-"; name="prompt lookup"
      else xl=$(python3 -c "print(f'{$tps/${lookup_tps[$k]}:.2f}x')"); name="bitllama2c-1M"; fi
      ms=$(python3 -c "print(f'{1000*$secs:.1f}')")
      xt=$(python3 -c "print(f'{$plain_s/$secs:.2f}x')")
      echo "| $kind | $name | $k | $drafted | $accepted | $acc | $passes | $forwards | $tps | $xp | $xl | $ms | $xt | $same |"
    done
  done
done
rm -f /tmp/spec_text.$$ /tmp/spec_plain.$$
