"""llama-server's slot actions: POST /slots/{id}?action=save|restore|erase with --slot-save-path,
and `id_slot` on a request. A slot's cached text saved to a file and restored (into another slot,
or into a server started later on the same models) is reused by the next request that starts
with it, which then answers exactly what a server that read the text itself answers; a file that
does not fit is refused with a 400 and the server goes on."""

import os
import threading

import pytest

from conftest import Server, post_json

# A long "system prompt" whose cache is worth keeping; the follow-up adds a question to it.
SYSTEM = "You are a careful assistant. " * 12
QUESTION = "What is the capital of France?"


def complete(server, prompt, status=200, **extra):
    body = {"prompt": prompt, "n_predict": 16, "temperature": 0, "ignore_eos": True, **extra}
    got, doc = post_json(server.base, "/completion", body)
    assert got == status, doc
    return doc


def action(server, slot, name, status=200, **body):
    got, doc = post_json(server.base, f"/slots/{slot}?action={name}", body)
    assert got == status, doc
    return doc


def args(models, save_dir=None):
    a = ["-m", models["target"], "-md", models["draft"], "--draft-max", "3", "--draft-policy",
         "fixed", "--no-draft-hybrid", "-t", "2", "-c", "512", "--parallel", "2"]
    return a + (["--slot-save-path", str(save_dir)] if save_dir else [])


@pytest.fixture(scope="module")
def save_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("slots")


@pytest.fixture(scope="module")
def slot_server(cli, models, save_dir):
    s = Server(cli, args(models, save_dir / "made-at-start"))
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def test_a_restored_slot_answers_as_one_that_read_the_text(cli, models, slot_server, save_dir):
    s = slot_server
    store = save_dir / "made-at-start"
    assert store.is_dir()  # --slot-save-path creates its directory
    # What a server that reads everything itself answers.
    want = complete(s, SYSTEM + QUESTION)
    action(s, 0, "erase")
    action(s, 1, "erase")

    # The system prompt on slot 1 (id_slot pins it), then saved.
    first = complete(s, SYSTEM, id_slot=1)
    assert first["id_slot"] == 1
    saved = action(s, 1, "save", filename="system.bin")
    assert saved["id_slot"] == 1 and saved["filename"] == "system.bin"
    n = saved["n_saved"]
    assert n >= first["tokens_evaluated"]  # the prompt and the answer's rows
    # The draft's rows for the same text, as far as its draft read it (a batched slot's draft
    # reads the prompt only once drafting pays).
    assert 0 <= saved["n_saved_draft"] <= n
    assert saved["n_written"] == os.path.getsize(store / "system.bin")
    assert saved["timings"]["save_ms"] > 0
    assert not [f for f in os.listdir(store) if f != "system.bin"]  # no temporary file left

    # Erased, then restored into the other slot: the follow-up reuses it there.
    assert action(s, 1, "erase") == {"id_slot": 1, "n_erased": n}
    restored = action(s, 0, "restore", filename="system.bin")
    assert restored["n_restored"] == n and restored["n_read"] == saved["n_written"]
    assert restored["n_restored_draft"] == saved["n_saved_draft"]
    assert restored["timings"]["restore_ms"] > 0
    got = complete(s, SYSTEM + QUESTION)
    assert got["id_slot"] == 0  # the slot whose cache starts with its prompt
    assert got["tokens_cached"] >= first["tokens_evaluated"] - 1
    assert got["content"] == want["content"]

    # A server started later restores the file and answers the same.
    later = Server(cli, args(models, store))
    try:
        assert action(later, 1, "restore", filename="system.bin")["n_restored"] == n
        again = complete(later, SYSTEM + QUESTION)
        assert again["tokens_cached"] == got["tokens_cached"]
        assert again["content"] == want["content"]
    finally:
        assert later.stop() == 0


def test_a_save_waits_for_the_slots_running_request(slot_server):
    s = slot_server
    alone = complete(s, QUESTION * 3, n_predict=64, id_slot=0)["content"]
    result = {}

    def generate():
        result["doc"] = complete(s, QUESTION * 3, n_predict=64, id_slot=0)

    t = threading.Thread(target=generate)
    t.start()
    saved = action(s, 0, "save", filename="busy.bin")
    t.join(60)
    assert result["doc"]["content"] == alone  # the generation did not notice
    # The save came after the generation: its text is in the file.
    assert saved["n_saved"] >= result["doc"]["tokens_evaluated"] + 60


def test_refusals_are_400s_in_llama_servers_words(cli, models, slot_server, save_dir):
    s = slot_server
    store = save_dir / "made-at-start"
    assert action(s, 5, "erase", status=400)["error"]["message"] == "Invalid slot ID"
    assert action(s, "x", "erase", status=400)["error"]["message"] == "Invalid slot ID"
    assert action(s, 0, "load", status=400)["error"]["message"] == "Invalid action"
    for name in ["../escape.bin", "a/b", ".hidden", ""]:
        doc = action(s, 0, "save", status=400, filename=name)
        assert doc["error"]["message"] == "Invalid filename"
    assert not (save_dir / "escape.bin").exists()
    held = complete(s, SYSTEM, id_slot=0)
    doc = action(s, 0, "restore", status=400, filename="missing.bin")
    assert "cannot open" in doc["error"]["message"]
    # Refused before anything was read: the slot still holds its text.
    assert action(s, 0, "save", filename="good.bin")["n_saved"] >= held["tokens_evaluated"]
    # A corrupt copy, and one from another model, are refused; the slot still serves.
    data = bytearray((store / "good.bin").read_bytes())
    data[len(data) // 2] ^= 1
    (store / "bad.bin").write_bytes(bytes(data))
    assert "corrupt" in action(s, 0, "restore", status=400, filename="bad.bin")["error"]["message"]
    complete(s, SYSTEM + QUESTION)
    other = Server(cli, ["-m", models["slow"], "-t", "2", "--slot-save-path", str(store)])
    try:
        doc = action(other, 0, "restore", status=400, filename="good.bin")
        assert "another model" in doc["error"]["message"]
    finally:
        assert other.stop() == 0
    got, doc = post_json(s.base, "/completion", {"prompt": "x", "id_slot": 2})
    assert got == 400 and "Invalid slot ID" in doc["error"]["message"]


def test_without_a_save_path_only_erase_is_served(cli, models):
    s = Server(cli, args(models))
    try:
        doc = action(s, 0, "save", status=501, filename="x.bin")
        assert "--slot-save-path" in doc["error"]["message"]
        action(s, 0, "restore", status=501, filename="x.bin")
        assert action(s, 0, "erase")["n_erased"] == 0
        with pytest.raises(Exception) as e:
            s.get("/slots/0")
        assert "405" in str(e.value)
    finally:
        assert s.stop() == 0
