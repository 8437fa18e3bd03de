#!/usr/bin/env bash
# KV cache types against each other on a long summary prompt: target-only and speculative decode
# on the default Qwen pair, every configuration alternated REPEATS times (docs/benchmarks.md).
#   scripts/bench_kv_cache.sh PROMPT_FILE [REPEATS] [TYPES]
# TYPES: the cache types compared, K and V alike (default "f32 f16 q8_0").
# Prints decode tok/s, acceptance and the target's KV cache size per run, then whether the
# speculative text equals the target-only text on each cache type.
set -euo pipefail
prompt=${1:?usage: scripts/bench_kv_cache.sh PROMPT_FILE [REPEATS] [TYPES]}
repeats=${2:-2}
types=${3:-f32 f16 q8_0}
root=$(cd "$(dirname "$0")/.." && pwd)
models=${SPECDEC_MODELS:-$HOME/.cache/specdec/models}
target=$models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
draft=$models/qwen2.5-coder-0.5b-instruct.gguf
out=$(mktemp -d)
for rep in $(seq "$repeats"); do
  for kv in $types; do
    for mode in plain spec; do
      extra=()
      [[ $mode == spec ]] && extra=(-md "$draft")
      "$root/build/specdec" run -m "$target" "${extra[@]}" -f "$prompt" --chat \
        -sys "Summarize the document in detail." -n 128 --temp 0 -t 2 -c 4096 \
        -ctk "$kv" -ctv "$kv" --stats-json "$out/$kv-$mode-$rep.json" -q >"$out/$kv-$mode-$rep.txt"
      python3 - "$out/$kv-$mode-$rep.json" "$rep $kv $mode" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
s = j.get("speculative_stats") or {}
print(sys.argv[2], "prompt", j["prompt_tokens"], "decode tok/s %.2f" % j["decode_tokens_per_s"],
      "accepted", s.get("acceptance_rate"), "target KV MiB",
      j["memory"]["target"]["kv_cache_bytes"] >> 20)
PY
    done
  done
done
for kv in $types; do
  if cmp -s "$out/$kv-plain-1.txt" "$out/$kv-spec-1.txt"; then
    echo "$kv: speculative text = target-only text"
  else
    echo "$kv: speculative text DIFFERS from target-only text"
  fi
done
rm -rf "$out"
