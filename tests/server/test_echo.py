"""Completions with `echo`, token-id prompts and several prompts per request: what evaluation
harnesses (lm-evaluation-harness's local-completions loglikelihood requests) and batch clients
send. Scoring a text gives, for the tokens a greedy generation produced, exactly the logprobs the
generation reported (batch-invariant rows), with and without speculation."""

import pytest

from conftest import post_json
from test_server import client, greedy_completion, sse_stream

PROMPT = "The capital of France is"


def ids_of(lp):
    """Token ids from logprobs rendered with return_tokens_as_token_ids."""
    return [int(t.split(":")[1]) for t in lp["tokens"]]


def prompt_ids(server, text):
    status, doc = post_json(server.base, "/tokenize", {"prompt": text})
    assert status == 200, doc
    return doc["tokens"]


def completion(server, **body):
    status, doc = post_json(server.base, "/v1/completions",
                            {"temperature": 0, "ignore_eos": True, **body})
    assert status == 200, doc
    return doc


@pytest.mark.parametrize("speculative", [True, False])
def test_scoring_a_generated_text_gives_the_generations_logprobs(server, speculative):
    gen = greedy_completion(server, PROMPT, 10, logprobs=3, return_tokens_as_token_ids=True,
                            speculative=speculative)
    gen_lp = gen["choices"][0]["logprobs"]
    generated = ids_of(gen_lp)
    assert len(generated) == 10
    prompt = prompt_ids(server, PROMPT)
    scored = completion(server, prompt=prompt + generated, max_tokens=0, echo=True, logprobs=3,
                        return_tokens_as_token_ids=True, speculative=speculative)
    choice = scored["choices"][0]
    lp = choice["logprobs"]
    assert ids_of(lp) == prompt + generated
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(v is not None and v <= 0 for v in lp["token_logprobs"][1:])
    # The generated tokens' numbers, bit for bit (JSON floats round-trip exactly).
    assert lp["token_logprobs"][len(prompt):] == gen_lp["token_logprobs"]
    assert lp["top_logprobs"][len(prompt):] == gen_lp["top_logprobs"]
    assert choice["text"] == PROMPT + gen["choices"][0]["text"]
    assert choice["finish_reason"] == "length"
    assert scored["usage"]["completion_tokens"] == 0
    assert scored["usage"]["prompt_tokens"] == len(prompt) + 10


def test_echo_with_generation_keeps_the_text_and_offsets_follow_it(server):
    plain = greedy_completion(server, PROMPT, 8, logprobs=1)
    echoed = greedy_completion(server, PROMPT, 8, logprobs=1, echo=True)
    c, p = echoed["choices"][0], plain["choices"][0]
    assert c["text"] == PROMPT + p["text"]
    n_prompt = len(prompt_ids(server, PROMPT))
    lp = c["logprobs"]
    assert len(lp["tokens"]) == n_prompt + 8
    assert lp["tokens"][n_prompt:] == p["logprobs"]["tokens"]
    assert lp["token_logprobs"][n_prompt:] == p["logprobs"]["token_logprobs"]
    # Offsets index the echoed text: each token's text starts where its offset says.
    for token, offset in zip(lp["tokens"], lp["text_offset"]):
        if not token.startswith("bytes:"):
            assert c["text"][offset:offset + len(token)] == token
    assert lp["text_offset"][n_prompt] == len(PROMPT)
    # Without logprobs the prompt is echoed all the same.
    assert greedy_completion(server, PROMPT, 8, echo=True)["choices"][0]["text"] == c["text"]


