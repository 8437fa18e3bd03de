"""Embeddings (`/v1/embeddings`, llama-server's `/embedding`, Ollama's `/api/embed` and
`/api/embeddings`): the target's final-normed hidden states, pooled and normalized, in each
client's shape and through each SDK; the same bits alone and among generations; and the
refusals: pooling none where one vector is expected, an input past the context, a client that
leaves."""

import http.client
import json
import math
import threading
import time

import ollama
import openai
import pytest

from conftest import Server, post_json

TEXTS = ["The quick brown fox.", "def reverse(xs): return xs[::-1]", "Paris in spring."]
TIMEOUT = 60


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def embed(server, status=200, **body):
    got, doc = post_json(server.base, "/v1/embeddings", body)
    assert got == status, doc
    return doc


@pytest.fixture(scope="module")
def embed_server(cli, models):
    """Two slots, so that embeddings and generations share passes."""
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "--draft-max", "3",
                     "--draft-policy", "fixed", "--no-draft-hybrid", "-t", "2", "-c", "512",
                     "--parallel", "2", "--prefill-chunk", "8"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def test_openai_client_gets_one_unit_vector_per_input(embed_server):
    client = openai.OpenAI(base_url=embed_server.base + "/v1", api_key="unused",
                           timeout=TIMEOUT, max_retries=0)
    # The client asks for base64 and decodes it; the plain JSON floats must be the same.
    got = client.embeddings.create(model="specdec", input=TEXTS)
    assert [d.index for d in got.data] == [0, 1, 2]
    plain = embed(embed_server, input=TEXTS, encoding_format="float")
    assert plain["object"] == "list" and plain["model"] == "tiny-target"  # none was named
    width = len(plain["data"][0]["embedding"])
    assert width == 64  # the tiny target's n_embd
    for d, p in zip(got.data, plain["data"]):
        assert d.embedding == pytest.approx(p["embedding"], abs=0, rel=1e-7)
        assert norm(p["embedding"]) == pytest.approx(1.0, abs=1e-5)
    assert plain["data"][0]["embedding"] != plain["data"][1]["embedding"]
    usage = plain["usage"]
    assert usage["prompt_tokens"] == usage["total_tokens"] > len(TEXTS)
    # Token ids in, as for completions; the same text's ids give the same vector.
    status, tok = post_json(embed_server.base, "/tokenize", {"content": TEXTS[0]})
    assert status == 200
    by_ids = embed(embed_server, input=tok["tokens"], encoding_format="float")
    assert by_ids["data"][0]["embedding"] == plain["data"][0]["embedding"]
    # dimensions: the first N components, unit length again.
    short = embed(embed_server, input=TEXTS[0], dimensions=16)["data"][0]["embedding"]
    assert len(short) == 16 and norm(short) == pytest.approx(1.0, abs=1e-5)
    head = plain["data"][0]["embedding"][:16]
    assert short == pytest.approx([x / norm(head) for x in head], rel=1e-5)


def test_a_vector_is_the_same_bits_alone_and_among_generations(embed_server):
    alone = embed(embed_server, input=TEXTS[1])["data"][0]["embedding"]
    results, errors = [], []

    def generate():
        try:
            status, doc = post_json(embed_server.base, "/v1/completions",
                                    {"prompt": "lorem ipsum " * 20, "max_tokens": 40,
                                     "temperature": 0, "ignore_eos": True})
            results.append(status)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    before = embed_server.wait_idle()
    t = threading.Thread(target=generate)
    t.start()
    time.sleep(0.05)
    company = [embed(embed_server, input=TEXTS[1])["data"][0]["embedding"] for _ in range(3)]
    t.join(TIMEOUT)
    assert not errors and results == [200]
    assert all(v == alone for v in company)
    after = embed_server.wait_idle()
    assert after['specdec_http_requests_total{endpoint="/v1/embeddings",status="200"}'] - \
        before['specdec_http_requests_total{endpoint="/v1/embeddings",status="200"}'] == 3


def test_a_generation_after_embeddings_is_unchanged(embed_server):
    body = {"prompt": TEXTS[0], "max_tokens": 24, "temperature": 0, "ignore_eos": True}
    status, first = post_json(embed_server.base, "/v1/completions", body)
    assert status == 200
    # Embedding its prompt, and a text that shares its start, on every slot.
    for _ in range(2):
        embed(embed_server, input=[TEXTS[0], TEXTS[0] + " and more"])
    status, again = post_json(embed_server.base, "/v1/completions", body)
    assert status == 200
    assert again["choices"][0]["text"] == first["choices"][0]["text"]


