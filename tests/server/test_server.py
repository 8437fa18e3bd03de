"""End-to-end tests of `specdec serve` (through the openai client and raw HTTP) and `specdec chat`."""

import http.client
import json
import os
import socket
import subprocess
import threading
import time

import openai
import pytest

from conftest import Server, post_json

TIMEOUT = 60  # seconds, for every request


def client(server, key="unused"):
    return openai.OpenAI(base_url=server.base + "/v1", api_key=key, timeout=TIMEOUT,
                         max_retries=0)


def greedy_completion(server, prompt, max_tokens=24, **extra):
    status, body = post_json(server.base, "/v1/completions",
                             {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                              "ignore_eos": True, **extra})
    assert status == 200, body
    return body


def sse_stream(port, path, body, headers=None, close_after=None):
    """POSTs a streaming request and parses its server-sent events.

    Returns (status, events, done): events are the parsed JSON payloads, done whether the
    stream ended with "data: [DONE]". close_after=k closes the connection after k events.
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("POST", path, json.dumps({**body, "stream": True}),
                     {"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, [json.loads(resp.read())], False
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        events, done, buf = [], False, b""
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
                if close_after is not None and len(events) >= close_after:
                    return resp.status, events, False
        assert buf == b"", buf  # nothing after [DONE]
        return resp.status, events, done
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# The OpenAI API through the openai client


def test_health_and_models(server, models):
    assert json.loads(server.get("/health")) == {"status": "ok"}
    ids = [m.id for m in client(server).models.list().data]
    assert ids == ["tiny-target"]


def test_completions_streaming_matches_non_streaming(server):
    c = client(server)
    whole = c.completions.create(model="tiny-target", prompt="Once upon a time", max_tokens=20,
                                 temperature=0, extra_body={"ignore_eos": True})
    choice = whole.choices[0]
    assert choice.finish_reason == "length"
    assert whole.usage.completion_tokens == 20
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + 20
    assert whole.object == "text_completion"
    spec = whole.model_extra["specdec"]
    assert spec["speculative"] is True and spec["rounds"] > 0
    assert spec["drafted"] >= spec["accepted"] >= 0
    assert spec["tokens_per_second"] > 0

    pieces, finish = [], None
    for chunk in c.completions.create(model="specdec", prompt="Once upon a time", max_tokens=20,
                                      temperature=0, stream=True,
                                      extra_body={"ignore_eos": True}):
        if chunk.choices:
            pieces.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
    assert "".join(pieces) == choice.text
    assert finish == "length"


def test_chat_streaming_matches_non_streaming(server):
    c = client(server)
    msgs = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name three colors."}]
    whole = c.chat.completions.create(model="tiny-target", messages=msgs, max_tokens=16,
                                      temperature=0)
    assert whole.object == "chat.completion"
    assert whole.choices[0].message.role == "assistant"
    assert whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens <= 16

    text, roles, usage = "", set(), None
    stream = c.chat.completions.create(model="tiny-target", messages=msgs, max_tokens=16,
                                       temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None and not chunk.choices:
            usage = chunk.usage
        for ch in chunk.choices:
            text += ch.delta.content or ""
            if ch.delta.role:
                roles.add(ch.delta.role)
    assert text == whole.choices[0].message.content
    assert roles <= {"assistant"}
    assert usage is not None and usage.total_tokens == whole.usage.total_tokens


def test_speculative_and_plain_give_identical_text_at_temperature_0(server):
    for prompt in ["The capital of France is", "abc abc abc", "1, 2, 3, 4,", "hello"]:
        plain = greedy_completion(server, prompt, 40, speculative=False)
        assert plain["specdec"]["rounds"] == 0 and plain["specdec"]["speculative"] is False
        for gamma in (1, 3, 6):
            spec = greedy_completion(server, prompt, 40, draft_max=gamma)
            assert spec["choices"][0]["text"] == plain["choices"][0]["text"], (prompt, gamma)
            assert spec["specdec"]["rounds"] > 0
            assert spec["specdec"]["draft_max"] == gamma


def test_default_gamma_depends_on_the_temperature(cli, models):
    """Without --draft-max, a greedy request drafts up to 4 tokens a round and a sampled one up to
    8 (cli/engine_setup.h: measured on the Qwen pair); a request's draft_max still wins."""
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "--draft-policy", "fixed",
                     "--no-draft-hybrid", "-t", "2", "-c", "256"])
    try:
        assert greedy_completion(s, "hello", 12)["specdec"]["draft_max"] == 4
        assert greedy_completion(s, "hello", 12, draft_max=6)["specdec"]["draft_max"] == 6
        status, body = post_json(s.base, "/v1/completions",
                                 {"prompt": "hello", "max_tokens": 12, "temperature": 0.7,
                                  "seed": 3})
        assert status == 200, body
        assert body["specdec"]["draft_max"] == 8
    finally:
        assert s.stop() == 0, "".join(s.log[-30:])


