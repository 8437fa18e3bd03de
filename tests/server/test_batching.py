"""`specdec serve --parallel N`: several requests generate at once with their forward passes
batched, and a request's output does not depend on who else is in the batch (greedy: bitwise;
seeded sampling: the same text; logprobs: the same numbers); follow-up turns go to the slot that
caches their prefix."""

import json
import threading
import time

import pytest

from conftest import Server, post_json

CMPL = "/v1/completions"
CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def batch_server(cli, models):
    s = Server(cli, ["-m", models["target"], "-md", models["draft"], "--draft-max", "3",
                     "--draft-policy", "fixed", "--no-draft-hybrid", "-t", "2", "-c", "512",
                     "--parallel", "8", "--prefill-chunk", "8"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def probe(kind):
    """The request whose output is compared alone and in company."""
    body = {"prompt": "The quick brown fox jumps over the lazy dog, and then",
            "max_tokens": 40, "ignore_eos": True, "logprobs": 2}
    if kind == "greedy":
        return {**body, "temperature": 0}
    return {**body, "temperature": 0.8, "top_p": 0.9, "seed": 4242}


def other(i):
    """Company of different lengths and settings: prompts up to ~100 tokens (several prefill
    chunks), greedy and sampled, speculative or not."""
    return {"prompt": f"Other request number {i}: " + "lorem ipsum " * (1 + 2 * i),
            "max_tokens": 20 + 9 * i, "ignore_eos": True, "temperature": 0.7 * (i % 2),
            "seed": i, "speculative": i % 3 != 2}


def run_with_company(server, body, n_others):
    """Starts n_others requests, then the probe while they run; returns the probe's reply."""
    results, errors = {}, []

    def send(key, b):
        try:
            status, reply = post_json(server.base, CMPL, b)
            results[key] = (status, reply)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=send, args=(i, other(i))) for i in range(n_others)]
    for t in threads:
        t.start()
    time.sleep(0.05)  # the others are prefilling or decoding when the probe arrives
    send("probe", body)
    for t in threads:
        t.join(120)
    assert not errors, errors
    for key, (status, reply) in results.items():
        assert status == 200, (key, reply)
    return results["probe"][1]


def essence(reply):
    c = reply["choices"][0]
    return c["text"], c["logprobs"]["tokens"], c["logprobs"]["token_logprobs"], c["finish_reason"]


def shared_passes_since(server, before):
    """Target passes since `before` (a metrics snapshot) that held more than one sequence."""
    m = server.metrics()
    count = "specdec_target_pass_sequences_count"
    alone = 'specdec_target_pass_sequences_bucket{le="1"}'
    return (m[count] - before.get(count, 0)) - (m[alone] - before.get(alone, 0))


@pytest.mark.parametrize("kind", ["greedy", "seeded"])
def test_output_is_the_same_alone_and_among_1_3_or_7_others(batch_server, kind):
    alone = essence(run_with_company(batch_server, probe(kind), 0))
    # The comparison means something only if the passes really were shared. The test models
    # are tiny, so a request can finish before the next one arrives, and once, on a loaded CI
    # runner (ctest -j2), a whole round shared no pass (its outputs still matched; timing is
    # the likely cause, not proven). So a round that shared no pass is run again, each time
    # still comparing the outputs; never sharing in 4 rounds fails.
    shared = 0
    for _ in range(4):
        before = batch_server.metrics()
        for n in (1, 3, 7):
            assert essence(run_with_company(batch_server, probe(kind), n)) == alone, n
        shared = shared_passes_since(batch_server, before)
        if shared > 0:
            break
    assert shared > 0
    assert batch_server.metrics()["specdec_slots_total"] == 8


def test_streaming_and_non_streaming_agree_under_batching(batch_server):
    from test_server import sse_stream

    whole = run_with_company(batch_server, probe("greedy"), 3)["choices"][0]["text"]
    status, events, done = sse_stream(batch_server.port, CMPL, probe("greedy"))
    assert status == 200 and done
    assert "".join(e["choices"][0]["text"] for e in events if e.get("choices")) == whole