def test_ollama_clients(embed_server):
    client = ollama.Client(host=embed_server.base, timeout=TIMEOUT)
    got = client.embed(model="specdec", input=TEXTS[:2])
    openai_vectors = [d["embedding"] for d in embed(embed_server, input=TEXTS[:2])["data"]]
    assert [list(v) for v in got.embeddings] == openai_vectors
    assert got.prompt_eval_count > 2 and got.total_duration > 0
    # The older endpoint returns the vector before normalization.
    legacy = list(client.embeddings(model="specdec", prompt=TEXTS[0]).embedding)
    assert norm(legacy) > 0
    assert [x / norm(legacy) for x in legacy] == pytest.approx(openai_vectors[0], abs=1e-6)
    # No input loads the model and embeds nothing, as Ollama does.
    status, doc = post_json(embed_server.base, "/api/embed", {"model": "specdec", "input": []})
    assert status == 200 and doc["embeddings"] == []
    status, doc = post_json(embed_server.base, "/api/embed", {"model": "other", "input": "x"})
    assert status == 404 and "not found" in doc["error"]


def test_inputs_past_the_context(embed_server):
    long_text = "word " * 700  # past the 512-token context
    doc = embed(embed_server, 400, input=long_text)
    assert doc["error"]["code"] == "context_length_exceeded"
    # Ollama truncates unless told not to.
    status, doc = post_json(embed_server.base, "/api/embed",
                            {"model": "specdec", "input": long_text})
    assert status == 200 and doc["prompt_eval_count"] == 512
    status, doc = post_json(embed_server.base, "/api/embed",
                            {"model": "specdec", "input": long_text, "truncate": False})
    assert status == 400 and "context" in doc["error"]
    # An input that fills the context exactly is embedded (nothing is generated after it).
    status, tok = post_json(embed_server.base, "/tokenize", {"content": long_text})
    assert embed(embed_server, input=tok["tokens"][:512])["usage"]["prompt_tokens"] == 512


@pytest.mark.parametrize("body, param", [({"input": ""}, "input"), ({"input": []}, "input"),
                                         ({"input": {"a": 1}}, "input"),
                                         ({"input": "x", "encoding_format": "hex"},
                                          "encoding_format"),
                                         ({"input": "x", "dimensions": 65}, "dimensions"),
                                         ({"input": [1, 2, 10**6]}, "input"), ({}, "input")])
def test_bad_requests_are_400s_naming_the_field(embed_server, body, param):
    doc = embed(embed_server, 400, **body)
    assert doc["error"]["param"] == param, doc


def test_pooling_none_gives_token_vectors_only_to_llama_servers_endpoint(cli, models):
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "256", "--pooling", "none"])
    try:
        status, tok = post_json(s.base, "/tokenize", {"content": TEXTS[0]})
        status, doc = post_json(s.base, "/embedding", {"content": TEXTS[0]})
        assert status == 200 and len(doc) == 1 and doc[0]["index"] == 0
        rows = doc[0]["embedding"]
        assert len(rows) == len(tok["tokens"]) and all(len(r) == 64 for r in rows)
        # The last token's row is the (unnormalized) state that last pooling normalizes.
        status, legacy = post_json(s.base, "/embedding", {"content": TEXTS[0]})
        assert legacy[0]["embedding"] == rows  # deterministic
        doc = embed(s, 400, input=TEXTS[0])
        assert "Pooling type 'none'" in doc["error"]["message"]
        # At most a context's worth of token vectors per request (256 here).
        status, doc = post_json(s.base, "/embedding", {"content": [[120] * 150, [121] * 150]})
        assert status == 400 and "300 tokens in all" in doc["error"]["message"], doc
    finally:
        assert s.stop() == 0
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "256", "--pooling", "last"])
    try:
        last = embed(s, input=TEXTS[0], embd_normalize=-1)["data"][0]["embedding"]
        assert last == rows[-1]
    finally:
        assert s.stop() == 0


def test_bad_pooling_flag_is_refused(cli, models):
    import subprocess
    out = subprocess.run([cli, "serve", "-m", models["target"], "--pooling", "rank"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--pooling" in out.stderr


def test_a_client_that_leaves_stops_its_embedding(cli, models):
    """On one slot of the slow model: a 4000-token input whose client closes the connection
    early is stopped between its chunks, and the slot serves the next request."""
    s = Server(cli, ["-m", models["slow"], "-t", "1", "-c", "4096", "--parallel", "1"])
    try:
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=TIMEOUT)
        conn.request("POST", "/v1/embeddings", json.dumps({"input": "x" * 4000}),
                     {"Content-Type": "application/json"})
        time.sleep(0.2)
        started = time.monotonic()
        conn.close()
        m = s.wait_idle(timeout=30)
        assert time.monotonic() - started < 10
        assert m["specdec_generation_cancelled_total"] == 1
        assert embed(s, input="x")["usage"]["prompt_tokens"] == 1  # the slot is free
    finally:
        assert s.stop() == 0
