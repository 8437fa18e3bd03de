"""Penalties and logit bias through the API (presence_penalty, frequency_penalty, OpenAI's
logit_bias; repetition_penalty and llama-server's repeat_penalty): they change the text, the
speculative text still equals the plain one at temperature 0, and what is not supported gets a
400 instead of being ignored."""

import pytest

from conftest import post_json
from test_server import greedy_completion

PROMPTS = ["abc abc abc abc", "The capital of France is", "1, 2, 3, 4,"]


def text(body):
    return body["choices"][0]["text"]


def test_logit_bias_forces_and_bans_tokens(server):
    # The tiny model's first 256 ids are its byte tokens in byte order: id 65 is "A".
    forced = greedy_completion(server, "hello", 12, logit_bias={"65": 100})
    assert text(forced) == "A" * 12
    plain = greedy_completion(server, "hello", 12, speculative=False)
    first = plain["choices"][0]["text"][:1]
    banned = {str(ord(first)): -100} if len(first.encode()) == 1 else {}
    if banned:  # the first greedy token is a byte token: banning it changes the first character
        assert not text(greedy_completion(server, "hello", 12, logit_bias=banned)).startswith(first)


@pytest.mark.parametrize("penalties", [
    {"frequency_penalty": 2.0},
    {"presence_penalty": 1.5, "repetition_penalty": 1.5},
    {"repeat_penalty": 2.0, "logit_bias": {"32": -5, "98": 3}},
])
def test_penalties_change_the_text_and_speculation_keeps_it(server, penalties):
    changed = 0
    for prompt in PROMPTS:
        plain = greedy_completion(server, prompt, 32, speculative=False, **penalties)
        unpenalized = greedy_completion(server, prompt, 32, speculative=False)
        changed += text(plain) != text(unpenalized)
        for gamma in (1, 3):
            spec = greedy_completion(server, prompt, 32, draft_max=gamma, **penalties)
            assert spec["specdec"]["rounds"] > 0
            assert text(spec) == text(plain), (prompt, gamma, penalties)
    assert changed > 0, penalties


def test_seeded_sampling_with_penalties_is_reproducible(server):
    body = {"prompt": "abc abc", "max_tokens": 24, "temperature": 0.9, "seed": 7,
            "ignore_eos": True, "frequency_penalty": 1.0, "repetition_penalty": 1.3}
    a = post_json(server.base, "/v1/completions", body)
    b = post_json(server.base, "/v1/completions", body)
    assert a[0] == b[0] == 200
    assert text(a[1]) == text(b[1])


@pytest.mark.parametrize("extra, param", [
    ({"logit_bias": {"5000": 1}}, "logit_bias"),  # the tiny vocabulary has 300 tokens
    ({"logit_bias": {"x": 1}}, "logit_bias"),
    ({"logit_bias": [1, 2]}, "logit_bias"),
    ({"presence_penalty": 3}, "presence_penalty"),
    ({"repetition_penalty": -1}, "repetition_penalty"),
    ({"response_format": {"type": "xml"}}, "response_format"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
])
def test_bad_or_unsupported_parameters_get_400(server, extra, param):
    status, body = post_json(server.base, "/v1/completions",
                             {"prompt": "hi", "max_tokens": 4, **extra})
    assert status == 400, body
    assert body["error"]["param"] == param, body


def test_min_tokens_and_stop_token_ids_decide_where_the_text_ends(server):
    """vLLM's min_tokens holds back the end token (and stop_token_ids) for the first N tokens,
    exactly under speculation; a stop token id ends the text like the end token."""
    [forced] = post_json(server.base, "/tokenize", {"prompt": "Z"})[1]["tokens"]
    base = {"prompt": "hello", "max_tokens": 12, "temperature": 0, "logit_bias": {str(forced): 100}}
    for speculative in (True, False):
        status, body = post_json(server.base, "/v1/completions",
                                 {**base, "stop_token_ids": [forced], "speculative": speculative})
        assert status == 200, body
        c = body["choices"][0]
        assert c["text"] == "" and c["finish_reason"] == "stop"
        assert body["usage"]["completion_tokens"] == 1
        status, body = post_json(server.base, "/v1/completions",
                                 {**base, "stop_token_ids": [forced], "min_tokens": 4,
                                  "speculative": speculative})
        assert status == 200, body
        c = body["choices"][0]
        # Four tokens that are not the stop token, then the stop token, not part of the text.
        assert c["finish_reason"] == "stop" and "Z" not in c["text"]
        assert body["usage"]["completion_tokens"] == 5
    # Greedy text with min_tokens is the same with and without speculation.
    texts = [post_json(server.base, "/v1/completions",
                       {**base, "stop_token_ids": [forced], "min_tokens": 6,
                        "speculative": s})[1]["choices"][0]["text"] for s in (True, False)]
    assert texts[0] == texts[1]


@pytest.mark.parametrize("body, param", [
    ({"prompt": "x", "stop_token_ids": [10 ** 6]}, "stop_token_ids"),
    ({"prompt": "x", "stop_token_ids": "1"}, "stop_token_ids"),
    ({"prompt": "x", "min_tokens": 8, "max_tokens": 4}, "min_tokens"),
])
def test_bad_stop_token_ids_and_min_tokens_get_400(server, body, param):
    status, doc = post_json(server.base, "/v1/completions", body)
    assert status == 400, doc
    assert doc["error"]["param"] == param, doc
