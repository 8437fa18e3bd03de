"""LoRA adapters on the server (`serve --lora`): llama-server's GET /lora-adapters, POST
/lora-adapters setting the default scales and a request's `lora` list its own (an adapter a list
leaves out at 0, as llama-server's construct_lora_list), greedy text that the scales change and
speculation keeps, requests at different scales at once, `--lora-init-without-apply`, and a file
that is not an adapter refused at startup."""

import json
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

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


def text(doc):
    return doc["choices"][0]["text"] if "choices" in doc else doc["content"]


def test_the_scales_a_request_asks_for_are_the_ones_it_runs_at(lora_server, server):
    adapted = text(greedy(lora_server))
    assert text(greedy(lora_server, speculative=False)) == adapted
    base = text(greedy(server))  # the same model without the adapter
    assert base != adapted
    # Named at 1: the same text, on every endpoint that takes `lora`; at 0: the base model's.
    assert text(greedy(lora_server, lora=[{"id": 0, "scale": 1}])) == adapted
    assert text(greedy(lora_server, "/completion", n_predict=16,
                       lora=[{"id": 0, "scale": 1.0}])) == adapted
    assert text(greedy(lora_server, lora=[{"id": 0, "scale": 0}])) == base
    chat = {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 8,
            "temperature": 0}
    plain_chat = post_json(server.base, "/v1/chat/completions", chat)[1]
    off_chat = post_json(lora_server.base, "/v1/chat/completions",
                         {**chat, "lora": [{"id": 0, "scale": 0}]})[1]
    assert off_chat["choices"][0]["message"] == plain_chat["choices"][0]["message"]
    # Another scale: another text, which speculation keeps; an empty list asks for nothing.
    half = text(greedy(lora_server, lora=[{"id": 0, "scale": 0.5}]))
    assert text(greedy(lora_server, speculative=False, lora=[{"id": 0, "scale": 0.5}])) == half
    assert text(greedy(lora_server, lora=[])) == adapted


def test_requests_at_other_scales_run_at_once_and_get_what_they_get_alone(lora_server):
    scales = [1.0, 0.0, 0.5, -1.0]
    alone = [text(greedy(lora_server, lora=[{"id": 0, "scale": s}])) for s in scales]
    with ThreadPoolExecutor(len(scales)) as pool:
        together = list(pool.map(
            lambda s: text(greedy(lora_server, lora=[{"id": 0, "scale": s}])), scales))
    assert together == alone


@pytest.mark.parametrize("lora,param", [
    ([{"id": 1, "scale": 1}], "lora[0].id"),
    ([{"id": 0, "scale": 1}, {"id": -1, "scale": 1}], "lora[1].id"),
    ([{"id": 0}], "lora[0].scale"),
    ([{"id": 0, "scale": "1"}], "lora[0].scale"),
    ({"id": 0, "scale": 1}, "lora"),
])
def test_unknown_adapters_and_malformed_lists_are_refused(lora_server, lora, param):
    for path in ("/v1/completions", "/completion"):
        doc = greedy(lora_server, path, status=400, lora=lora)
        assert doc["error"]["param"] == param, doc


def test_posting_scales_sets_what_requests_that_name_none_run_at(lora_server, server):
    adapted, base = text(greedy(lora_server)), text(greedy(server))
    half = text(greedy(lora_server, lora=[{"id": 0, "scale": 0.5}]))
    try:
        assert post_json(lora_server.base, "/lora-adapters", [{"id": 0, "scale": 0.5}]) == (
            200, {"success": True})
        assert json.loads(lora_server.get("/lora-adapters"))[0]["scale"] == 0.5
        assert text(greedy(lora_server)) == half
        assert text(greedy(lora_server, lora=[{"id": 0, "scale": 1}])) == adapted
        # An adapter the body leaves out goes to 0.
        assert post_json(lora_server.base, "/lora-adapters", [])[0] == 200
        assert json.loads(lora_server.get("/lora-adapters"))[0]["scale"] == 0.0
        assert text(greedy(lora_server)) == base
        for body, param in (([{"id": 3, "scale": 1}], "body[0].id"),
                            ([{"id": 0, "scale": None}], "body[0].scale")):
            status, doc = post_json(lora_server.base, "/lora-adapters", body)
            assert status == 400 and doc["error"]["param"] == param, doc
        assert json.loads(lora_server.get("/lora-adapters"))[0]["scale"] == 0.0
        status, doc = post_json(lora_server.base, "/lora-adapters", b"[{not json")
        assert status == 400 and doc["error"]["code"] == "invalid_json", doc
        status, doc = post_json(lora_server.base, "/lora-adapters", b"[" * 100 + b"]" * 100)
        assert status == 400 and doc["error"]["code"] == "invalid_json", doc
    finally:
        post_json(lora_server.base, "/lora-adapters", [{"id": 0, "scale": 1}])
    assert text(greedy(lora_server)) == adapted


