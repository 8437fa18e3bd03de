# shellcheck shell=bash
# Shared helpers for scripts/test.sh and scripts/run.sh. Source it; do not execute it.
#
#   specdec_log MSG...          progress line on stderr ("[specdec] ...")
#   specdec_die MSG...          error on stderr, exit 1
#   specdec_ensure_deps         installs the Debian 12 packages the build needs, if any is missing
#                               (apt-get update once, then install; needs root or passwordless sudo).
#                               SPECDEC_NO_APT=1 only checks and fails with the missing list.
#                               Then the Python packages of the server tests (pip, pinned in
#                               tests/server/requirements.txt) unless those versions are installed.
#   specdec_configure DIR ARGS  cmake -S <repo> -B DIR ARGS (+ ccache launcher when available)
#   specdec_build DIR [TARGET]  cmake --build DIR -j$(nproc) [--target TARGET]
#   specdec_fetch_model NAME    prints the cached path of a model (scripts/fetch-models.sh)

SPECDEC_ROOT=${SPECDEC_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

SPECDEC_APT_PACKAGES=(
  build-essential cmake pkg-config libgtest-dev libbenchmark-dev libpcre2-dev
  nlohmann-json3-dev python3 python3-pip ccache clang-14 libclang-rt-14-dev
  nginx-light
)

specdec_log() { echo "[specdec] $*" >&2; }
specdec_die() { echo "[specdec] error: $*" >&2; exit 1; }

specdec_missing_packages() {
  local p status
  for p in "${SPECDEC_APT_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || echo "$p"
  done
}

specdec_ensure_deps() {
  specdec_ensure_apt_deps
  specdec_ensure_python_deps
}

# pytest and the openai, anthropic and ollama clients for tests/server (the `specdec serve` end-to-end tests).
# Debian's own python3 is "externally managed" (PEP 668): pip refuses to install into it unless
# told --break-system-packages, which older pips do not know; so try without, then with.
specdec_ensure_python_deps() {
  local req="$SPECDEC_ROOT/tests/server/requirements.txt"
  python3 - "$req" <<'PY' 2>/dev/null && return 0
import sys
from importlib.metadata import version
pins = [l.split("==") for l in open(sys.argv[1]) if "==" in l and not l.startswith("#")]
sys.exit(any(version(n.strip()) != v.strip() for n, v in pins))
PY
  specdec_log "installing Python packages: $(grep -v '^#' "$req" | tr '\n' ' ')"
  python3 -m pip install -q --disable-pip-version-check -r "$req" >&2 \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages -r "$req" >&2 \
    || specdec_die "pip install -r $req failed"
}

specdec_ensure_apt_deps() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    specdec_log "not a Debian system: skipping apt; make sure these are installed: ${SPECDEC_APT_PACKAGES[*]}"
    return 0
  fi
  local missing
  missing=$(specdec_missing_packages | tr '\n' ' ')
  missing=${missing% }
  [[ -z $missing ]] && return 0

  if [[ ${SPECDEC_NO_APT:-0} == 1 ]]; then
    specdec_die "missing Debian packages (SPECDEC_NO_APT=1, not installing): $missing"
  fi
  local sudo=()
  if [[ $(id -u) != 0 ]]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      specdec_die "missing Debian packages: $missing (run as root, or: sudo apt-get install $missing)"
    fi
  fi
  specdec_log "installing Debian packages: $missing"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq >&2 || specdec_die "apt-get update failed"
  # shellcheck disable=SC2086
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends $missing >&2 \
    || specdec_die "apt-get install failed for: $missing"
}

specdec_configure() {
  local dir=$1; shift
  local extra=()
  if command -v ccache >/dev/null 2>&1 && [[ ${SPECDEC_NO_CCACHE:-0} != 1 ]]; then
    extra+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  specdec_log "configuring $dir: $*"
  cmake -S "$SPECDEC_ROOT" -B "$SPECDEC_ROOT/$dir" "${extra[@]}" "$@" >&2
}

specdec_build() {
  local dir=$1 target=${2:-}
  local args=(--build "$SPECDEC_ROOT/$dir" -j"$(nproc)")
  # ccache keys on paths relative to the checkout, so that a clone in another folder (CI's
  # fresh clone) reuses what an earlier build compiled: a cold ASan build takes half an hour.
  export CCACHE_BASEDIR="$SPECDEC_ROOT" CCACHE_NOHASHDIR=true
  [[ -n $target ]] && args+=(--target "$target")
  specdec_log "building $dir${target:+ ($target)}"
  cmake "${args[@]}" >&2
}

specdec_fetch_model() {
  local out
  out=$(bash "$SPECDEC_ROOT/scripts/fetch-models.sh" "$1") || specdec_die "could not fetch model $1"
  echo "$out" | tail -n 1
}
