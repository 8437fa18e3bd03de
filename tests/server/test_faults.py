"""`specdec serve` under bad clients and faults, on loopback, each bounded in time and count:
slowloris (trickled headers or body), oversized and malformed HTTP, chunked bodies, invalid UTF-8
and deep JSON, memory over 1,000 sequential requests, 32 streaming clients with random
disconnects, SIGTERM draining, and /health while the models load."""

import http.client
import json
import os
import random
import signal
import socket
import threading
import time

import pytest

from conftest import Server, post_json
from test_server import sse_stream

CHAT = "/v1/chat/completions"
CMPL = "/v1/completions"
USER = [{"role": "user", "content": "Say something."}]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def raw_exchange(port, data, timeout=10, shutdown=True):
    """Sends raw bytes, returns (status or None, everything the server sent back)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
            if shutdown:
                s.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered and closed before we were done sending
            pass
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (ConnectionResetError, socket.timeout):
            pass
    status = int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/1.1 ") else None
    return status, out


def error_of(raw):
    body = raw.split(b"\r\n\r\n", 1)[1]
    return json.loads(body)["error"]


@pytest.fixture(scope="module")
def fault_server(cli, models):
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "-t", "2", "-c", "512",
                     "--request-timeout", "1.5", "--queue-size", "40", "--max-connections",
                     "96", "--draft-policy", "fixed", "--no-draft-hybrid"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


# ---------------------------------------------------------------------------------------------
# Slow clients


def test_slowloris_is_timed_out_without_delaying_others(fault_server):
    port = fault_server.port
    results = {}

    def trickle(name, head, body=b""):
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head[:20])
            rest = head[20:] + body
            answer = b""
            try:
                for i in range(len(rest)):  # one byte every 0.25 s: never completes in time
                    s.sendall(rest[i:i + 1])
                    s.settimeout(0.25)
                    try:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        answer += chunk
                        break
                    except socket.timeout:
                        pass
                s.settimeout(5)
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                pass
        results[name] = (answer, time.monotonic() - start)

    body = json.dumps({"prompt": "hi", "max_tokens": 4}).encode()
    head_only = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
    with_body = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    slow = [threading.Thread(target=trickle, args=(f"headers{i}", head_only)) for i in range(4)]
    slow += [threading.Thread(target=trickle, args=(f"body{i}", with_body, body))
             for i in range(4)]
    for t in slow:
        t.start()
    time.sleep(0.3)
    # Meanwhile everyone else is served at once.
    latencies = []
    for _ in range(10):
        t0 = time.monotonic()
        status, reply = post_json(fault_server.base, CMPL, {"prompt": "hello", "max_tokens": 4})
        latencies.append(time.monotonic() - t0)
        assert status == 200, reply
    for t in slow:
        t.join(15)
        assert not t.is_alive()
    assert max(latencies) < 1.0, latencies
    print(f"slowloris: 8 trickling clients; 10 other requests meanwhile, slowest "
          f"{max(latencies) * 1000:.0f} ms")
    for name, (answer, seconds) in results.items():
        assert answer.startswith(b"HTTP/1.1 408 "), (name, answer[:200])
        assert error_of(answer)["code"] == "request_timeout"
        assert 1.4 <= seconds < 4.0, (name, seconds)
    print("slowloris: 408 after " + ", ".join(f"{sec:.2f}" for _, sec in sorted(results.values(),
                                                                               key=lambda r: r[1])) + " s")
    m = fault_server.metrics()
    assert m["specdec_http_request_timeouts_total"] >= 8


def test_idle_connection_before_any_byte_is_closed(fault_server):
    with socket.create_connection(("127.0.0.1", fault_server.port), timeout=10) as s:
        t0 = time.monotonic()
        assert s.recv(100) == b""  # closed without a response: nothing was asked
        assert 1.4 <= time.monotonic() - t0 < 4.0


# ---------------------------------------------------------------------------------------------
# Malformed and oversized HTTP

BAD_HTTP = [
    ("header line of 100 KiB", b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n",
     431),
    ("200 header fields", b"GET /health HTTP/1.1\r\n" +
     b"".join(b"X-%d: v\r\n" % i for i in range(200)) + b"\r\n", 431),
    ("request line of 20 KiB", b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n", 414),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
    ("garbage", b"\x00\xff\xfe garbage\r\n\r\n", 400),
    ("negative Content-Length", b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
     400),
    ("two Content-Lengths", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n"
     b"Content-Length: 3\r\n\r\n{}", 400),
    ("Content-Length and chunked", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n{}", 400),
    ("gzip transfer coding", b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
     501),
    ("chunk size not hex", b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"zz\r\n{}\r\n0\r\n\r\n", 400),
    ("chunk longer than its size", b"POST /v1/completions HTTP/1.1\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}}\r\n0\r\n\r\n", 400),
    ("chunk size overflow", b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"fffffffffffffffffffff\r\n", 400),
    ("chunked body over the limit", b"POST /v1/completions HTTP/1.1\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n" + b"100001\r\n" + b"x" * 100, 413),
    ("declared body over the limit", b"POST /v1/completions HTTP/1.1\r\n"
     b"Content-Length: 99999999\r\n\r\n", 413),
    ("bare CR in a header", b"GET /health HTTP/1.1\r\nX-A: a\rb\r\n\r\n", 400),
]


@pytest.mark.parametrize("case", BAD_HTTP, ids=[c[0] for c in BAD_HTTP])
def test_bad_http_gets_4xx_or_5xx_and_the_server_stays(fault_server, case):
    name, data, status = case
    got, raw = raw_exchange(fault_server.port, data)
    assert got == status, (name, raw[:300])
    err = error_of(raw)
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    assert b"Connection: close" in raw.split(b"\r\n\r\n", 1)[0]
    assert fault_server.alive()
    assert json.loads(fault_server.get("/health")) == {"status": "ok"}


def test_endless_headers_cost_bounded_memory(fault_server):
    before = rss_kib(fault_server.proc.pid)
    with socket.create_connection(("127.0.0.1", fault_server.port), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\n")
        sent = 0
        try:
            while sent < 64 << 20:  # the unbounded parser grew by 1.2 GiB on this
                s.sendall(b"X-A: " + b"a" * 4000 + b"\r\n")
                sent += 4007
        except (BrokenPipeError, ConnectionResetError):
            pass
    assert sent < 8 << 20, "the server kept reading headers"
    grown = rss_kib(fault_server.proc.pid) - before
    print(f"endless headers: cut after {sent / 1024:.0f} KiB sent, RSS {grown:+d} KiB")
    assert grown < 16 * 1024
    assert fault_server.alive()


def test_chunked_request_bodies_work(fault_server):
    conn = http.client.HTTPConnection("127.0.0.1", fault_server.port, timeout=30)
    body = json.dumps({"prompt": "hello", "max_tokens": 3, "temperature": 0})

    def pieces():
        for i in range(0, len(body), 5):
            yield body[i:i + 5].encode()

    conn.request("POST", CMPL, pieces(), {"Content-Type": "application/json"},
                 encode_chunked=True)
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    assert resp.status == 200, raw
    plain_status, plain = post_json(fault_server.base, CMPL, json.loads(body))
    assert plain_status == 200
    assert json.loads(raw)["choices"][0]["text"] == plain["choices"][0]["text"]


def test_expect_100_continue(fault_server):
    body = json.dumps({"prompt": "hello", "max_tokens": 2}).encode()
    with socket.create_connection(("127.0.0.1", fault_server.port), timeout=10) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 "), answer


def test_pipelined_requests_on_one_connection(fault_server):
    get = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    status, raw = raw_exchange(fault_server.port, get * 3)
    assert status == 200
    assert raw.count(b"HTTP/1.1 200 OK") == 3, raw


@pytest.mark.parametrize("body,code", [
    (b'{"prompt": "\xff\xfe bad utf-8"}', "invalid_json"),
    (b'{"messages": [{"role": "user", "content": "\xc3\x28"}]}', "invalid_json"),
    (b'{"prompt": "x", "stop": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "invalid_json"),
    (b'{"prompt": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_000 + b"}", "invalid_json"),
], ids=["invalid utf-8 prompt", "invalid utf-8 message", "deep arrays", "deep objects"])
def test_invalid_utf8_and_deep_json_get_400(fault_server, body, code):
    path = CHAT if b"messages" in body else CMPL
    conn = http.client.HTTPConnection("127.0.0.1", fault_server.port, timeout=30)
    conn.request("POST", path, body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    assert resp.status == 400, raw[:300]
    assert json.loads(raw)["error"]["code"] == code
    assert fault_server.alive()


# ---------------------------------------------------------------------------------------------
# Load


def test_a_thousand_sequential_requests_leave_memory_where_it_settled(fault_server):
    if os.environ.get("SPECDEC_SANITIZED") == "1":
        # ASan keeps freed memory in quarantine by design, so RSS climbs there until the
        # quarantine is full; the Release pass of the same suite checks the 5 % bound.
        pytest.skip("sanitizer build: RSS is not the program's")
    pid = fault_server.proc.pid

    def one(i):
        if i % 3 == 0:  # a fresh connection each time: connection threads come and go
            status, _ = post_json(fault_server.base, CMPL,
                                  {"prompt": f"request {i}", "max_tokens": 4})
            assert status == 200
        else:
            status, _ = post_json(fault_server.base, CHAT,
                                  {"messages": [{"role": "user", "content": f"turn {i}"}],
                                   "max_tokens": 4})
            assert status == 200

    for i in range(200):  # warm-up: allocator pools, the prefix cache, thread stacks
        one(i)
    settled = rss_kib(pid)
    for i in range(1000):
        one(i)
    after = rss_kib(pid)
    print(f"RSS settled {settled} KiB, after 1000 more requests {after} KiB "
          f"({(after - settled) / settled * 100:+.2f} %)")
    assert abs(after - settled) <= 0.05 * settled, (settled, after)


def test_32_streaming_clients_with_random_disconnects(fault_server):
    rng = random.Random(17)
    plan = [rng.choice([None, None, 1, 3]) for _ in range(32)]
    outcomes = [None] * 32
    before = fault_server.metrics()

    def client(i):
        body = {"prompt": f"client {i} says", "max_tokens": 48, "ignore_eos": True,
                "temperature": 0.7, "seed": i}
        outcomes[i] = sse_stream(fault_server.port, CMPL, body, close_after=plan[i])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive()
    for i, (status, events, done) in enumerate(outcomes):
        assert status == 200, (i, events)
        if plan[i] is None:
            assert done, i
            assert events[-1]["choices"][0]["finish_reason"] == "length"
        elif done:
            # The whole answer came in fewer events than this client meant to wait for (the
            # text a stream sends per event is whatever was generated since the last one, so a
            # short generation can finish before its connection thread wakes): a normal end.
            assert events[-1]["choices"][0]["finish_reason"] == "length", (i, events)
        else:
            assert len(events) >= plan[i], (i, events)
    # Every admitted request ended exactly once, and the counts add up. Connections whose
    # client left may still be closing (a lingering close reads for up to 0.5 s): wait for both,
    # bounded.
    deadline = time.monotonic() + 10
    while True:
        m = fault_server.metrics()
        settled = m["specdec_requests_in_flight"] == 0 and m["specdec_http_open_connections"] <= 2
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    delta = {k: m[k] - before.get(k, 0) for k in m if k.startswith("specdec_generation")}
    assert m["specdec_requests_in_flight"] == 0
    assert delta["specdec_generation_requests_total"] == 32
    assert (delta["specdec_generation_finished_total"] + delta["specdec_generation_cancelled_total"]
            + delta["specdec_generation_failed_total"]) == 32
    assert delta["specdec_generation_failed_total"] == 0
    assert delta["specdec_generation_finished_total"] >= plan.count(None)
    assert m["specdec_http_open_connections"] <= 2  # this /metrics call and maybe one closing
    # Every job that ran was timed from admission to start and, if it produced text, to its
    # first text; a job cancelled while queued never ran. The slot is free again.
    started = m["specdec_queue_wait_seconds_count"] - before.get("specdec_queue_wait_seconds_count", 0)
    first = (m["specdec_time_to_first_token_seconds_count"]
             - before.get("specdec_time_to_first_token_seconds_count", 0))
    assert plan.count(None) <= started <= 32
    assert plan.count(None) <= first <= started
    assert m["specdec_slots_busy"] == 0
    print(f"32 streaming clients, {32 - plan.count(None)} disconnecting: finished "
          f"{delta['specdec_generation_finished_total']:.0f}, cancelled "
          f"{delta['specdec_generation_cancelled_total']:.0f}, failed 0")
    assert fault_server.alive()


def test_over_max_connections_gets_503(cli, models):
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "256", "--max-connections", "2"])
    try:
        # The start-up health checks' connections may still be closing: retry until both
        # slots are ours.
        deadline = time.monotonic() + 10
        while True:
            held = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(2)]
            answers = []
            for h in held:
                h.sendall(b"GET /health HTTP/1.1\r\n\r\n")
                answers.append(h.recv(4096))
            if all(a.startswith(b"HTTP/1.1 200") for a in answers):
                break  # keep-alive: both slots stay taken
            for h in held:
                h.close()
            assert time.monotonic() < deadline, answers
            time.sleep(0.2)
        status, raw = raw_exchange(s.port, b"GET /health HTTP/1.1\r\n\r\n")
        assert status == 503 and error_of(raw)["code"] == "too_many_connections"
        for h in held:
            h.close()
        time.sleep(0.3)
        assert json.loads(s.get("/health")) == {"status": "ok"}
        assert s.metrics()["specdec_http_connections_rejected_total"] >= 1
    finally:
        assert s.stop() == 0


# ---------------------------------------------------------------------------------------------
# Shutdown and startup


def stream_raw(port, body, started, outcomes, key):
    """Streams a completion; sets `started` once the response headers arrived (the request was
    admitted: running or queued); outcomes[key] = (status, bytes), whatever the server sent
    before it finished or cut the connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", CMPL, json.dumps({**body, "ignore_eos": True, "stream": True}),
                 {"Content-Type": "application/json"})
    resp = conn.getresponse()
    started.set()
    data = b""
    try:
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            data += chunk
    except (http.client.IncompleteRead, ConnectionResetError):
        pass
    outcomes[key] = (resp.status, data)
    conn.close()


