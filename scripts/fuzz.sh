#!/usr/bin/env bash
# scripts/fuzz.sh: builds the libFuzzer targets (fuzz/, docs/fuzzing.md) in build-fuzz/ with
# clang-14 (-DSPECDEC_FUZZ=ON: coverage, ASan, UBSan) and runs them.
#
#   scripts/fuzz.sh list                      the targets
#   scripts/fuzz.sh TARGET SECONDS [FLAGS...] runs one target for SECONDS (extra FLAGS go to
#                                             libFuzzer, e.g. -runs=1000000 -jobs=1)
#   scripts/fuzz.sh all SECONDS [FLAGS...]    runs every target in turn, SECONDS each
#
# Each run starts from a copy of fuzz/corpus/TARGET/ and fuzz/regressions/TARGET/ in a scratch
# directory (nothing generated is written into the repository), with the target's dictionary
# (fuzz/TARGET.dict), a per-target -max_len, -rss_limit_mb and leak detection, under nice.
# It prints the executions, coverage and corpus size libFuzzer reached. A crash, leak, timeout,
# out-of-memory or sanitizer report makes the exit status non-zero; the scratch directory is
# then kept and the crashing input's path printed (copy it to fuzz/regressions/TARGET/ once the
# bug is fixed: test_fuzz replays it in every build).
#
# Environment:
#   SPECDEC_FUZZ_BUILD=DIR    build directory (default build-fuzz)
#   SPECDEC_FUZZ_RSS_MB=N     libFuzzer -rss_limit_mb and -malloc_limit_mb (default 2048)
#   SPECDEC_FUZZ_NICE=N       niceness of the fuzzer (default 10)
#   SPECDEC_FUZZ_KEEP=1       keep the scratch directory after a clean run too
#   SPECDEC_FUZZ_NO_BUILD=1   run the binaries already in the build directory
#   TMPDIR                    where scratch directories go (default /tmp)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

BUILD=${SPECDEC_FUZZ_BUILD:-build-fuzz}
RSS_MB=${SPECDEC_FUZZ_RSS_MB:-2048}
# One source of truth for the target names: fuzz/CMakeLists.txt.
read -r -a TARGETS <<<"$(sed -n 's/^set(SPECDEC_FUZZ_TARGETS \(.*\))$/\1/p' fuzz/CMakeLists.txt)"

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# Largest input libFuzzer may generate, per target: room for the seeds (the GGUF seeds are
# tiny models of up to 22 KiB) without spending time on inputs far longer than any seed.
max_len() {
  case $1 in
    gguf) echo 32768 ;;
    request) echo 8192 ;;
    slot_file) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

build() {
  [[ ${SPECDEC_FUZZ_NO_BUILD:-0} == 1 ]] && return 0
  command -v clang++-14 >/dev/null 2>&1 ||
    specdec_die "clang++-14 not found (Debian: apt-get install clang-14 libclang-rt-14-dev)"
  CC=clang-14 CXX=clang++-14 specdec_configure "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++-14 -DSPECDEC_FUZZ=ON -DSPECDEC_TESTS=OFF \
    -DSPECDEC_BENCHMARKS=OFF
  specdec_build "$BUILD" fuzzers || specdec_die "building the fuzz targets failed"
}

# run_target NAME SECONDS [FLAGS...]: 0 when the run ended cleanly.
run_target() {
  local name=$1 seconds=$2
  shift 2
  local bin="$ROOT/$BUILD/fuzz/fuzz_$name"
  [[ -x $bin ]] || specdec_die "$bin not built"
  local scratch
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/specdec-fuzz-$name.XXXXXX")
  mkdir -p "$scratch/corpus" "$scratch/artifacts"
  cp -R "fuzz/corpus/$name/." "$scratch/corpus/"
  if [[ -d fuzz/regressions/$name ]]; then
    find "fuzz/regressions/$name" -maxdepth 1 -type f ! -name 'README.md' ! -name '.*' \
      -exec cp {} "$scratch/corpus/" \;
  fi
  local flags=(-max_total_time="$seconds" -max_len="$(max_len "$name")"
    -rss_limit_mb="$RSS_MB" -malloc_limit_mb="$RSS_MB" -detect_leaks=1 -timeout=30
    -print_final_stats=1 -artifact_prefix="$scratch/artifacts/")
  [[ -f fuzz/$name.dict ]] && flags+=(-dict="$ROOT/fuzz/$name.dict")
  specdec_log "fuzzing $name for ${seconds}s (scratch: $scratch)"
  local rc=0 start=$SECONDS
  # The fuzzer's log goes to the terminal (stderr) and to the scratch directory.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    nice -n "${SPECDEC_FUZZ_NICE:-10}" "$bin" "${flags[@]}" "$@" "$scratch/corpus" \
    >"$scratch/log" 2>&1 || rc=$?
  local elapsed=$((SECONDS - start))
  # Everything but libFuzzer's periodic progress lines ("#N pulse/NEW/REDUCE ... cov: ...").
  # and the dictionary libFuzzer recommends at the end.
  sed '/^###### Recommended dictionary/,/^###### End of recommended dictionary/d' "$scratch/log" |
    grep -Ev '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse|INITED|RELOAD)' | grep -v '^[[:space:]]*NEW_FUNC' | tail -n 60 >&2 || true

  local execs cov ft corp
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/log" | tail -n 1)
  local last
  last=$(grep -E '^#[0-9]+' "$scratch/log" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
  printf '[specdec] fuzz %s: %s executions in %ss, cov %s, ft %s, corpus %s (exit %s)\n' \
    "$name" "${execs:-?}" "$elapsed" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$rc" >&2

  local crashes
  crashes=$(find "$scratch/artifacts" -type f | sort)
  if [[ $rc -ne 0 || -n $crashes ]]; then
    specdec_log "fuzz $name FAILED (exit $rc); log: $scratch/log"
    local f
    for f in $crashes; do
      specdec_log "crashing input: $f  (replay: $bin $f)"
    done
    return 1
  fi
  if [[ ${SPECDEC_FUZZ_KEEP:-0} == 1 ]]; then
    specdec_log "kept $scratch"
  else
    rm -rf "$scratch"
  fi
  return 0
}

[[ $# -ge 1 ]] || usage
case $1 in
  list)
    printf '%s\n' "${TARGETS[@]}"
    exit 0
    ;;
  -h | --help) usage ;;
esac
[[ $# -ge 2 && $2 =~ ^[0-9]+$ ]] || usage
what=$1 seconds=$2
shift 2
if [[ $what == all ]]; then
  selected=("${TARGETS[@]}")
else
  [[ " ${TARGETS[*]} " == *" $what "* ]] || specdec_die "unknown target '$what' (targets: ${TARGETS[*]})"
  selected=("$what")
fi

build
failed=()
for t in "${selected[@]}"; do
  run_target "$t" "$seconds" "$@" || failed+=("$t")
done
if [[ ${#failed[@]} -gt 0 ]]; then
  specdec_log "fuzz targets that FAILED: ${failed[*]}"
  exit 1
fi
specdec_log "fuzz: ${selected[*]}: no crash, leak or sanitizer report"
