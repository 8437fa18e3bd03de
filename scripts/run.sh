#!/usr/bin/env bash
# scripts/run.sh [CLI ARGS...]: the project's main command.
#
# Builds build/specdec (Release) when it is missing, installing the build dependencies first if
# needed, fetches the default model (smollm2-135m) on first use, and runs
#   build/specdec run -m <model> ARGS...
# e.g.  scripts/run.sh -p "Hello" -n 64
# Passing -m/--model yourself overrides the default model; so does SPECDEC_MODEL=/path/x.gguf.
# SPECDEC_REBUILD=1 rebuilds build/specdec even when it exists (incremental).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

CLI="$ROOT/build/specdec"
if [[ ! -x $CLI || ${SPECDEC_REBUILD:-0} == 1 ]]; then
  specdec_ensure_deps
  if [[ ! -f "$ROOT/build/CMakeCache.txt" ]]; then
    specdec_configure build -DCMAKE_BUILD_TYPE=Release
  fi
  specdec_build build specdec || specdec_die "building build/specdec failed"
fi

have_model=0
for arg in "$@"; do
  case "$arg" in
    -m|--model|--model=*|-m=*) have_model=1 ;;
  esac
done

if [[ $have_model == 1 ]]; then
  exec "$CLI" run "$@"
fi
MODEL=${SPECDEC_MODEL:-}
if [[ -z $MODEL ]]; then
  MODEL=$(specdec_fetch_model smollm2-135m)
fi
exec "$CLI" run -m "$MODEL" "$@"