def test_follow_up_turns_reach_the_slot_that_caches_their_prefix(batch_server):
    # Four conversations at once occupy four slots; then each one's second turn, sent alone,
    # must find its first turn cached (a lowest-free-slot policy would hit only one of them).
    convs = [[{"role": "system", "content": f"You are assistant number {i}."},
              {"role": "user", "content": f"Tell me about the number {i} " * 6}]
             for i in range(4)]
    firsts = {}

    def first_turn(i):
        firsts[i] = post_json(batch_server.base, CHAT,
                              {"messages": convs[i], "max_tokens": 24, "temperature": 0,
                               "ignore_eos": True})

    threads = [threading.Thread(target=first_turn, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for i in range(4):
        status, reply = firsts[i]
        assert status == 200, reply
        convs[i] += [{"role": "assistant", "content": reply["choices"][0]["message"]["content"]},
                     {"role": "user", "content": "And then?"}]
    before = batch_server.metrics()
    for i in range(4):
        status, reply = post_json(batch_server.base, CHAT,
                                  {"messages": convs[i], "max_tokens": 4, "temperature": 0})
        assert status == 200, reply
        cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"]
        first_prompt = firsts[i][1]["usage"]["prompt_tokens"]
        assert cached >= first_prompt, (i, cached, first_prompt)
    # Found in their own slots, not copied from another slot's cache.
    shared = "specdec_prompt_tokens_shared_total"
    assert batch_server.metrics()[shared] == before[shared]


def test_a_system_prompt_another_slot_holds_is_copied_not_recomputed(batch_server, cli, models):
    # The second conversation shares only the system prompt with the first, less than half of
    # what the first one's slot holds, so it goes to another slot (docs/architecture.md, "Slot
    # choice") and copies the system prompt's K/V from the first one's. The text is what a
    # server that recomputes it writes.
    system = {"role": "system", "content": "Answer in the voice of a patient teacher. " * 3}

    def chat(server, user):
        status, reply = post_json(server.base, CHAT, {
            "messages": [system, {"role": "user", "content": user}], "max_tokens": 24,
            "temperature": 0, "ignore_eos": True})
        assert status == 200, reply
        return reply

    first = "Count the sheep in the field, one by one, slowly. " * 5
    chat(batch_server, first)
    before = batch_server.metrics()
    question = "Explain why the sky looks blue in the afternoon and red at sunset, please. " * 2
    reply = chat(batch_server, question)
    shared = batch_server.metrics()["specdec_prompt_tokens_shared_total"] - before[
        "specdec_prompt_tokens_shared_total"]
    cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"]
    # (The slot it lands on may hold a few template tokens of its own: cached counts them too.)
    assert 0 < shared <= cached < reply["usage"]["prompt_tokens"], (shared, cached)

    plain = Server(cli, ["-m", models["target"], "-md", models["draft"], "--draft-max", "3",
                         "--draft-policy", "fixed", "--no-draft-hybrid", "-t", "2", "-c", "512",
                         "--parallel", "2", "--no-prefix-sharing"])
    try:
        chat(plain, first)
        again = chat(plain, question)
        assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        assert again["choices"][0]["message"]["content"] == reply["choices"][0]["message"][
            "content"]
        assert plain.metrics()["specdec_prompt_tokens_shared_total"] == 0
    finally:
        assert plain.stop() == 0, "".join(plain.log[-30:])


def test_conversations_starting_together_on_one_new_system_prompt_compute_it_once(cli, models):
    # Three conversations with a long system prompt no slot holds yet arrive together: one slot
    # reads it and the others wait for its rows and copy them (all but at most a prefill chunk,
    # 8 tokens, before the point where the prompts part) instead of computing them in the same
    # passes again. The slower tiny model keeps the first slot reading while the others arrive.
    server = Server(cli, ["-m", models["slow"], "-t", "2", "-c", "1024", "--parallel", "3",
                          "--prefill-chunk", "8"])
    system = {"role": "system", "content": "You review pull requests for a storage team. "
              + "Cite the line and say what you would change. " * 6}
    users = ["Is a mutex needed here?", "Why is this slow?", "Should this be a class?"]
    results = {}

    def chat(i):
        results[i] = post_json(server.base, CHAT, {
            "messages": [system, {"role": "user", "content": users[i]}], "max_tokens": 4,
            "temperature": 0, "ignore_eos": True})

    try:
        threads = [threading.Thread(target=chat, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        usage = []
        for i in range(3):
            status, reply = results[i]
            assert status == 200, reply
            usage.append((reply["usage"]["prompt_tokens"],
                          reply["usage"]["prompt_tokens_details"]["cached_tokens"]))
        shared = server.metrics()["specdec_prompt_tokens_shared_total"]
    finally:
        assert server.stop() == 0, "".join(server.log[-30:])
    # Each user turn with the template around it is under 40 tokens of its prompt.
    head = min(n for n, _ in usage) - 40
    assert head > 100, usage
    copied = sorted(cached for _, cached in usage)
    assert copied[0] == 0 and copied[1] >= head - 8, usage
    assert shared == copied[1] + copied[2], (shared, usage)


def test_a_failing_request_leaves_the_others_running(batch_server):
    results = {}

    def send(key, body):
        results[key] = post_json(batch_server.base, CMPL, body)

    threads = [threading.Thread(target=send, args=(i, other(i))) for i in range(3)]
    threads.append(threading.Thread(target=send, args=(
        "too long", {"prompt": "word " * 600, "max_tokens": 4})))  # over the 512 context
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results["too long"][0] == 400
    assert results["too long"][1]["error"]["code"] == "context_length_exceeded"
    for i in range(3):
        assert results[i][0] == 200
        assert results[i][1]["usage"]["completion_tokens"] == other(i)["max_tokens"]