def test_stop_strings_and_seeds(server):
    text = greedy_completion(server, "Once upon a time", 40)["choices"][0]["text"]
    stop = text[10:13]
    cut = greedy_completion(server, "Once upon a time", 40, stop=[stop, "never-seen"])
    assert cut["choices"][0]["text"] == text[:text.index(stop)]
    assert cut["choices"][0]["finish_reason"] == "stop"

    sampled = {"prompt": "Once", "max_tokens": 24, "temperature": 1.0, "seed": 7,
               "ignore_eos": True}
    a = post_json(server.base, "/v1/completions", sampled)[1]["choices"][0]["text"]
    b = post_json(server.base, "/v1/completions", sampled)[1]["choices"][0]["text"]
    assert a == b


# ---------------------------------------------------------------------------------------------
# Concurrency: one worker, many clients, some of which go away


def test_sixteen_concurrent_streaming_clients_some_disconnecting(server):
    prompts = [f"Story number {i}:" for i in range(16)]
    expected = {p: greedy_completion(server, p, 48)["choices"][0]["text"] for p in prompts}
    before = server.wait_idle()
    results = [None] * 16

    def run(i):
        body = {"prompt": prompts[i], "max_tokens": 48, "temperature": 0, "ignore_eos": True}
        endpoint = "/v1/completions"
        # Every fourth client disconnects after its first event.
        results[i] = sse_stream(server.port, endpoint, body,
                                close_after=1 if i % 4 == 3 else None)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT * 2)
    assert not any(t.is_alive() for t in threads)
    assert server.alive()

    for i, (status, events, done) in enumerate(results):
        assert status == 200
        if i % 4 == 3:
            continue
        assert done, f"client {i}: no [DONE]"
        text = "".join(e["choices"][0]["text"] for e in events if e["choices"])
        assert text == expected[prompts[i]], i
        last = events[-1]
        assert last["choices"][0]["finish_reason"] == "length"
        assert last["usage"]["completion_tokens"] == 48
        assert all(e["id"] == events[0]["id"] for e in events)

    after = server.wait_idle()  # the streams' handlers have returned: their counts are final
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    ok_key = 'specdec_http_requests_total{endpoint="/v1/completions",status="200"}'
    assert delta["specdec_generation_requests_total"] == 16
    assert (delta["specdec_generation_finished_total"] + delta["specdec_generation_cancelled_total"]
            == 16)
    assert delta["specdec_generation_failed_total"] == 0
    assert delta["specdec_generation_finished_total"] >= 12
    assert delta[ok_key] == 16
    assert delta["specdec_generated_tokens_total"] >= 12 * 48
    # Passes carried several sequences' rows at once (continuous batching). How much they
    # drafted depends on how the requests overlapped: with every slot busy the batch γ rule
    # drafts nothing for greedy requests, so a lone request shows the server still speculates
    # after the disconnects, with the text it gave alone before.
    assert delta["specdec_target_pass_rows_sum"] > delta["specdec_target_pass_rows_count"]
    lone = greedy_completion(server, prompts[0], 48)
    assert lone["choices"][0]["text"] == expected[prompts[0]]
    assert server.wait_idle()["specdec_speculative_rounds_total"] > \
        after["specdec_speculative_rounds_total"]
    assert after["specdec_draft_accepted_total"] <= after["specdec_draft_tokens_total"]
    assert json.loads(server.get("/health")) == {"status": "ok"}


