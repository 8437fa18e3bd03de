"""`logprobs` / `top_logprobs` on both endpoints, streaming or not, with and without speculation:
the target's own log-probabilities of each generated token, from the verify pass's rows."""

import json
import math

import openai
import pytest

from conftest import post_json
from test_server import client, sse_stream

MSGS = [{"role": "user", "content": "Count to ten."}]


def chat(server, stream=False, **extra):
    c = client(server)
    args = dict(model="specdec", messages=MSGS, max_tokens=16, temperature=0, logprobs=True,
                top_logprobs=3, extra_body={"ignore_eos": True, **extra})
    if not stream:
        return c.chat.completions.create(**args)
    return list(c.chat.completions.create(stream=True, **args))


def entries_of(response):
    return [(e.token, e.logprob, tuple(e.bytes), tuple((t.token, t.logprob)
             for t in e.top_logprobs)) for e in response.choices[0].logprobs.content]


def test_chat_logprobs_are_consistent_and_the_same_with_and_without_speculation(server):
    spec = chat(server)
    plain = chat(server, speculative=False)
    assert spec.model_extra["specdec"]["rounds"] > 0
    assert spec.choices[0].message.content == plain.choices[0].message.content
    entries = entries_of(spec)
    assert entries == entries_of(plain)  # the same numbers, bit for bit
    assert len(entries) == spec.usage.completion_tokens == 16
    text = b"".join(bytes(e[2]) for e in entries)
    assert text.decode("utf-8", "replace") == spec.choices[0].message.content
    for token, logprob, _, top in entries:
        assert logprob <= 0 and len(top) == 3
        assert top[0][0] == token and top[0][1] == logprob  # greedy: the most likely token
        assert top[0][1] >= top[1][1] >= top[2][1]
        assert sum(math.exp(lp) for _, lp in top) <= 1.0 + 1e-5


def test_streamed_chat_logprobs_match_the_whole_response(server):
    whole = entries_of(chat(server))
    chunks = chat(server, stream=True)
    streamed = []
    for ch in chunks:
        if ch.choices and ch.choices[0].logprobs is not None:
            c = ch.choices[0]
            streamed += [(e.token, e.logprob, tuple(e.bytes),
                          tuple((t.token, t.logprob) for t in e.top_logprobs))
                         for e in c.logprobs.content]
    assert streamed == whole


def test_completions_logprobs_format(server):
    status, body = post_json(server.base, "/v1/completions",
                             {"prompt": "One, two,", "max_tokens": 8, "temperature": 0,
                              "ignore_eos": True, "logprobs": 2})
    assert status == 200, body
    lp = body["choices"][0]["logprobs"]
    assert set(lp) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 8
    assert lp["text_offset"][0] == 0
    assert all(a <= b for a, b in zip(lp["text_offset"], lp["text_offset"][1:]))
    for token, logprob, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
        assert len(top) <= 2 and max(top.values()) == pytest.approx(logprob)
    # Streaming gives the same entries, spread over the chunks.
    status, events, done = sse_stream(server.port, "/v1/completions",
                                      {"prompt": "One, two,", "max_tokens": 8, "temperature": 0,
                                       "ignore_eos": True, "logprobs": 2})
    assert status == 200 and done
    tokens, values = [], []
    for e in events:
        c = e["choices"][0] if e.get("choices") else None
        if c and c.get("logprobs"):
            tokens += c["logprobs"]["tokens"]
            values += c["logprobs"]["token_logprobs"]
    assert tokens == lp["tokens"] and values == lp["token_logprobs"]


def test_no_logprobs_unless_asked(server):
    r = client(server).chat.completions.create(model="specdec", messages=MSGS, max_tokens=4)
    assert r.choices[0].logprobs is None


@pytest.mark.parametrize("body,param", [
    ({"messages": MSGS, "top_logprobs": 2}, "top_logprobs"),
    ({"messages": MSGS, "logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"prompt": "x", "logprobs": 21}, "logprobs"),
])
def test_bad_logprobs_requests_get_400(server, body, param):
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    status, reply = post_json(server.base, path, body)
    assert status == 400, reply
    assert reply["error"]["param"] == param