def test_sigterm_drains_in_flight_streams_then_exits_0(cli, models):
    s = Server(cli, ["-m", models["slow"], "-t", "2", "-c", "1024", "--shutdown-grace", "30",
                     "--parallel", "1"])
    outcomes = {}
    # Both requests must be admitted (one running, one queued behind it): a connection still in
    # the listen backlog when SIGTERM closes the socket is refused, which is the point of "stop
    # accepting", not of this test.
    started = [threading.Event() for _ in range(2)]
    threads = [threading.Thread(target=stream_raw, args=(
        s.port, {"prompt": f"drain {i}", "max_tokens": 400}, started[i], outcomes, i))
        for i in range(2)]
    for t in threads:
        t.start()
    assert all(e.wait(30) for e in started)
    t_signal = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    with pytest.raises(OSError):  # no new connections
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
    for t in threads:
        t.join(60)
    code = s.proc.wait(60)
    assert code == 0, "".join(s.log[-20:])
    assert len(outcomes) == 2
    for i, (status, data) in outcomes.items():
        assert status == 200
        assert data.rstrip().endswith(b"data: [DONE]"), (i, data[-300:])
        assert b'"finish_reason":"length"' in data
    print(f"drained 2 streams (one running, one queued), exit 0 after "
          f"{time.monotonic() - t_signal:.2f} s")


