#!/usr/bin/env bash
# Alternates bench_tensor builds on one benchmark filter and prints each build's fastest time per
# benchmark: on a VM whose speed drifts from minute to minute, the minimum over alternated runs
# is the steadiest measure of a compute-bound kernel (docs/benchmarks.md).
#
# usage: scripts/bench_kernels_ab.sh FILTER ROUNDS BENCH_TENSOR_A BENCH_TENSOR_B [...]
# e.g.:  scripts/bench_kernels_ab.sh 'MatmulPacked/Q4_K/shape:1/k:9/threads:1/' 5 \
#            /tmp/bench_tensor.before build/bench_tensor
set -euo pipefail
if [[ $# -lt 3 ]]; then
  sed -n '6,8p' "$0" >&2
  exit 2
fi
filter=$1 rounds=$2
shift 2
for bin in "$@"; do
  [[ -x $bin ]] || { echo "not an executable: $bin" >&2; exit 2; }
done
for ((r = 0; r < rounds; ++r)); do
  for bin in "$@"; do
    "$bin" --benchmark_filter="$filter" --benchmark_min_time=0.2 2>/dev/null |
      awk -v b="$bin" '/^Matmul|^BM_/ {print b, $1, $2, $3}'
  done
done | awk '{k = $1 " " $2; if (!(k in m) || $3 < m[k]) {m[k] = $3; u[k] = $4}}
            END {for (k in m) print k, m[k], u[k]}' | sort -k2,2 -k1,1