def test_streamed_echo_matches_the_whole_response(server):
    body = {"prompt": PROMPT, "max_tokens": 6, "temperature": 0, "ignore_eos": True, "echo": True,
            "logprobs": 2}
    whole = completion(server, **body)["choices"][0]
    for with_logprobs in (True, False):
        b = dict(body) if with_logprobs else {k: v for k, v in body.items() if k != "logprobs"}
        status, events, done = sse_stream(server.port, "/v1/completions", b)
        assert status == 200 and done
        chunks = [e["choices"][0] for e in events if e.get("choices")]
        assert chunks[0]["text"] == PROMPT  # the prompt comes first, as its own chunk
        assert "".join(c["text"] for c in chunks) == whole["text"]
        if with_logprobs:
            tokens, values, offsets = [], [], []
            for c in chunks:
                if c.get("logprobs"):
                    tokens += c["logprobs"]["tokens"]
                    values += c["logprobs"]["token_logprobs"]
                    offsets += c["logprobs"]["text_offset"]
            assert tokens == whole["logprobs"]["tokens"]
            assert values == whole["logprobs"]["token_logprobs"]
            assert offsets == whole["logprobs"]["text_offset"]


def test_streamed_scoring_without_generation(server):
    status, events, done = sse_stream(server.port, "/v1/completions",
                                      {"prompt": PROMPT, "max_tokens": 0, "echo": True,
                                       "logprobs": 0})
    assert status == 200 and done
    chunks = [e["choices"][0] for e in events if e.get("choices")]
    assert chunks[0]["text"] == PROMPT
    assert chunks[0]["logprobs"]["token_logprobs"][0] is None
    assert len(chunks[0]["logprobs"]["tokens"]) == len(prompt_ids(server, PROMPT))
    assert chunks[-1]["finish_reason"] == "length" and chunks[-1]["text"] == ""
    assert sum(len(c["text"]) for c in chunks) == len(PROMPT)


def test_several_prompts_give_prompts_times_n_choices_in_order(server):
    prompts = ["One, two,", "Red, green,", PROMPT]
    singles = [greedy_completion(server, p, 5)["choices"][0]["text"] for p in prompts]
    body = completion(server, prompt=prompts, max_tokens=5, n=2)
    choices = body["choices"]
    assert [c["index"] for c in choices] == list(range(6))
    assert [c["text"] for c in choices] == [t for t in singles for _ in range(2)]
    counts = [len(prompt_ids(server, p)) for p in prompts]
    assert body["usage"]["prompt_tokens"] == sum(counts)
    assert body["usage"]["completion_tokens"] == 30
    # Token-id prompts are the same prompts.
    by_ids = completion(server, prompt=[prompt_ids(server, p) for p in prompts], max_tokens=5)
    assert [c["text"] for c in by_ids["choices"]] == singles
    one = completion(server, prompt=prompt_ids(server, prompts[0]), max_tokens=5)
    assert one["choices"][0]["text"] == singles[0]
    # Streamed: every choice's chunks carry its index, and its text is the same.
    status, events, done = sse_stream(server.port, "/v1/completions",
                                      {"prompt": prompts, "max_tokens": 5, "temperature": 0,
                                       "ignore_eos": True})
    assert status == 200 and done
    texts = {}
    for e in events:
        for c in e.get("choices", []):
            texts[c["index"]] = texts.get(c["index"], "") + c["text"]
    assert [texts[i] for i in range(3)] == singles


def test_the_openai_client_scores_a_continuation(server):
    """lm-evaluation-harness's loglikelihood request: token ids, echo, logprobs, max_tokens 1;
    the continuation's log-likelihood is the sum of its tokens' logprobs."""
    context = prompt_ids(server, "Once upon a")
    continuation = prompt_ids(server, " time")
    r = client(server).completions.create(model="specdec", prompt=[context + continuation],
                                          echo=True, logprobs=1, max_tokens=1, temperature=0)
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == len(context) + len(continuation) + 1
    scores = lp.token_logprobs[len(context):-1]
    assert len(scores) == len(continuation) and all(s <= 0 for s in scores)
    # The same numbers as scoring the context and continuation alone with max_tokens 0.
    alone = completion(server, prompt=context + continuation, max_tokens=0, echo=True,
                       logprobs=1)
    assert alone["choices"][0]["logprobs"]["token_logprobs"][len(context):] == scores