def test_sigterm_grace_period_bounds_the_drain(cli, models):
    s = Server(cli, ["-m", models["slow"], "-t", "2", "-c", "4096", "--shutdown-grace", "0.5"])
    started = threading.Event()
    outcomes = {}
    t = threading.Thread(target=stream_raw, args=(
        s.port, {"prompt": "long", "max_tokens": 4000}, started, outcomes, "long"))
    t.start()
    assert started.wait(30)
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    code = s.proc.wait(30)
    elapsed = time.monotonic() - t0
    t.join(30)
    assert code == 0
    assert elapsed < 5, elapsed
    print(f"grace 0.5 s: a 4000-token stream cut, exit 0 after {elapsed:.2f} s")
    data = outcomes["long"][1]
    assert b'"finish_reason":"length"' not in data  # cut short, and it says why:
    assert b'"code":"shutting_down"' in data


def test_health_says_loading_until_the_models_are_ready(cli):
    d = os.environ.get("SPECDEC_MODELS") or os.path.expanduser("~/.cache/specdec/models")
    model = os.environ.get("SPECDEC_MODEL_QWEN_TARGET") or os.path.join(
        d, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    if not os.path.exists(model):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{model} missing in CI (scripts/test.sh fetches it)")
        pytest.skip(f"{model} not found (scripts/fetch-models.sh qwen2.5-coder-1.5b)")
    s = Server(cli, ["-m", model, "-t", "2", "-c", "512"])
    try:
        history = s.health_history
        print("health answers while starting:", history)
        assert history[0] == (503, '{"status":"loading"}'), history
        assert history[-1] == (200, '{"status":"ok"}')
    finally:
        assert s.stop() == 0
