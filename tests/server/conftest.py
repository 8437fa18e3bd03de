"""Fixtures for the end-to-end tests of `specdec serve` and `specdec chat`.

The binaries come from the environment CTest sets (SPECDEC_CLI, SPECDEC_WRITE_TINY_MODEL) or
from build/. Models are tiny random-weight GGUF files written per session; every server is
started on a free loopback port (--port 0, the port is read from its log), and always stopped
at the end: SIGTERM, then SIGKILL if it has not exited within the grace period.
"""

import http.client
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30


def _binary(env_name, default):
    path = os.environ.get(env_name) or str(ROOT / default)
    if not Path(path).exists():
        pytest.fail(f"{path} not found: build it first (or set {env_name})")
    return path


@pytest.fixture(scope="session")
def cli():
    return _binary("SPECDEC_CLI", "build/specdec")


@pytest.fixture(scope="session")
def models(tmp_path_factory, cli):
    """Paths of the tiny target, its 1-layer draft, a slower (wider) target, the target with a
    tool-calling chat template, and the target with a thinking (Qwen3-style) template."""
    writer = _binary("SPECDEC_WRITE_TINY_MODEL", "build/write_tiny_model")
    d = tmp_path_factory.mktemp("models")
    target, draft, slow = d / "tiny-target.gguf", d / "tiny-draft.gguf", d / "tiny-slow.gguf"
    subprocess.run([writer, str(target), "512"], check=True, timeout=60, capture_output=True)
    subprocess.run([cli, "make-draft", "-m", str(target), "--layers", "1", "-o", str(draft)],
                   check=True, timeout=60, capture_output=True)
    # n_ctx 4096, n_embd 256, 4 layers, n_ff 1024: slow enough that a long request keeps the
    # worker busy while the test fills the queue.
    # Without fill-in-the-middle markers (the others have them): `suffix` is refused on it.
    subprocess.run([writer, str(slow), "4096", "256", "4", "1024", "1", "0"], check=True, timeout=60,
                   capture_output=True)
    # The target's weights with a chat template that has Qwen2.5's tool-calling convention.
    tools = d / "tiny-tools.gguf"
    # n_ctx 2048: the tools' descriptions make long prompts in a byte-level vocabulary.
    subprocess.run([writer, str(tools), "2048", "64", "2", "128", "1", "1", "1"], check=True,
                   timeout=60, capture_output=True)
    # The same with Qwen3's <think> tags in its template: a thinking model.
    thinking = d / "tiny-thinking.gguf"
    subprocess.run([writer, str(thinking), "2048", "64", "2", "128", "1", "1", "2"], check=True,
                   timeout=60, capture_output=True)
    return {"target": str(target), "draft": str(draft), "slow": str(slow), "tools": str(tools),
            "thinking": str(thinking)}


def wait_until_healthy(base, proc, timeout_s):
    """Polls /health until 200; returns the distinct (status, body) answers seen on the way, or
    None when the process exited or the time ran out."""
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as r:
                answer = (r.status, r.read().decode())
        except urllib.error.HTTPError as e:
            answer = (e.code, e.read().decode())
        except (urllib.error.URLError, ConnectionError, OSError):
            answer = None
        if answer is not None and answer not in seen:
            seen.append(answer)
        if answer is not None and answer[0] == 200:
            return seen
        time.sleep(0.01)
    return None


class Server:
    """A running `specdec serve` process."""

    def __init__(self, cli, args, env=None):
        self.log = []
        self.proc = subprocess.Popen([cli, "serve", "--port", "0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=env)
        ready = threading.Event()
        self.port = None

        def drain():  # keeps reading so that the server never blocks on a full pipe
            for line in self.proc.stderr:
                self.log.append(line)
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    ready.set()
            ready.set()

        self.reader = threading.Thread(target=drain, daemon=True)
        self.reader.start()
        if not ready.wait(STARTUP_TIMEOUT_S) or self.port is None:
            self.stop()
            pytest.fail("server did not start:\n" + "".join(self.log))
        self.base = f"http://127.0.0.1:{self.port}"
        # It listens before loading the models: /health is 503 "loading" until they are ready.
        self.health_history = wait_until_healthy(self.base, self.proc, STARTUP_TIMEOUT_S)
        if self.health_history is None:
            self.stop()
            pytest.fail("server never became healthy:\n" + "".join(self.log))

    def stop(self):
        """Stops the server; returns its exit code (0 after a clean shutdown)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                return "killed: did not stop within %d s" % STOP_TIMEOUT_S
        self.reader.join(10)
        return self.proc.returncode

    def alive(self):
        return self.proc.poll() is None

    def get(self, path, timeout=30, headers=None):
        req = urllib.request.Request(self.base + path, headers=headers or {})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read().decode()

    def metrics(self, headers=None):
        """The /metrics samples as {series: value}."""
        out = {}
        for line in self.get("/metrics", headers=headers).splitlines():
            if line and not line.startswith("#"):
                series, value = line.rsplit(" ", 1)
                out[series] = float(value)
        return out

    def wait_idle(self, timeout=60, headers=None):
        """Waits until no generation request is queued or running and no connection but the one
        asking is open; returns the metrics. A response is counted in
        specdec_http_requests_total when its handler returns, which is after the client has read
        it: waiting for the other connections to close makes those counts final, so that deltas
        between two calls count exactly the requests made in between."""
        deadline = time.monotonic() + timeout
        while True:
            m = self.metrics(headers)
            if (m["specdec_requests_in_flight"] == 0 and m["specdec_queue_length"] == 0
                    and m["specdec_http_open_connections"] <= 1):
                return m
            if time.monotonic() > deadline:
                pytest.fail(f"server still busy after {timeout} s: {m}")
            time.sleep(0.05)


def start_server(cli, args):
    return Server(cli, args)


@pytest.fixture(scope="module")
def server(cli, models):
    """Tiny target with its draft: the server most tests use. Fixed-length model drafts: the
    random-weight draft is never confident, so the default adaptive rule would not draft at all,
    and the tests want rounds with rejections and rollbacks."""
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "--draft-max", "3",
                     "--draft-policy", "fixed", "--no-draft-hybrid", "-t", "2", "-c", "512"])
    yield s
    code = s.stop()
    assert code == 0, f"server exit: {code}\n" + "".join(s.log[-30:])


def post_json(base, path, body, headers=None, timeout=60):
    """(status, parsed JSON or raw text) of a POST with a JSON or raw body."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def check_leaving_client_frees_its_slot(cli, models, path, long_body, opening, short_body,
                                        output_tokens):
    """On a one-slot server with the slow model: a client that closes a 4000-token stream right
    after its first event (which starts with `opening`) is cancelled at once and frees the
    slot, so a short request (`short_body`, 3 tokens) is served next; `output_tokens` reads its
    generated-token count from the answer."""
    s = Server(cli, ["-m", models["slow"], "-t", "1", "-c", "4096", "--parallel", "1"])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
        conn.request("POST", path, json.dumps({**long_body, "stream": True}),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.read1(65536).startswith(opening)
        started = time.monotonic()
        conn.close()  # gone long before 4000 tokens
        m = s.wait_idle(timeout=30)
        assert time.monotonic() - started < 10
        assert m["specdec_generation_cancelled_total"] == 1
        assert m["specdec_generated_tokens_total"] < 4000
        status, doc = post_json(s.base, path, short_body)
        assert status == 200 and output_tokens(doc) == 3  # the slot is free
    finally:
        assert s.stop() == 0

