"""Three `specdec serve` replicas behind nginx (scripts/deploy/replicas.sh), one killed mid-run.

The test starts the replicas and nginx with the deploy script, checks that the turns of a
conversation (same X-Conversation-Id) stay on one replica, then runs streaming and
non-streaming requests from 8 client threads through nginx, SIGKILLs one replica while it
streams, and checks what docs/deploy.md promises: every request either succeeds completely or
is a stream that the killed replica had started (cut without `data: [DONE]`); requests sent
after the kill all succeed on the live replicas (non-streamed requests the killed replica held
are retried by nginx); once the replica is restarted on its port and fail_timeout has passed,
its conversations come back to it; a graceful restart (SIGTERM, drain) of another replica
loses nothing; and stopping the script leaves no process behind. `pytest -s` prints the
numbers (docs/deploy.md has a measured run).

Needs nginx (Debian: nginx-light). Without it the test is skipped, unless SPECDEC_REQUIRE_NGINX
is set (scripts/test.sh sets it), which makes a missing nginx a failure.
"""

import collections
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "deploy" / "replicas.sh"

REPLICAS = 3
CLIENTS = 8
FAIL_TIMEOUT_S = 3         # nginx fail_timeout: how long a failed replica stays out
MAX_TOKENS = 256           # per load request (ignore_eos: exactly this many)
WARMUP_REQUESTS = CLIENTS  # finished before the kill may happen
POST_KILL_REQUESTS = 3     # each client sends at least this many after the kill
LONG_STREAM_TOKENS = 3000  # the stream that is running when the victim is killed
REQUEST_TIMEOUT_S = 30     # socket timeout of every request
START_TIMEOUT_S = 60
LOAD_DEADLINE_S = 60       # the whole load phase, kill included


def find_nginx():
    path = shutil.which("nginx")
    if path is None and os.access("/usr/sbin/nginx", os.X_OK):
        path = "/usr/sbin/nginx"
    return path


@pytest.fixture(scope="module")
def nginx():
    path = find_nginx()
    if path is None:
        if os.environ.get("SPECDEC_REQUIRE_NGINX", "") not in ("", "0"):
            pytest.fail("nginx not found and SPECDEC_REQUIRE_NGINX is set "
                        "(Debian: apt-get install nginx-light)")
        pytest.skip("nginx not found (Debian: apt-get install nginx-light); "
                    "SPECDEC_REQUIRE_NGINX=1 turns this skip into a failure")
    return path


