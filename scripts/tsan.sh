#!/usr/bin/env bash
# scripts/tsan.sh: builds the threaded parts with ThreadSanitizer in build-tsan/
# (-DSPECDEC_TSAN=ON) and runs them: the engine's tests (batched slots sharing passes, prefix
# copies between slots, LoRA scales per slot), the server's unit tests, the thread pool's, and
# the server suite (tests/server/) against the TSan-built `specdec serve`. Any ThreadSanitizer
# report fails the run: the unit tests stop at the first one, a server that saw one exits
# non-zero at shutdown (the suite asserts exit 0), and the reports' log files are listed.
#
# Not part of scripts/test.sh: the build takes about 15 minutes on two cores without ccache,
# which CI's 45 minutes cannot also hold. Run it after changing the engine's or the server's
# threading (docs/architecture.md, "Batched slots").
#
# Environment:
#   SPECDEC_TSAN_BUILD=DIR   build directory (default build-tsan)
#   SPECDEC_TSAN_NO_BUILD=1  run the binaries already in the build directory
#   SPECDEC_TSAN_PYTEST=0    skip the server suite (the unit tests only)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

BUILD=${SPECDEC_TSAN_BUILD:-build-tsan}
if [[ ${SPECDEC_TSAN_NO_BUILD:-0} != 1 ]]; then
  specdec_ensure_deps
  specdec_configure "$BUILD" -DSPECDEC_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSPECDEC_BENCHMARKS=OFF
  for target in test_engine test_server test_tensor specdec write_tiny_model; do
    specdec_build "$BUILD" "$target" || specdec_die "building $target with TSan failed"
  done
fi

LOGS=$(mktemp -d "${TMPDIR:-/tmp}/specdec-tsan.XXXXXX")
failed=()
run() {
  local name=$1
  shift
  specdec_log "== $name"
  if ! TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:log_path=$LOGS/$name" "$@"; then
    failed+=("$name")
  fi
}
run engine "$BUILD/test_engine"
run server-unit "$BUILD/test_server"
run thread-pool "$BUILD/test_tensor" --gtest_filter='ThreadPool*'
if [[ ${SPECDEC_TSAN_PYTEST:-1} != 0 ]]; then
  # The replicas-behind-nginx tests time requests against a killed replica: under TSan's
  # slowdown their timeouts, not the server, decide them.
  # SPECDEC_SANITIZED: what a sanitizer runtime changes (its shadow memory in the RSS, mlockall
  # intercepted as a no-op) is not checked.
  run server-suite env SPECDEC_CLI="$ROOT/$BUILD/specdec" \
    SPECDEC_WRITE_TINY_MODEL="$ROOT/$BUILD/write_tiny_model" SPECDEC_NO_REAL_MODELS=1 \
    SPECDEC_SANITIZED=1 \
    python3 -m pytest -q -p no:cacheprovider -k "not replicas" "$ROOT/tests/server"
fi
if compgen -G "$LOGS/*" >/dev/null; then
  specdec_log "ThreadSanitizer reports:"
  ls "$LOGS" >&2
  failed+=("reports in $LOGS")
fi
if ((${#failed[@]})); then
  specdec_die "TSan run failed: ${failed[*]}"
fi
rm -rf "$LOGS"
specdec_log "TSan run clean"