def test_a_follow_up_goes_to_the_slot_that_holds_it_at_its_scales(lora_server):
    # A conversation at scale 0.5, its next turn at 0.5 on the same slot (reusing it), and the
    # same turn at scale 1 elsewhere: the slot's rows are another model's for it.
    def native(prompt, scale):
        return greedy(lora_server, "/completion", prompt=prompt, n_predict=8,
                      lora=[{"id": 0, "scale": scale}])

    first = native("A conversation about rivers and the sea", 0.5)
    follow = "A conversation about rivers and the sea" + first["content"] + " and then"
    again = native(follow, 0.5)
    assert again["id_slot"] == first["id_slot"]
    assert again["tokens_cached"] > 0
    other = native(follow, 1.0)
    assert other["id_slot"] != first["id_slot"]
    assert other["tokens_cached"] == 0


def test_slots_and_settings_show_the_scales_each_runs_at(lora_server):
    # As llama-server's slot params: idle slots and /props the default scales (which POST
    # /lora-adapters changes), a running request and its response's generation_settings its own.
    def settings_lora():
        props = json.loads(lora_server.get("/props"))["default_generation_settings"]["params"]
        idle = [s["params"]["lora"] for s in json.loads(lora_server.get("/slots"))
                if not s["is_processing"]]
        return props["lora"], idle

    props, idle = settings_lora()
    assert props == [{"id": 0, "scale": 1.0}] and idle and all(l == props for l in idle)
    try:
        assert post_json(lora_server.base, "/lora-adapters", [{"id": 0, "scale": 0.5}])[0] == 200
        props, idle = settings_lora()
        assert props == [{"id": 0, "scale": 0.5}] and all(l == props for l in idle)
        doc = greedy(lora_server, "/completion", n_predict=4)
        assert doc["generation_settings"]["lora"] == [{"id": 0, "scale": 0.5}]
    finally:
        post_json(lora_server.base, "/lora-adapters", [{"id": 0, "scale": 1}])
    doc = greedy(lora_server, "/completion", n_predict=4, lora=[{"id": 0, "scale": -0.25}])
    assert doc["generation_settings"]["lora"] == [{"id": 0, "scale": -0.25}]
    for _ in range(5):  # the request may end before a poll sees it running
        result = {}
        worker = threading.Thread(target=lambda: result.update(doc=greedy(
            lora_server, "/completion", n_predict=400, lora=[{"id": 0, "scale": 0.25}])))
        worker.start()
        seen = []
        while worker.is_alive():
            seen += [s["params"]["lora"] for s in json.loads(lora_server.get("/slots"))
                     if s["is_processing"]]
        worker.join()
        if seen:
            break
    assert seen and all(l == [{"id": 0, "scale": 0.25}] for l in seen), seen


def test_a_saved_slot_restores_at_the_scales_its_rows_were_computed_at(cli, models, adapter,
                                                                       tmp_path):
    # A slot saved after a request at 0.5 restores with its rows at 0.5 (the default stays 1):
    # a follow-up at 0.5 reuses them and answers as a server that reads it all itself; one at
    # the default scale reuses nothing.
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "-t", "2", "-c", "512",
                     "--parallel", "1", "--lora", adapter, "--slot-save-path", str(tmp_path)])
    try:
        def native(prompt, **extra):
            return greedy(s, "/completion", prompt=prompt, n_predict=8, **extra)

        half = [{"id": 0, "scale": 0.5}]
        first = native(PROMPT, lora=half)
        follow = PROMPT + first["content"] + " and so"
        status, saved = post_json(s.base, "/slots/0?action=save", {"filename": "half.bin"})
        assert status == 200 and saved["n_saved"] > 0, saved
        assert post_json(s.base, "/slots/0?action=erase", {})[0] == 200
        want = native(follow, lora=half)  # read from scratch (the slot was erased)
        assert want["tokens_cached"] == 0
        status, restored = post_json(s.base, "/slots/0?action=restore", {"filename": "half.bin"})
        assert status == 200 and restored["n_restored"] == saved["n_saved"], restored
        got = native(follow, lora=half)
        # All but where the follow-up's tokenization parts from the saved text's.
        assert 0 < got["tokens_cached"] <= saved["n_saved"]
        assert got["content"] == want["content"]
        assert post_json(s.base, "/slots/0?action=restore", {"filename": "half.bin"})[0] == 200
        assert native(follow)["tokens_cached"] == 0  # at scale 1 they are another model's rows
    finally:
        assert s.stop() == 0, "".join(s.log[-30:])


def test_adapters_loaded_without_applying_them_start_at_zero(cli, models, adapter, server):
    s = Server(cli, ["-m", models["target"], "-t", "2", "-c", "512", "--lora", adapter,
                     "--lora-init-without-apply"])
    try:
        assert json.loads(s.get("/lora-adapters")) == [{"id": 0, "path": adapter, "scale": 0.0}]
        assert text(greedy(s)) == text(greedy(server))
        assert text(greedy(s, lora=[{"id": 0, "scale": 1}])) != text(greedy(server))
    finally:
        assert s.stop() == 0, "".join(s.log[-30:])


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
