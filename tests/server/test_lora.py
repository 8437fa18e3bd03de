"""LoRA adapters on the server (`serve --lora`): llama-server's GET /lora-adapters, a request's
`lora` list and POST /lora-adapters at the scales the adapters run at (other scales are a 400:
they are fixed at startup), greedy text that the adapter changes and speculation keeps, and a
file that is not an adapter refused at startup."""

import json
import subprocess
import urllib.request

import pytest

from conftest import Server, _binary, post_json

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    writer = _binary("SPECDEC_WRITE_TINY_MODEL", "build/write_tiny_model")
    path = tmp_path_factory.mktemp("lora") / "tiny-lora.gguf"
    subprocess.run([writer, "--lora", str(path)], check=True, timeout=60, capture_output=True)
    return str(path)


@pytest.fixture(scope="module")
def lora_server(cli, models, adapter):
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "--draft-max", "3",
                     "--draft-policy", "fixed", "--no-draft-hybrid", "-t", "2", "-c", "512",
                     "--lora", adapter])
    yield s
    code = s.stop()
    assert code == 0, f"server exit: {code}\n" + "".join(s.log[-30:])


def greedy(server, path="/v1/completions", status=200, **extra):
    body = {"prompt": PROMPT, "max_tokens": 16, "temperature": 0, "ignore_eos": True, **extra}
    got, doc = post_json(server.base, path, body)
    assert got == status, doc
    return doc


def test_the_adapters_are_listed(lora_server, adapter):
    assert json.loads(lora_server.get("/lora-adapters")) == [
        {"id": 0, "path": adapter, "scale": 1.0}]


def test_the_adapter_changes_the_text_and_speculation_keeps_it(lora_server, server):
    adapted = greedy(lora_server)["choices"][0]["text"]
    assert greedy(lora_server, speculative=False)["choices"][0]["text"] == adapted
    assert greedy(server)["choices"][0]["text"] != adapted  # the same model without it
    # The running scale, named: the same text, on every endpoint that takes `lora`.
    assert greedy(lora_server, lora=[{"id": 0, "scale": 1}])["choices"][0]["text"] == adapted
    native = greedy(lora_server, "/completion", n_predict=16, lora=[{"id": 0, "scale": 1.0}])
    assert native["content"] == adapted


@pytest.mark.parametrize("lora,param", [
    ([{"id": 0, "scale": 0.5}], "lora[0].scale"),
    ([{"id": 1, "scale": 1}], "lora[0].id"),
    ([{"id": 0}], "lora[0].scale"),
    ({"id": 0, "scale": 1}, "lora"),
])
def test_other_scales_and_unknown_adapters_are_refused(lora_server, lora, param):
    for path in ("/v1/completions", "/completion"):
        doc = greedy(lora_server, path, status=400, lora=lora)
        assert doc["error"]["param"] == param, doc


def test_posting_the_scales_they_run_at_is_accepted_and_others_refused(lora_server):
    assert post_json(lora_server.base, "/lora-adapters", [{"id": 0, "scale": 1.0}]) == (
        200, {"success": True})
    status, doc = post_json(lora_server.base, "/lora-adapters", [{"id": 0, "scale": 0.2}])
    assert status == 400 and doc["error"]["param"] == "body[0].scale", doc
    assert "fixed when the server starts" in doc["error"]["message"]
    status, doc = post_json(lora_server.base, "/lora-adapters", b"[{not json")
    assert status == 400 and doc["error"]["code"] == "invalid_json", doc
    status, doc = post_json(lora_server.base, "/lora-adapters", b"[" * 100 + b"]" * 100)
    assert status == 400 and doc["error"]["code"] == "invalid_json", doc


def test_a_server_without_adapters_refuses_any(server):
    assert json.loads(server.get("/lora-adapters")) == []
    doc = greedy(server, "/completion", status=400, lora=[{"id": 0, "scale": 1}])
    assert doc["error"]["param"] == "lora[0].id"
    assert greedy(server, lora=[])["choices"][0]["text"]  # an empty list asks for nothing


def test_a_file_that_is_no_adapter_stops_the_server(cli, models):
    done = subprocess.run([cli, "serve", "--port", "0", "-m", models["target"], "--lora",
                           models["draft"]], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "not a LoRA adapter" in done.stderr, done.stderr
