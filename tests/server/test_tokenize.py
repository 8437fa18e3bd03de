"""POST /tokenize and /detokenize in the shapes llama-server's and vLLM's clients use: the ids
are exactly what the completions and chat endpoints feed the model (so usage.prompt_tokens
agrees, and logit_bias can be built from them), and detokenize inverts them."""

import pytest

from conftest import post_json
from test_server import greedy_completion


def tokenize(server, **body):
    status, doc = post_json(server.base, "/tokenize", body)
    assert status == 200, doc
    return doc


def test_completion_prompts_and_chat_messages_count_as_the_endpoints_do(server):
    text = "The quick brown fox jumps"
    doc = tokenize(server, content=text)
    assert doc["count"] == len(doc["tokens"]) > 0
    assert doc["max_model_len"] == 512
    assert tokenize(server, prompt=text, model="specdec")["tokens"] == doc["tokens"]  # vLLM's name
    assert greedy_completion(server, text, 4)["usage"]["prompt_tokens"] == doc["count"]
    msgs = [{"role": "user", "content": "hello there"}]
    chat = tokenize(server, messages=msgs)
    status, body = post_json(server.base, "/v1/chat/completions",
                             {"messages": msgs, "max_tokens": 2, "temperature": 0})
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] == chat["count"]


def test_detokenize_inverts_tokenize_and_pieces_spell_the_text(server):
    text = "abc abc, 1 2 3!"
    doc = tokenize(server, content=text, with_pieces=True)
    assert "".join(p["piece"] for p in doc["pieces"]) == text
    assert [p["id"] for p in doc["pieces"]] == doc["tokens"]
    status, back = post_json(server.base, "/detokenize", {"tokens": doc["tokens"]})
    assert status == 200, back
    assert back["content"] == back["prompt"] == text


def test_tokenized_ids_drive_logit_bias(server):
    [forced] = tokenize(server, content="Z")["tokens"]
    body = greedy_completion(server, "hello", 6, logit_bias={str(forced): 100})
    assert body["choices"][0]["text"] == "Z" * 6


@pytest.mark.parametrize("path, body, param", [
    ("/tokenize", {}, "content"),
    ("/tokenize", {"content": 3}, "content"),
    ("/tokenize", {"content": "x", "model": "gpt-4o"}, "model"),
    ("/detokenize", {"tokens": [1, 100000]}, "tokens"),
    ("/detokenize", {"tokens": "1"}, "tokens"),
])
def test_bad_bodies_get_4xx(server, path, body, param):
    status, doc = post_json(server.base, path, body)
    assert status in (400, 404), doc
    assert doc["error"]["param"] == param, doc