def free_port_block(n):
    """n consecutive free loopback ports below the ephemeral range."""
    for _ in range(200):
        base = random.randint(20000, 32000 - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return list(range(base, base + n))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.fail(f"no block of {n} free ports found")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def ours(pid):
    """Whether pid is still one of our replicas or nginx (not a later process with its pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return b"specdec" in cmd or b"nginx" in cmd


class Cluster:
    """replicas.sh start, in its own session; stop() always leaves no process behind."""

    def __init__(self, cli, nginx, tmp_path, serve_args):
        ports = free_port_block(REPLICAS + 1)
        self.port, self.replica_ports = ports[0], ports[1:]
        self.run_dir = tmp_path / "run"
        self.out = tmp_path / "supervisor.out"
        self.err = tmp_path / "supervisor.err"
        self.seen_pids = set()
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(
                ["bash", str(SCRIPT), "start", "--replicas", str(REPLICAS),
                 "--port", str(self.port), "--base-port", str(self.replica_ports[0]),
                 "--run-dir", str(self.run_dir), "--cli", cli, "--nginx", nginx,
                 "--fail-timeout", str(FAIL_TIMEOUT_S), "--start-timeout", str(START_TIMEOUT_S),
                 "--stop-timeout", "20", "--", *serve_args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S + 15
        while not self.out.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail("replicas.sh did not come up:\n" + self.logs())
            time.sleep(0.1)
        self.url = self.out.read_text().split()[0]
        assert self.url == f"http://127.0.0.1:{self.port}"
        self.pids()

    def pid_of(self, i):
        return int((self.run_dir / f"replica-{i}.pid").read_text())

    def pids(self):
        """Every pid the run directory names now (remembered, for the final check)."""
        found = []
        for name in [f"replica-{i}.pid" for i in range(1, REPLICAS + 1)] + ["nginx.pid"]:
            try:
                found.append(int((self.run_dir / name).read_text()))
            except (FileNotFoundError, ValueError):
                pass
        self.seen_pids.update(found)
        return found

    def script(self, *args, timeout=90):
        return subprocess.run(["bash", str(SCRIPT), *args, "--run-dir", str(self.run_dir)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)

    def logs(self):
        parts = []
        for p in [self.err, *sorted(self.run_dir.glob("*.log"))]:
            if p.exists():
                parts.append(f"--- {p.name}\n" + "".join(p.read_text().splitlines(True)[-15:]))
        return "\n".join(parts)

    def stop(self):
        """SIGTERM to the supervisor (it stops nginx and the replicas); returns its exit code.
        Whatever is still running afterwards (a supervisor that failed) is SIGKILLed."""
        self.pids()
        code = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(45)
            except subprocess.TimeoutExpired:
                code = "did not stop within 45 s"
        else:
            code = self.proc.returncode
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(10)
        for pid in self.seen_pids:
            if alive(pid) and ours(pid):
                os.kill(pid, signal.SIGKILL)
        return code


@pytest.fixture
def cluster(cli, models, nginx, tmp_path):
    c = Cluster(cli, nginx, tmp_path, ["-m", models["slow"], "-t", "1", "-c", "4096"])
    try:
        yield c
    finally:
        c.stop()


# ---------------------------------------------------------------------------------------------
# One request through nginx


@dataclass
class Result:
    key: str
    path: str
    stream: bool
    t_send: float
    t_end: float = 0.0
    status: int = 0
    upstream: list = field(default_factory=list)  # ports nginx tried, the answering one last
    ok: bool = False
    cut: bool = False  # a 200 stream that ended without [DONE] when its connection closed
    events: int = 0
    reason: str = ""
    body: object = None
    client: int = -1

    @property
    def port(self):
        return self.upstream[-1] if self.upstream else None


def parse_upstream(header):
    # "127.0.0.1:A, 127.0.0.1:B" (A failed, B answered); " : " separates internal redirects.
    return [int(a.strip().rsplit(":", 1)[1]) for a in (header or "").replace(" : ", ",").split(",")
            if a.strip()]


def send(port, path, body, key=None, stream=False, max_tokens=MAX_TOKENS, on_event=None):
    body = {**body, "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0,
            "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["X-Conversation-Id"] = key
    r = Result(key=key, path=path, stream=stream, t_send=time.monotonic())
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_S)
    try:
        conn.request("POST", path, json.dumps(body), headers)
        resp = conn.getresponse()
        r.status = resp.status
        r.upstream = parse_upstream(resp.getheader("X-Specdec-Upstream"))
        if resp.status != 200:
            r.reason = f"HTTP {resp.status}: {resp.read()[:300]!r}"
            return r
        if not stream:
            r.body = json.loads(resp.read())
            check_completion(path, r.body, max_tokens)
            r.ok = True
            return r
        events, buf, done = [], b"", False
        try:
            while not done:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while b"\n\n" in buf:
                    raw, buf = buf.split(b"\n\n", 1)
                    line = raw.decode()
                    assert line.startswith("data: "), line
                    if line == "data: [DONE]":
                        done = True
                        break
                    events.append(json.loads(line[len("data: "):]))
                    r.events = len(events)
                    if on_event is not None:
                        on_event(r)
        except (http.client.IncompleteRead, ConnectionError) as e:
            r.cut = True
            r.reason = f"stream cut after {len(events)} events ({type(e).__name__})"
            return r
        if not done:
            r.cut = True
            r.reason = f"stream ended after {len(events)} events without [DONE]"
            return r
        check_stream(path, events, max_tokens)
        r.body = events
        r.ok = True
        return r
    except Exception as e:  # noqa: BLE001 - every other failure is recorded and fails the test
        r.reason = f"{type(e).__name__}: {e}"
        return r
    finally:
        conn.close()
        r.t_end = time.monotonic()


def check_completion(path, body, max_tokens):
    assert "error" not in body, body
    choice = body["choices"][0]
    if path.endswith("/chat/completions"):
        assert body["object"] == "chat.completion"
        assert isinstance(choice["message"]["content"], str)
    else:
        assert body["object"] == "text_completion"
        assert isinstance(choice["text"], str)
    assert choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == max_tokens


def check_stream(path, events, max_tokens):
    assert events and all("error" not in e for e in events), events[-1:]
    assert all(e["id"] == events[0]["id"] for e in events)
    finishes = [c["finish_reason"] for e in events for c in e["choices"] if c.get("finish_reason")]
    assert finishes == ["length"], finishes
    assert events[-1]["usage"]["completion_tokens"] == max_tokens
    kind = "chat.completion.chunk" if path.endswith("/chat/completions") else "text_completion"
    assert all(e["object"] == kind for e in events)


def chat_body(text, history=()):
    return {"messages": [*history, {"role": "user", "content": text}]}


def reply_text(r):
    if r.stream:
        return "".join(c.get("delta", {}).get("content") or "" for e in r.body
                       for c in e["choices"])
    return r.body["choices"][0]["message"]["content"]


# ---------------------------------------------------------------------------------------------


def test_replicas_behind_nginx_survive_a_killed_replica(cluster):
    t0 = time.monotonic()
    url_port = cluster.port
    ports = cluster.replica_ports
    index_of = {p: i + 1 for i, p in enumerate(ports)}
    conf = (cluster.run_dir / "nginx.conf").read_text()
    for p in ports:
        assert f"server 127.0.0.1:{p} max_fails=3 fail_timeout={FAIL_TIMEOUT_S}s;" in conf
    assert "non_idempotent" in conf and "hash $conv_key consistent;" in conf

    # 1. Affinity: the turns of a conversation stay on one replica (the one holding its prefix).
    home = {}
    histories = {}
    for n in range(40):
        key = f"conv-{n:02d}"
        r = send(url_port, "/v1/chat/completions", chat_body(f"Conversation {n}: hello"), key,
                 max_tokens=8)
        assert r.ok and len(r.upstream) == 1, r
        home[key] = r.port
        histories[key] = [{"role": "user", "content": f"Conversation {n}: hello"},
                          {"role": "assistant", "content": reply_text(r)}]
        per = collections.Counter(home.values())
        if len(home) >= 9 and all(per[p] >= 2 for p in ports):
            break
    per = collections.Counter(home.values())
    assert all(per[p] >= 1 for p in ports), f"some replica got no conversation: {per}"
    for key in home:
        for turn, stream in ((2, True), (3, False)):
            r = send(url_port, "/v1/chat/completions",
                     chat_body(f"turn {turn}", histories[key]), key, stream=stream, max_tokens=8)
            assert r.ok, r
            assert r.upstream == [home[key]], (key, turn, r.upstream, home[key])
            histories[key] += [{"role": "user", "content": f"turn {turn}"},
                               {"role": "assistant", "content": reply_text(r)}]
    keyless = [send(url_port, "/v1/completions", {"prompt": "spread"}, None, max_tokens=4)
               for _ in range(12)]
    assert all(r.ok for r in keyless), [r.reason for r in keyless if not r.ok]
    assert len({r.port for r in keyless}) >= 2, "keyless requests all went to one replica"

    print(f"\n[replicas] affinity: {len(home)} conversations x 3 turns, every turn on its "
          f"conversation's replica (per replica: {[per[p] for p in ports]}); 12 requests "
          f"without X-Conversation-Id went to {len({r.port for r in keyless})} replicas")

    victim_port = max(ports, key=lambda p: per[p])
    victim = index_of[victim_port]
    victim_keys = [k for k, p in home.items() if p == victim_port]
    victim_pid = cluster.pid_of(victim)
    keys = sorted(home)

    # 2. Load through nginx; SIGKILL the victim while one of its streams is running.
    lock = threading.Lock()
    results = []
    killed_at = [None]
    stop_at = time.monotonic() + LOAD_DEADLINE_S

    # The stream the kill must cut: one of the victim's conversations asking for far more tokens
    # than the load requests, so that the replica is still generating it when the kill comes
    # right after its first event. (Killing at some load stream's event was not enough: a client
    # reads behind the server, and on a loaded machine a whole 256-token answer could already sit
    # in socket buffers while the client parsed its first events.)
    long_started = threading.Event()

    def long_stream():
        r = send(url_port, "/v1/completions", {"prompt": "A very long story:"}, victim_keys[0],
                 stream=True, max_tokens=LONG_STREAM_TOKENS,
                 on_event=lambda _: long_started.set())
        with lock:
            results.append(r)

    def client_loop(t):
        rng = random.Random(t)
        j = 0
        while time.monotonic() < stop_at:
            k = killed_at[0]
            if k is not None:
                with lock:
                    after = sum(1 for r in results if r.client == t and r.t_send > k)
                if after >= POST_KILL_REQUESTS:
                    return
            key = rng.choice(keys)
            stream = (t + j) % 2 == 0
            path = "/v1/chat/completions" if (t // 2 + j) % 2 else "/v1/completions"
            body = (chat_body(f"client {t} request {j}") if "chat" in path
                    else {"prompt": f"client {t} request {j}:"})
            r = send(url_port, path, body, key, stream=stream)
            r.client = t
            with lock:
                results.append(r)
            j += 1

    threads = [threading.Thread(target=client_loop, args=(t,), daemon=True)
               for t in range(CLIENTS)]
    for th in threads:
        th.start()
    while True:
        with lock:
            done = len(results)
        if done >= WARMUP_REQUESTS or time.monotonic() > stop_at:
            break
        time.sleep(0.01)
    long_thread = threading.Thread(target=long_stream, daemon=True)
    long_thread.start()
    assert long_started.wait(max(1.0, stop_at - time.monotonic())), \
        "the long stream to the victim replica did not start"
    os.kill(victim_pid, signal.SIGKILL)
    # Requests sent from here on count as "after the kill": wait until the process is gone (its
    # sockets closed), so that none of them can still reach it.
    gone_by = time.monotonic() + 10
    while alive(victim_pid) and time.monotonic() < gone_by:
        time.sleep(0.001)
    assert not alive(victim_pid), "SIGKILLed replica still running"
    killed_at[0] = time.monotonic()
    for th in threads + [long_thread]:
        th.join(max(1.0, stop_at - time.monotonic() + REQUEST_TIMEOUT_S))
    assert not any(th.is_alive() for th in threads + [long_thread]), \
        "clients still running at the deadline"
    t_load = time.monotonic() - killed_at[0]

    # 3. The outcome.
    kill = killed_at[0]
    before = [r for r in results if r.t_send <= kill]
    after = [r for r in results if r.t_send > kill]
    failed = [r for r in results if not r.ok]
    retried = [r for r in results if r.ok and len(r.upstream) > 1]
    lines = [
        f"replicas on ports {ports}; killed replica {victim} (port {victim_port}, "
        f"{len(victim_keys)} of {len(home)} conversations) with SIGKILL while it streamed",
        f"sent {len(results)} requests ({sum(r.stream for r in results)} streaming), "
        f"{len(before)} before the kill, {len(after)} after",
        f"succeeded {len(results) - len(failed)}, failed {len(failed)}, "
        f"retried by nginx and succeeded {len(retried)}",
    ]
    for r in failed:
        lines.append(f"  failed: {'stream' if r.stream else 'non-stream'} {r.path} "
                     f"key={r.key} upstream={r.upstream} sent {r.t_send - kill:+.3f}s "
                     f"from the kill: {r.reason}")
    for r in retried:
        lines.append(f"  retried: {'stream' if r.stream else 'non-stream'} {r.path} "
                     f"key={r.key} upstream={r.upstream} sent {r.t_send - kill:+.3f}s "
                     f"from the kill")
    by_port_after = collections.Counter(r.port for r in after)
    lines.append(f"after the kill, answered by port: {dict(by_port_after)}")
    print("[replicas] " + "\n[replicas] ".join(lines))

    for r in failed:
        assert r.cut and r.status == 200, f"not a clean failure: {r}\n" + cluster.logs()
        assert r.stream and r.port == victim_port and r.t_send <= kill, \
            f"only streams from the killed replica may fail: {r}"
    assert any(r.cut for r in failed), "the victim's running stream was not cut"
    assert all(r.ok and r.port != victim_port for r in after), \
        [r for r in after if not r.ok or r.port == victim_port]
    assert len(after) >= CLIENTS * POST_KILL_REQUESTS

    # 4. Restart the victim on its port; past fail_timeout its conversations come back to it.
    res = cluster.script("restart-replica", str(victim), timeout=START_TIMEOUT_S + 10)
    assert res.returncode == 0, res.stdout + res.stderr
    new_pid = cluster.pid_of(victim)
    assert new_pid != victim_pid and alive(new_pid)
    cluster.pids()
    restarted_at = time.monotonic()
    time.sleep(FAIL_TIMEOUT_S + 0.5)
    deadline = time.monotonic() + 2 * FAIL_TIMEOUT_S + 10
    back = None
    while back is None and time.monotonic() < deadline:
        for key in victim_keys:
            r = send(url_port, "/v1/completions", {"prompt": "are you back?"}, key, max_tokens=4)
            assert r.ok, r
            if r.port == victim_port:
                back = time.monotonic() - restarted_at
                break
        else:
            time.sleep(0.5)
    assert back is not None, "the restarted replica got no request:\n" + cluster.logs()
    homes_again = {k: send(url_port, "/v1/completions", {"prompt": "home"}, k, max_tokens=4).port
                   for k in victim_keys}
    assert all(p == victim_port for p in homes_again.values()), homes_again
    print(f"[replicas] restarted replica {victim} answered {back:.1f}s after its restart "
          f"(fail_timeout {FAIL_TIMEOUT_S}s); all {len(victim_keys)} of its conversations are "
          f"back on it")

    # 5. A graceful restart (SIGTERM: the replica drains) of another replica loses nothing: its
    # running stream finishes, and requests sent meanwhile go to the others.
    other_port = next(p for p in ports if p != victim_port and per[p] >= 1)
    other = index_of[other_port]
    other_key = next(k for k, p in home.items() if p == other_port)
    running = threading.Event()
    drained = {}

    def long_stream():
        drained["r"] = send(url_port, "/v1/completions", {"prompt": "drain me"}, other_key,
                            stream=True, on_event=lambda r: running.set())

    th = threading.Thread(target=long_stream, daemon=True)
    th.start()
    assert running.wait(REQUEST_TIMEOUT_S), "the stream to drain did not start"
    restart = {}
    rt = threading.Thread(target=lambda: restart.update(
        res=cluster.script("restart-replica", str(other), timeout=START_TIMEOUT_S + 30)),
        daemon=True)
    rt.start()
    during = []
    while rt.is_alive() and len(during) < 200:
        during.append(send(url_port, "/v1/completions", {"prompt": "meanwhile"}, other_key,
                           stream=len(during) % 2 == 1, max_tokens=16))
    rt.join(START_TIMEOUT_S + 30)
    th.join(REQUEST_TIMEOUT_S)
    assert restart["res"].returncode == 0, restart["res"].stdout + restart["res"].stderr
    cluster.pids()
    assert drained["r"].ok and drained["r"].upstream == [other_port], drained["r"]
    assert during and all(r.ok for r in during), [r for r in during if not r.ok]
    print(f"[replicas] graceful restart of replica {other}: its running stream finished "
          f"({drained['r'].events} events, [DONE]); {len(during)} requests sent during the "
          f"restart all succeeded, answered by ports "
          f"{dict(collections.Counter(r.port for r in during))}")

    st = cluster.script("status", timeout=30)
    assert st.returncode == 0, st.stdout + st.stderr

    # 6. Stop: everything ends, nginx included.
    code = cluster.stop()
    assert code == 0, f"replicas.sh exit: {code}\n" + cluster.logs()
    assert not [p for p in cluster.seen_pids if alive(p) and ours(p)]
    print(f"[replicas] load phase {t_load:.1f}s after the kill; whole test "
          f"{time.monotonic() - t0:.1f}s")
