#!/usr/bin/env bash
# scripts/test.sh: the project's test command (also what CI runs, via .ci/run).
#
# On a fresh Debian 12 machine (as root) it installs the build dependencies, fetches the real
# models the tests use, builds Release in build/ and runs the whole test suite, then again on the
# AVX2 and scalar kernel paths, then builds with ASan+UBSan in build-asan/ and runs the suite
# again (those extra passes without the slow real-model tests, whose names contain "RealModel"),
# and last runs each libFuzzer target for about 30 s (scripts/fuzz.sh all 30, docs/fuzzing.md).
# Idempotent: a second run only rebuilds what changed.
#
# Environment:
#   SPECDEC_SKIP_ASAN=1          skip the sanitizer pass (quick local runs)
#   SPECDEC_SKIP_FUZZ=1          skip the fuzz step (scripts/fuzz.sh all 30: each libFuzzer
#                                target for about 30 s, built with clang-14 in build-fuzz/)
#   SPECDEC_ASAN_REAL_MODELS=1   also run the RealModel tests (and the server suite's real-pair
#                                tests) under ASan (slow)
#   SPECDEC_TEST_TIMEOUT=N       per-test timeout in seconds for the Release run (default 300)
#   SPECDEC_ASAN_TEST_TIMEOUT=N  per-test timeout under ASan (default 600)
#   SPECDEC_TEST_FILTER=REGEX    only run tests whose names match (ctest -R), both passes
#   SPECDEC_MODELS=DIR           model cache (default ~/.cache/specdec/models)
#   SPECDEC_NO_APT=1             never call apt-get; fail if packages are missing
# Exit status: non-zero if a dependency, build or any test fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

START=$SECONDS
step() { specdec_log "== $* (t=$((SECONDS - START))s)"; }

step "dependencies"
specdec_ensure_deps

step "models"
export SPECDEC_MODELS=${SPECDEC_MODELS:-$HOME/.cache/specdec/models}
SPECDEC_MODEL_SMOLLM2=$(specdec_fetch_model smollm2-135m)
SPECDEC_MODEL_GEMMA3=$(specdec_fetch_model gemma3-270m)
SPECDEC_MODEL_QWEN_TARGET=$(specdec_fetch_model qwen2.5-coder-1.5b)
SPECDEC_MODEL_QWEN_DRAFT=$(specdec_fetch_model qwen2.5-coder-0.5b)
export SPECDEC_MODEL_SMOLLM2 SPECDEC_MODEL_GEMMA3 SPECDEC_MODEL_QWEN_TARGET SPECDEC_MODEL_QWEN_DRAFT
export SPECDEC_REQUIRE_NGINX=1  # tests/server/test_replicas_nginx.py: no nginx fails, never skips
specdec_log "SPECDEC_MODELS=$SPECDEC_MODELS"

CTEST_FILTER=()
[[ -n ${SPECDEC_TEST_FILTER:-} ]] && CTEST_FILTER=(-R "$SPECDEC_TEST_FILTER")

FAILED=()
FAILED_TESTS=()
# Names the tests a failed ctest pass lost: ctest's own list, and pytest's "FAILED file::test"
# lines from the server suite's output. They are printed again at the very end, since a CI log
# is often read from its tail only. Usage: note_failures LABEL BUILD_DIR OUTPUT_LOG
note_failures() {
  local line
  while IFS= read -r line; do FAILED_TESTS+=("$1: ${line#*:}"); done \
    < <(cat "$2/Testing/Temporary/LastTestsFailed.log" 2>/dev/null || true)
  while IFS= read -r line; do FAILED_TESTS+=("$1:   $line"); done \
    < <(grep -aE '^(FAILED|ERROR) [^ ]+::' "$3" 2>/dev/null | sort -u || true)
}

step "Release build (build/)"
specdec_configure build -DCMAKE_BUILD_TYPE=Release
specdec_build build || specdec_die "Release build failed"

step "Release tests"
if ! ctest --test-dir build --output-on-failure -j2 --timeout "${SPECDEC_TEST_TIMEOUT:-300}" \
    --output-log build/ctest-release.log "${CTEST_FILTER[@]}"; then
  FAILED+=("Release tests")
  note_failures "Release" build build/ctest-release.log
fi

# The default run takes the best kernel path this CPU has; the lower paths run the whole suite
# again (without the slow real-model tests), so that each stays tested end to end on a CPU that
# would never pick it: AVX2 where AVX-512 VNNI is the default, and the scalar fallback always.
for isa in avx2 scalar; do
  step "Release tests on the $isa kernel path (SPECDEC_ISA=$isa, RealModel tests excluded)"
  # SPECDEC_NO_REAL_MODELS: the server suite's real-model tests follow the same rule.
  if ! SPECDEC_ISA=$isa SPECDEC_NO_REAL_MODELS=1 ctest --test-dir build --output-on-failure -j2 \
      --timeout "${SPECDEC_TEST_TIMEOUT:-300}" --output-log "build/ctest-$isa.log" \
      "${CTEST_FILTER[@]}" -E RealModel; then
    FAILED+=("Release tests (SPECDEC_ISA=$isa)")
    note_failures "SPECDEC_ISA=$isa" build "build/ctest-$isa.log"
  fi
done

if [[ ${SPECDEC_SKIP_ASAN:-0} == 1 ]]; then
  specdec_log "SPECDEC_SKIP_ASAN=1: skipping the ASan+UBSan pass"
else
  step "ASan+UBSan build (build-asan/)"
  specdec_configure build-asan -DSPECDEC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPECDEC_BENCHMARKS=OFF
  if specdec_build build-asan; then
    step "ASan+UBSan tests"
    ASAN_EXCLUDE=()
    NO_REAL=0
    [[ ${SPECDEC_ASAN_REAL_MODELS:-0} == 1 ]] || { ASAN_EXCLUDE=(-E RealModel); NO_REAL=1; }
    if ! SPECDEC_NO_REAL_MODELS=$NO_REAL ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1} \
         UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
         ctest --test-dir build-asan --output-on-failure -j2 \
           --timeout "${SPECDEC_ASAN_TEST_TIMEOUT:-600}" --output-log build-asan/ctest-asan.log \
           "${CTEST_FILTER[@]}" "${ASAN_EXCLUDE[@]}"; then
      FAILED+=("ASan+UBSan tests")
      note_failures "ASan+UBSan" build-asan build-asan/ctest-asan.log
    fi
  else
    FAILED+=("ASan+UBSan build")
  fi
fi

# Each libFuzzer target for ~30 s from its seed corpus (docs/fuzzing.md): a crash, leak or
# sanitizer report fails the run and prints the crashing input's path.
if [[ ${SPECDEC_SKIP_FUZZ:-0} == 1 ]]; then
  specdec_log "SPECDEC_SKIP_FUZZ=1: skipping the fuzz step"
else
  step "fuzz (scripts/fuzz.sh all 30, build-fuzz/)"
  if ! bash "$ROOT/scripts/fuzz.sh" all 30; then
    FAILED+=("fuzz (scripts/fuzz.sh all 30)")
  fi
fi

step "done"
if [[ ${#FAILED[@]} -gt 0 ]]; then
  [[ ${#FAILED_TESTS[@]} -gt 0 ]] && printf '[specdec] failed test: %s\n' "${FAILED_TESTS[@]}" >&2
  printf '[specdec] FAILED: %s\n' "${FAILED[@]}" >&2
  exit 1
fi
specdec_log "all tests passed in $((SECONDS - START))s"