@pytest.mark.parametrize("path, body, param", [
    ("/v1/completions", {"prompt": [1, 10 ** 6]}, "prompt"),
    ("/v1/completions", {"prompt": ["a", [1, 10 ** 6]]}, "prompt[1]"),
    ("/v1/completions", {"prompt": []}, "prompt"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ("/v1/completions", {"prompt": ["a"] * 65}, "prompt"),
    ("/v1/completions", {"prompt": ["a"] * 5, "n": 16}, "n"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "echo": True},
     "echo"),
])
def test_bad_prompts_and_echo_requests_get_400(server, path, body, param):
    status, doc = post_json(server.base, path, body)
    assert status == 400, doc
    assert doc["error"]["param"] == param, doc


def test_prompt_logprobs_in_vllms_shape(server):
    """vLLM's prompt_logprobs: per completions choice (once for a chat), null first, then each
    prompt token's logprob and rank with its top alternatives, the same numbers echo reports."""
    ids = prompt_ids(server, PROMPT)
    body = completion(server, prompt=PROMPT, max_tokens=2, prompt_logprobs=2, echo=True,
                      logprobs=1)
    choice = body["choices"][0]
    pl = choice["prompt_logprobs"]
    assert len(pl) == len(ids) and pl[0] is None
    echo = choice["logprobs"]["token_logprobs"][:len(ids)]
    for i, (entry, token) in enumerate(zip(pl[1:], ids[1:]), start=1):
        assert str(token) in entry and 2 <= len(entry) <= 3
        assert entry[str(token)]["logprob"] == echo[i]
        ranks = sorted(v["rank"] for v in entry.values())
        assert ranks[0] == 1 and entry[str(token)]["rank"] >= 1
        # echo showed its own (logprobs 1) alternatives: one each.
        assert len(choice["logprobs"]["top_logprobs"][i]) == 1
    # Generation is unchanged by asking for them.
    assert choice["text"] == PROMPT + greedy_completion(server, PROMPT, 2)["choices"][0]["text"]
    status, chat = post_json(server.base, "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                              "temperature": 0, "prompt_logprobs": 0})
    assert status == 200, chat
    n_chat = chat["usage"]["prompt_tokens"]
    assert len(chat["prompt_logprobs"]) == n_chat and chat["prompt_logprobs"][0] is None
    assert all(len(e) == 1 for e in chat["prompt_logprobs"][1:])
    status, doc = post_json(server.base, "/v1/completions",
                            {"prompt": "x", "prompt_logprobs": 1, "stream": True})
    assert status == 400 and doc["error"]["param"] == "prompt_logprobs"


def test_suffix_fills_in_the_middle(server, cli, models):
    """`suffix` (completions): the model writes what goes between the prompt and the suffix,
    prompted with its fill-in-the-middle markers ([BOS] PRE prefix SUF suffix MID), the same
    greedy text with and without speculation; a model without the markers refuses it."""
    prefix, suffix = "def add(a, b):\n    ", "\n\nprint(add(1, 2))"
    n_prefix = len(post_json(server.base, "/tokenize", {"prompt": prefix})[1]["tokens"])
    n_suffix = len(post_json(server.base, "/tokenize", {"prompt": suffix})[1]["tokens"])
    texts = []
    for speculative in (True, False):
        body = completion(server, prompt=prefix, suffix=suffix, max_tokens=8,
                          speculative=speculative)
        assert body["usage"]["prompt_tokens"] == n_prefix + n_suffix + 3
        texts.append(body["choices"][0]["text"])
    assert texts[0] == texts[1]
    # The markers changed the prompt: a plain completion of the prefix differs in its usage.
    assert greedy_completion(server, prefix, 8)["usage"]["prompt_tokens"] == n_prefix
    from conftest import Server
    s = Server(cli, ["-m", models["slow"], "-t", "1", "-c", "256"])
    try:
        status, doc = post_json(s.base, "/v1/completions",
                                {"prompt": prefix, "suffix": suffix, "max_tokens": 2})
        assert status == 400 and doc["error"]["param"] == "suffix", doc
    finally:
        assert s.stop() == 0