def test_queue_full_503_and_disconnects_cancel(cli, models):
    """One worker, --queue-size 1: a third request is refused; clients that go away (running,
    queued, or waiting for a non-streamed answer) are cancelled and free the worker."""
    s = Server(cli, ["-m", models["slow"], "-t", "1", "-c", "4096", "--queue-size", "1",
                     "--parallel", "1"])
    try:
        long = {"prompt": "x", "max_tokens": 4000, "temperature": 0, "ignore_eos": True,
                "stream": True}
        running = http.client.HTTPConnection("127.0.0.1", s.port, timeout=TIMEOUT)
        running.request("POST", "/v1/completions", json.dumps(long))
        resp = running.getresponse()
        assert resp.status == 200
        assert resp.read1(65536).startswith(b"data: ")  # generating now
        # A non-streaming request waits in the queue; its client then goes away.
        queued = socket.create_connection(("127.0.0.1", s.port), timeout=TIMEOUT)
        body = json.dumps({**long, "stream": False}).encode()
        queued.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                       b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        deadline = time.monotonic() + TIMEOUT
        while s.metrics()["specdec_queue_length"] != 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)

        status, err = post_json(s.base, "/v1/completions", {"prompt": "x", "max_tokens": 4})
        assert status == 503
        assert err["error"]["type"] == "server_error" and err["error"]["code"] == "queue_full"

        started = time.monotonic()
        queued.close()
        running.close()
        m = s.wait_idle(timeout=30)
        assert time.monotonic() - started < 10  # nowhere near 4000 tokens' worth of time
        assert m["specdec_generation_cancelled_total"] == 2
        assert m["specdec_generation_requests_total"] == 2
        assert m["specdec_generated_tokens_total"] < 4000
        # The worker is free again.
        status, ok = post_json(s.base, "/v1/completions",
                               {"prompt": "x", "max_tokens": 3, "ignore_eos": True})
        assert status == 200 and ok["usage"]["completion_tokens"] == 3
    finally:
        code = s.stop()
    assert code == 0, "".join(s.log[-30:])


# ---------------------------------------------------------------------------------------------
# Bad input: OpenAI-shaped errors with the right status, and the server stays up


@pytest.fixture(scope="module")
def keyed_server(cli, models):
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "128", "--api-key", "sekret",
                     "--max-body-bytes", "4096"])
    yield s
    code = s.stop()
    assert code == 0, "".join(s.log[-30:])


AUTH = {"Authorization": "Bearer sekret"}
CHAT = "/v1/chat/completions"
CMPL = "/v1/completions"
USER = [{"role": "user", "content": "hi"}]

