"""n > 1: several choices per request, each its own sequence (and slot, with --parallel). At
temperature 0 every choice is the one greedy text; a seeded request's choice i is what the same
request with seed + i gives alone; streaming gives each choice's chunks under its index and the
same texts as the whole response."""

import json

import pytest

from conftest import Server, post_json
from test_server import sse_stream

BODY = {"prompt": "The quick brown fox", "max_tokens": 24, "ignore_eos": True}


@pytest.fixture(scope="module")
def two_slot_server(cli, models):
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "--draft-max", "3",
                     "--draft-policy", "fixed", "--no-draft-hybrid", "-t", "2", "-c", "512",
                     "--parallel", "2"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def texts(body):
    return [c["text"] for c in sorted(body["choices"], key=lambda c: c["index"])]


def test_greedy_choices_are_the_greedy_text(two_slot_server):
    status, one = post_json(two_slot_server.base, "/v1/completions", {**BODY, "temperature": 0})
    assert status == 200, one
    status, three = post_json(two_slot_server.base, "/v1/completions",
                              {**BODY, "temperature": 0, "n": 3})
    assert status == 200, three
    assert [c["index"] for c in three["choices"]] == [0, 1, 2]
    assert texts(three) == texts(one) * 3
    assert three["usage"]["completion_tokens"] == 3 * one["usage"]["completion_tokens"]
    assert three["usage"]["prompt_tokens"] == one["usage"]["prompt_tokens"]


def test_seeded_choice_i_is_the_request_with_seed_plus_i(two_slot_server):
    base = {**BODY, "temperature": 1.0, "top_k": 20}
    status, many = post_json(two_slot_server.base, "/v1/completions", {**base, "seed": 40, "n": 3})
    assert status == 200, many
    alone = []
    for i in range(3):
        status, one = post_json(two_slot_server.base, "/v1/completions", {**base, "seed": 40 + i})
        assert status == 200, one
        alone += texts(one)
    assert texts(many) == alone
    assert len(set(alone)) > 1  # the choices are different draws


def test_streamed_choices_match_the_whole_response(two_slot_server):
    body = {**BODY, "temperature": 1.0, "seed": 5, "n": 2, "stream_options": {"include_usage": True}}
    status, whole = post_json(two_slot_server.base, "/v1/completions", body)
    assert status == 200, whole
    status, events, done = sse_stream(two_slot_server.port, "/v1/completions", body)
    assert status == 200 and done
    got, finished = {0: "", 1: ""}, set()
    for ev in events:
        for c in ev["choices"]:
            got[c["index"]] += c["text"]
            if c["finish_reason"] is not None:
                finished.add(c["index"])
    assert finished == {0, 1}
    assert [got[0], got[1]] == texts(whole)
    assert events[-1]["choices"] == [] and events[-1]["usage"] == whole["usage"]


def test_chat_choices(two_slot_server):
    status, body = post_json(two_slot_server.base, "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8,
                              "temperature": 0, "n": 2, "logprobs": True, "top_logprobs": 1})
    assert status == 200, body
    contents = [c["message"]["content"] for c in body["choices"]]
    assert len(contents) == 2 and contents[0] == contents[1]
    assert all(len(c["logprobs"]["content"]) > 0 for c in body["choices"])


def test_more_choices_than_the_queue_holds_get_503_and_leave_nothing_behind(cli, models):
    s = Server(cli, ["-m", models["target"], "-t", "2", "-c", "256", "--parallel", "1",
                     "--queue-size", "3"])
    try:
        # 6 choices: at most one running and three waiting, whenever the worker takes the first.
        status, body = post_json(s.base, "/v1/completions", {**BODY, "n": 6})
        assert status == 503, body
        assert body["error"]["code"] == "queue_full"
        # 3 fit even before the worker takes one.
        status, body = post_json(s.base, "/v1/completions", {**BODY, "n": 3, "temperature": 0})
        assert status == 200, body
        assert len(body["choices"]) == 3
    finally:
        assert s.stop() == 0, "".join(s.log[-30:])


def mean_logprob(choice):
    lps = choice["logprobs"]["token_logprobs"]
    return sum(lps) / len(lps)


def test_best_of_returns_the_n_likeliest_of_its_sequences(two_slot_server):
    # best_of 4 with n 3 returns three of the four sequences, best first: their mean
    # log-probabilities per token (from the response's own entries) do not increase. With n 2
    # the same two best come back, with n 1 the best, and usage counts all four sequences each
    # time: a seeded sequence is the same in any request, on whichever slot it runs beside
    # whichever other. (The slots hold test_chat_choices' chat when this starts: a slot that
    # offered another slot its stale rows of that chat as this prompt's failed this once.)
    base = {**BODY, "temperature": 1.0, "top_k": 20, "seed": 40}
    status, every = post_json(two_slot_server.base, "/v1/completions",
                              {**base, "n": 3, "best_of": 4, "logprobs": 0})
    assert status == 200, every
    assert [c["index"] for c in every["choices"]] == [0, 1, 2]
    means = [mean_logprob(c) for c in every["choices"]]
    assert means == sorted(means, reverse=True), means
    assert len(set(texts(every))) > 1  # different draws, or the test means nothing
    per_sequence = BODY["max_tokens"]  # ignore_eos: every sequence is that long
    assert every["usage"]["completion_tokens"] == 4 * per_sequence
    status, best = post_json(two_slot_server.base, "/v1/completions",
                             {**base, "n": 2, "best_of": 4})
    assert status == 200, best
    assert [c["index"] for c in best["choices"]] == [0, 1]
    assert texts(best) == texts(every)[:2]
    assert best["choices"][0]["logprobs"] is None  # not asked for
    assert best["usage"]["completion_tokens"] == 4 * per_sequence
    status, one = post_json(two_slot_server.base, "/v1/completions",
                            {**base, "best_of": 4, "logprobs": 1})
    assert status == 200, one
    assert len(one["choices"]) == 1 and one["usage"]["completion_tokens"] == 4 * per_sequence
    assert texts(one) == texts(every)[:1]
    assert len(one["choices"][0]["logprobs"]["top_logprobs"][0]) == 1


@pytest.mark.parametrize("extra,code", [
    ({"n": 3, "best_of": 2}, "invalid_value"),
    ({"best_of": 2, "stream": True}, "unsupported_value"),
])
def test_best_of_below_n_or_streamed_is_refused(two_slot_server, extra, code):
    status, doc = post_json(two_slot_server.base, "/v1/completions", {**BODY, **extra})
    assert status == 400 and doc["error"]["param"] == "best_of", doc
    assert doc["error"]["code"] == code, doc
    status, doc = post_json(two_slot_server.base, "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "hi"}], "best_of": 2})
    assert status == 400 and doc["error"]["param"] == "best_of", doc
