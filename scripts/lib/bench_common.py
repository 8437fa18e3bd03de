"""Helpers shared by the benchmark scripts in scripts/: errors, model lookup, waiting for a
server."""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where scripts/fetch-models.sh caches the models.
MODELS = os.environ.get("SPECDEC_MODELS", os.path.expanduser("~/.cache/specdec/models"))


def die(msg: str) -> None:
    """One-line error on stderr, named after the running script, and exit 1."""
    print(f"{Path(sys.argv[0]).stem}: error: {msg}", file=sys.stderr)
    sys.exit(1)


def resolve_model(arg: str) -> Path:
    """A GGUF path as given, or a model name fetched (and cached) by scripts/fetch-models.sh."""
    p = Path(arg)
    if p.suffix == ".gguf" or p.exists():
        if not p.is_file():
            die(f"model file {p} not found")
        return p.resolve()
    out = subprocess.run(["bash", str(ROOT / "scripts" / "fetch-models.sh"), arg],
                         stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        die(f"could not fetch model '{arg}'")
    return Path(out.stdout.strip().splitlines()[-1])


def post_json(base: str, path: str, body: dict, timeout_s: float = 600) -> dict:
    """POSTs a JSON body to base + path and returns the parsed JSON answer."""
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        return json.load(r)


def wait_healthy(base: str, proc: subprocess.Popen, what: str, timeout_s: float = 300) -> bool:
    """Polls base/health until it answers 200: True. Dies if the process exits first; False
    after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            die(f"server exited ({proc.returncode}): {what}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def add_pair_server_args(ap, port: int) -> None:
    """The arguments of a one-slot `specdec serve` on the Qwen pair (pair_server) and of how
    often to repeat: --cli, --target, --draft, --threads, --repeats, --port."""
    ap.add_argument("--cli", default="build/specdec")
    ap.add_argument("--target", default=f"{MODELS}/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--draft", default=f"{MODELS}/qwen2.5-coder-0.5b-instruct.gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--port", type=int, default=port)


@contextlib.contextmanager
def pair_server(args):
    """Runs `specdec serve` on args' target and draft (one slot, a 4096-token context) for the
    block; yields its base URL."""
    server = subprocess.Popen([args.cli, "serve", "-m", args.target, "-md", args.draft, "-t",
                               str(args.threads), "-c", "4096", "--parallel", "1", "--port",
                               str(args.port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{args.port}"
    try:
        if not wait_healthy(base, server, "specdec serve", timeout_s=150):
            die("the server did not come up")
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)