BAD_INPUTS = [
    # (name, method, path, body (dict or raw bytes), headers, status, param)
    ("malformed json", "POST", CMPL, b'{"prompt": "x",', AUTH, 400, None),
    ("not an object", "POST", CMPL, b"[1, 2]", AUTH, 400, "body"),
    ("empty body", "POST", CHAT, b"", AUTH, 400, None),
    ("prompt wrong type", "POST", CMPL, {"prompt": 5}, AUTH, 400, "prompt"),
    ("max_tokens wrong type", "POST", CMPL, {"prompt": "x", "max_tokens": "9"}, AUTH, 400,
     "max_tokens"),
    ("temperature out of range", "POST", CMPL, {"prompt": "x", "temperature": 9}, AUTH, 400,
     "temperature"),
    ("stop wrong type", "POST", CMPL, {"prompt": "x", "stop": {"a": 1}}, AUTH, 400, "stop"),
    ("messages missing", "POST", CHAT, {"model": "specdec"}, AUTH, 400, "messages"),
    ("bad role", "POST", CHAT, {"messages": [{"role": "robot", "content": "x"}]}, AUTH, 400,
     "messages[0].role"),
    ("n = 17", "POST", CHAT, {"messages": USER, "n": 17}, AUTH, 400, "n"),
    ("draft_max out of range", "POST", CMPL, {"prompt": "x", "draft_max": 1000}, AUTH, 400,
     "draft_max"),
    ("unknown model", "POST", CHAT, {"model": "gpt-4o", "messages": USER}, AUTH, 404, "model"),
    ("prompt + max_tokens beyond the context", "POST", CMPL,
     {"prompt": "hello", "max_tokens": 127}, AUTH, 400, "max_tokens"),
    ("prompt longer than the context", "POST", CMPL, {"prompt": "a b " * 300}, AUTH, 400,
     "prompt"),
    ("body too large", "POST", CMPL, b'{"prompt": "' + b"x" * 8000 + b'"}', AUTH, 413, None),
    ("missing key", "POST", CMPL, {"prompt": "x"}, {}, 401, None),
    ("wrong key", "POST", CMPL, {"prompt": "x"}, {"Authorization": "Bearer nope"}, 401, None),
    ("wrong key on models", "GET", "/v1/models", None, {"Authorization": "Basic x"}, 401, None),
    ("wrong key on metrics", "GET", "/metrics", None, {}, 401, None),
    ("unknown route", "GET", "/v1/engines", None, AUTH, 404, None),
    ("unknown POST route", "POST", "/v2/completions", {"prompt": "x"}, AUTH, 404, None),
    ("wrong method", "GET", CMPL, None, AUTH, 405, None),
    ("wrong method on chat", "DELETE", CHAT, None, AUTH, 405, None),
    ("wrong method on models", "POST", "/v1/models", {}, AUTH, 405, None),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_gives_openai_error(keyed_server, case):
    name, method, path, body, headers, status, param = case
    conn = http.client.HTTPConnection("127.0.0.1", keyed_server.port, timeout=TIMEOUT)
    try:
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        conn.request(method, path, data, {"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    assert resp.status == status, raw
    assert resp.getheader("Content-Type").startswith("application/json")
    err = json.loads(raw)["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert isinstance(err["message"], str) and err["message"]
    assert err["param"] == param
    if "context" in name:
        assert "128" in err["message"], err  # the numbers are in the message
        assert err["code"] == "context_length_exceeded"
    assert keyed_server.alive()


def test_key_protects_everything_but_health(keyed_server):
    assert json.loads(keyed_server.get("/health")) == {"status": "ok"}
    with pytest.raises(openai.AuthenticationError):
        client(keyed_server, "wrong").models.list()
    good = client(keyed_server, "sekret")
    assert [m.id for m in good.models.list().data] == ["tiny-target"]
    r = good.chat.completions.create(model="tiny-target", messages=USER, max_tokens=4)
    assert r.usage.completion_tokens <= 4
    m = keyed_server.metrics(AUTH)
    assert m['specdec_http_requests_total{endpoint="/v1/completions",status="401"}'] >= 2
    assert m['specdec_http_requests_total{endpoint="other",status="404"}'] >= 2


def test_several_keys_from_the_command_line_and_a_file(cli, models, tmp_path):
    """llama-server's --api-key list (comma-separated, or repeated) and --api-key-file (a key per
    line): any one of them authorizes, in either header form; nothing else does."""
    keys = tmp_path / "keys"
    keys.write_text("  d4-key  \n\n\te5-key\r\n")
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "128", "--api-key", "a1,b2",
                     "--api-key", "c3", "--api-key-file", str(keys)])
    try:
        for key in ("a1", "b2", "c3", "d4-key", "e5-key"):
            for headers in ({"Authorization": f"Bearer {key}"}, {"x-api-key": key}):
                assert json.loads(s.get("/v1/models", headers=headers))["data"], key
        for headers in ({}, {"Authorization": "Bearer a1,b2"}, {"x-api-key": "d4"},
                        {"Authorization": "Bearer "}):
            status, doc = post_json(s.base, "/v1/completions", {"prompt": "x"}, headers=headers)
            assert status == 401 and doc["error"]["code"] == "invalid_api_key", headers
    finally:
        assert s.stop() == 0
    empty = tmp_path / "none"
    empty.write_text("\n  \n")
    for flags, message in ((["--api-key-file", str(empty)], "holds no key"),
                           (["--api-key", "a,,b"], "--api-key has an empty item")):
        done = subprocess.run([cli, "serve", "-m", models["target"], "--port", "0", *flags],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode != 0 and message in done.stderr, done.stderr


def test_garbage_on_the_socket_does_not_hurt(keyed_server):
    for junk in [b"\x00\xff garbage\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: "
                 b"-5\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: 10\r\n\r\n{"]:
        with socket.create_connection(("127.0.0.1", keyed_server.port), timeout=5) as sock:
            sock.sendall(junk)
            sock.shutdown(socket.SHUT_WR)
            try:
                while sock.recv(4096):
                    pass
            except (socket.timeout, ConnectionResetError):
                pass
    assert json.loads(keyed_server.get("/health")) == {"status": "ok"}


# ---------------------------------------------------------------------------------------------
# specdec chat


def test_chat_cli_multi_turn_commands_and_eof(cli, models, server):
    args = [cli, "chat", "-m", models["target"], "-md", models["draft"], "--temp", "0",
            "-n", "12", "-t", "2", "-c", "512"]
    script = "Name three colors.\n/stats\nAnd three more?\n/reset\n/stats\n/exit\nignored\n"
    r = subprocess.run(args, input=script, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    # The first reply is what the server answers to the same single message.
    ref = client(server).chat.completions.create(
        model="tiny-target", messages=[{"role": "user", "content": "Name three colors."}],
        max_tokens=12, temperature=0)
    assert r.stdout.startswith(ref.choices[0].message.content + "\n"), r.stdout
    assert r.stdout.count("last turn:") == 1
    assert "speculative: gamma 4" in r.stdout  # the CLI default cap at T 0 (cli/engine_setup.h)
    assert "[conversation reset]" in r.stdout
    assert r.stdout.rstrip().endswith("no turn yet")  # /stats after /reset; "ignored" unread

    # End of input ends the chat too.
    r = subprocess.run(args, input="hello", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() != ""


# ---------------------------------------------------------------------------------------------
# The real model (fetched by scripts/test.sh), when present


def real_model():
    name = "SmolLM2-135M-Instruct.Q4_1.gguf"
    d = os.environ.get("SPECDEC_MODELS") or os.path.expanduser("~/.cache/specdec/models")
    path = os.path.join(d, name)
    if os.path.exists(path):
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(f"{path} missing in CI (scripts/test.sh fetches it)")
    pytest.skip(f"{path} not found (scripts/fetch-models.sh smollm2-135m)")


def test_real_model_chat_speculative_equals_plain(cli, tmp_path):
    model = real_model()
    draft = tmp_path / "smollm2-draft.gguf"
    subprocess.run([cli, "make-draft", "-m", model, "--layers", "6", "-o", str(draft)],
                   check=True, timeout=120, capture_output=True)
    s = Server(cli, ["-m", model, "-md", str(draft), "-t", "2", "-c", "1024"])
    try:
        c = client(s)
        msgs = [{"role": "user", "content": "What is the capital of France?"}]
        plain = c.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1", messages=msgs,
                                          max_tokens=24, temperature=0,
                                          extra_body={"speculative": False})
        spec = c.chat.completions.create(model="specdec", messages=msgs, max_tokens=24,
                                         temperature=0, extra_body={"draft_max": 4})
        assert spec.choices[0].message.content == plain.choices[0].message.content
        # The server formats and decodes exactly like `specdec run --chat`.
        run = subprocess.run([cli, "run", "-m", model, "--chat", "-p", msgs[0]["content"],
                              "--temp", "0", "-n", "24", "-t", "2", "-q"],
                             capture_output=True, text=True, timeout=120)
        assert run.stdout == plain.choices[0].message.content + "\n"
        assert spec.model_extra["specdec"]["rounds"] > 0
        streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
            model="specdec", messages=msgs, max_tokens=24, temperature=0, stream=True)
            if ch.choices)
        assert streamed == plain.choices[0].message.content
    finally:
        code = s.stop()
    assert code == 0, "".join(s.log[-30:])
