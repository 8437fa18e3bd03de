"""llama-server's own endpoints, /completion and /infill, for the clients written against them
(editor plugins such as llama.vscode and llama.vim call /infill): llama-server's field names,
defaults and response shape, the same greedy text as the OpenAI-style endpoint and with or
without speculation, and a 400 naming the field for what is not supported; and its
introspection endpoints (/props, /slots, /apply-template)."""

import json
import threading
import urllib.error

import pytest

from conftest import Server, post_json
from test_server import greedy_completion, sse_stream

PROMPT = "The capital of France is"


def native(server, path="/completion", status=200, **body):
    got, doc = post_json(server.base, path, body)
    assert got == status, doc
    return doc


def token_ids(server, text):
    return post_json(server.base, "/tokenize", {"content": text})[1]["tokens"]


@pytest.mark.parametrize("speculative", [True, False])
def test_completion_is_the_openai_endpoints_greedy_text(server, speculative):
    doc = native(server, prompt=PROMPT, n_predict=12, temperature=0, ignore_eos=True,
                 speculative=speculative)
    want = greedy_completion(server, PROMPT, 12)["choices"][0]["text"]
    assert doc["content"] == want
    assert doc["stop"] is True and doc["stop_type"] == "limit" and doc["stopping_word"] == ""
    assert doc["tokens_predicted"] == 12
    assert doc["tokens_evaluated"] == len(token_ids(server, PROMPT))
    assert doc["prompt"] == PROMPT and doc["truncated"] is False
    assert doc["model"] == "tiny-target" and doc["index"] == 0 and doc["tokens"] == []
    t = doc["timings"]
    assert t["predicted_n"] == 12 and t["prompt_n"] + t["cache_n"] == doc["tokens_evaluated"]
    assert ("draft_n" in t) == speculative
    if speculative:
        assert 0 <= t["draft_n_accepted"] <= t["draft_n"]


def test_llama_server_defaults_and_the_samplers_list(server):
    settings = native(server, prompt=PROMPT, n_predict=2, seed=3)["generation_settings"]
    assert settings["temperature"] == pytest.approx(0.8)
    assert settings["top_k"] == 40
    assert settings["top_p"] == pytest.approx(0.95)
    assert settings["min_p"] == pytest.approx(0.05)
    assert settings["n_predict"] == 2 and settings["seed"] == 3
    assert settings["samplers"] == ["top_k", "top_p", "min_p", "temperature"]
    assert settings["speculative"] is True
    assert native(server, prompt=PROMPT, n_predict=1, speculative=False)["generation_settings"][
        "speculative"] is False
    # A seeded sampled request is reproducible.
    a = native(server, prompt=PROMPT, n_predict=10, seed=11, ignore_eos=True)["content"]
    assert native(server, prompt=PROMPT, n_predict=10, seed=11, ignore_eos=True)["content"] == a
    # A filter the list leaves out is off; without "temperature" sampling is at temperature 1
    # (llama.vscode's list: "infill" is a sampler specdec does not have, and is skipped).
    s = native(server, prompt=PROMPT, n_predict=2, samplers=["top_k", "top_p", "infill"],
               top_p=0.99)["generation_settings"]
    assert s["samplers"] == ["top_k", "top_p"]
    assert s["temperature"] == 1.0 and s["min_p"] == 0.0 and s["top_k"] == 40
    assert native(server, prompt=PROMPT, n_predict=2, samplers=[])["generation_settings"][
        "samplers"] == []
    # llama-server's string of letters (k top_k, p top_p, t temperature, ...).
    s = native(server, prompt=PROMPT, n_predict=2, samplers="kpt", top_p=0.99)[
        "generation_settings"]
    assert s["samplers"] == ["top_k", "top_p", "temperature"] and s["min_p"] == 0.0
    # Greedy at any temperature <= 0, as there.
    assert native(server, prompt=PROMPT, n_predict=6, temperature=-1, ignore_eos=True)[
        "content"] == greedy_completion(server, PROMPT, 6)["choices"][0]["text"]


def test_prompt_forms_and_several_completions(server):
    ids = token_ids(server, PROMPT)
    by_text = native(server, prompt=PROMPT, n_predict=6, temperature=0, ignore_eos=True,
                     return_tokens=True)
    by_ids = native(server, prompt=ids, n_predict=6, temperature=0, ignore_eos=True)
    assert by_ids["content"] == by_text["content"]
    assert len(by_text["tokens"]) == 6
    # Ids and text mixed make one prompt.
    head = token_ids(server, "The capital")
    mixed = native(server, prompt=head + [" of France is"], n_predict=6, temperature=0,
                   ignore_eos=True)
    assert mixed["tokens_evaluated"] == len(head) + len(token_ids(server, " of France is"))
    # Several prompts: an array, one entry each, in order.
    docs = native(server, prompt=[PROMPT, "Hello"], n_predict=4, temperature=0, ignore_eos=True)
    assert [d["index"] for d in docs] == [0, 1]
    assert docs[0]["content"] == greedy_completion(server, PROMPT, 4)["choices"][0]["text"]
    assert docs[1]["content"] == greedy_completion(server, "Hello", 4)["choices"][0]["text"]
    # n_cmpl: several completions of one prompt, choice i seeded seed + i.
    two = native(server, prompt=PROMPT, n_predict=8, n_cmpl=2, seed=5, ignore_eos=True)
    assert len(two) == 2
    assert two[1]["content"] == native(server, prompt=PROMPT, n_predict=8, seed=6,
                                       ignore_eos=True)["content"]


def test_stream_sends_pieces_then_the_result_without_done(server):
    whole = native(server, prompt=PROMPT, n_predict=12, temperature=0, ignore_eos=True)
    status, events, done = sse_stream(server.port, "/completion",
                                      {"prompt": PROMPT, "n_predict": 12, "temperature": 0,
                                       "ignore_eos": True})
    assert status == 200 and not done  # llama-server's own stream has no [DONE] line
    pieces, last = events[:-1], events[-1]
    assert all(e["stop"] is False for e in pieces)
    assert "".join(e["content"] for e in pieces) == whole["content"]
    assert last["stop"] is True and last["content"] == ""
    assert last["tokens_predicted"] == 12 and last["stop_type"] == "limit"


def test_n_probs_are_the_targets_logprobs(server):
    doc = native(server, prompt=PROMPT, n_predict=6, temperature=0, ignore_eos=True, n_probs=3,
                 return_tokens=True)
    probs = doc["completion_probabilities"]
    assert [p["id"] for p in probs] == doc["tokens"]
    openai = greedy_completion(server, PROMPT, 6, logprobs=3)["choices"][0]["logprobs"]
    assert [p["logprob"] for p in probs] == openai["token_logprobs"]
    for p in probs:
        assert len(p["top_logprobs"]) == 3 and p["top_logprobs"][0]["logprob"] >= p["logprob"]
        if all(b < 128 for b in p["bytes"]):
            assert bytes(p["bytes"]).decode() == p["token"]
    status, events, _ = sse_stream(server.port, "/completion",
                                   {"prompt": PROMPT, "n_predict": 6, "temperature": 0,
                                    "ignore_eos": True, "n_probs": 3})
    streamed = [p for e in events[:-1] for p in e.get("completion_probabilities", [])]
    assert [p["id"] for p in streamed] == doc["tokens"]


@pytest.mark.parametrize("speculative", [True, False])
def test_post_sampling_probs_are_the_sampled_distribution(server, speculative):
    # top_k 2 leaves two tokens a row: their probabilities after the chain sum to 1 and the
    # sampled token is one of them, with its probability there.
    doc = native(server, prompt=PROMPT, n_predict=8, ignore_eos=True, n_probs=3, top_k=2,
                 top_p=1, min_p=0, seed=3, post_sampling_probs=True, return_tokens=True,
                 speculative=speculative)
    probs = doc["completion_probabilities"]
    assert [p["id"] for p in probs] == doc["tokens"]
    assert doc["generation_settings"]["post_sampling_probs"] is True
    for p in probs:
        assert "logprob" not in p and len(p["top_probs"]) == 2
        assert sum(t["prob"] for t in p["top_probs"]) == pytest.approx(1, abs=1e-5)
        assert p["prob"] == pytest.approx(
            next(t["prob"] for t in p["top_probs"] if t["id"] == p["id"]))
    # Greedy: the chain leaves the argmax alone, probability 1, streamed the same.
    body = {"prompt": PROMPT, "n_predict": 5, "temperature": 0, "ignore_eos": True, "n_probs": 2,
            "post_sampling_probs": True, "speculative": speculative}
    greedy = native(server, return_tokens=True, **body)
    for p in greedy["completion_probabilities"]:
        assert p["prob"] == 1 and [t["id"] for t in p["top_probs"]] == [p["id"]]
    status, events, _ = sse_stream(server.port, "/completion", {**body, "stream": True})
    streamed = [p for e in events[:-1] for p in e.get("completion_probabilities", [])]
    assert [p["id"] for p in streamed] == greedy["tokens"]
    assert all(p["prob"] == 1 for p in streamed)


@pytest.mark.parametrize("speculative", [True, False])
def test_the_temperature_stands_where_the_samplers_list_puts_it(server, speculative):
    # The target's three likeliest first tokens at temperature 1 (renormalized over the three):
    # p1 >= p2 >= p3, r = p3 / p1.
    body = {"prompt": PROMPT, "n_predict": 1, "n_probs": 3, "seed": 5, "top_k": 3, "top_p": 1,
            "post_sampling_probs": True, "speculative": speculative}
    raw = native(server, temperature=1, min_p=0, **body)["completion_probabilities"][0][
        "top_probs"]
    p = [t["prob"] for t in raw]
    r = p[2] / p[0]
    assert r < 0.95, p  # the test needs three tokens that temperature 0.5 pulls apart
    # min-p just under r: at temperature 1 (llama-server's order, the temperature last) all three
    # stay, then sampled at 0.5, in proportion to p^2; at 0.5 first, p3 / p1 is r^2 < min-p.
    body.update(temperature=0.5, min_p=0.98 * r)
    last = native(server, **body)
    assert last["generation_settings"]["temperature_last"] is True
    got = [t["prob"] for t in last["completion_probabilities"][0]["top_probs"]]
    want = [q * q / sum(x * x for x in p) for q in p]
    assert got == pytest.approx(want, abs=1e-4)
    first = native(server, samplers=["temperature", "top_k", "min_p"], **body)
    assert first["generation_settings"]["temperature_last"] is False
    assert len(first["completion_probabilities"][0]["top_probs"]) < 3
    # The temperature between two filters that measure probabilities: refused, not reordered.
    doc = native(server, status=400, samplers=["top_k", "top_p", "temperature", "min_p"],
                 **{**body, "top_p": 0.9})
    assert doc["error"]["param"] == "samplers" and "temperature between" in doc["error"]["message"]


@pytest.mark.parametrize("speculative", [True, False])
def test_xtc_typical_and_top_n_sigma_are_applied(server, speculative):
    # XTC that always fires with threshold 0 makes every candidate a top choice and keeps only the
    # least likely: with top_k 2, each token is the target's second choice (n_probs lists them).
    doc = native(server, prompt=PROMPT, n_predict=8, ignore_eos=True, n_probs=2, top_k=2,
                 top_p=1, min_p=0, xtc_probability=1, xtc_threshold=0, return_tokens=True,
                 speculative=speculative)
    assert doc["generation_settings"]["samplers"] == ["top_k", "xtc", "temperature"]
    for p in doc["completion_probabilities"]:
        assert p["id"] == p["top_logprobs"][1]["id"]
    # top_n_sigma 0.01 leaves only the largest logit: the greedy text.
    sigma = native(server, prompt=PROMPT, n_predict=8, ignore_eos=True, top_n_sigma=0.01, seed=5,
                   speculative=speculative)
    assert sigma["content"] == greedy_completion(server, PROMPT, 8)["choices"][0]["text"]
    # Typical sampling and a dynamic temperature through the OpenAI-style endpoint: a seeded
    # request is reproducible and the settings are reported.
    body = {"prompt": PROMPT, "max_tokens": 8, "temperature": 1, "typical_p": 0.5, "seed": 9,
            "dynatemp_range": 0.5, "speculative": speculative}
    a = post_json(server.base, "/v1/completions", body)
    b = post_json(server.base, "/v1/completions", body)
    assert a[0] == 200 and a[1]["choices"][0]["text"] == b[1]["choices"][0]["text"]
    settings = native(server, prompt=PROMPT, n_predict=1, typical_p=0.5, top_n_sigma=2,
                      xtc_probability=0.3, xtc_threshold=0.2, dynatemp_range=0.4)[
                          "generation_settings"]
    assert settings["dynatemp_range"] == pytest.approx(0.4)
    assert settings["dynatemp_exponent"] == pytest.approx(1)
    assert settings["typical_p"] == pytest.approx(0.5)
    assert settings["top_n_sigma"] == pytest.approx(2)
    assert settings["xtc_probability"] == pytest.approx(0.3)
    assert settings["xtc_threshold"] == pytest.approx(0.2)
    assert settings["samplers"] == ["top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc",
                                    "temperature"]
    got, err = post_json(server.base, "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], "typical_p": -1})
    assert got == 400 and err["error"]["param"] == "typical_p"


@pytest.mark.parametrize("speculative", [True, False])
def test_mirostat_is_applied_and_reported(server, speculative):
    # Mirostat 2 with tau 0 starts at mu 0 and keeps only tokens of surprise 0 (probability 1
    # after the cut): the most likely token alone, whose surprise keeps mu at 0, so the text is
    # the greedy text although the temperature is 1 (the default filters are ignored under it).
    doc = native(server, prompt=PROMPT, n_predict=10, ignore_eos=True, temperature=1, seed=4,
                 mirostat=2, mirostat_tau=0, speculative=speculative)
    assert doc["content"] == greedy_completion(server, PROMPT, 10)["choices"][0]["text"]
    settings = doc["generation_settings"]
    assert settings["mirostat"] == 2 and settings["mirostat_tau"] == 0
    assert settings["mirostat_eta"] == pytest.approx(0.1)
    # Without the cap the same seed samples something else (the check above can fail).
    free = native(server, prompt=PROMPT, n_predict=10, ignore_eos=True, temperature=1, seed=4,
                  mirostat=2, mirostat_tau=100, speculative=speculative)
    assert free["content"] != doc["content"]
    # Version 1 through the OpenAI-style endpoints: a seeded request is reproducible.
    body = {"prompt": PROMPT, "max_tokens": 8, "temperature": 1, "mirostat": 1,
            "mirostat_tau": 3, "mirostat_eta": 0.5, "seed": 9, "speculative": speculative}
    a = post_json(server.base, "/v1/completions", body)
    b = post_json(server.base, "/v1/completions", body)
    assert a[0] == 200 and a[1]["choices"][0]["text"] == b[1]["choices"][0]["text"]
    got, err = post_json(server.base, "/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], "mirostat": 7})
    assert got == 400 and err["error"]["param"] == "mirostat"


def test_penalties_count_llama_servers_window(server):
    # repeat_penalty 10 with presence 2 and frequency 2 all but bans a token inside the window
    # (the tiny model's logits are flat): with repeat_last_n 4 no token repeats one of the four
    # before it, with -1 none repeats anything before it, prompt included (llama.cpp's rule).
    prompt = "one two one two one two one"
    base = dict(prompt=prompt, n_predict=20, temperature=0, ignore_eos=True, return_tokens=True,
                repeat_penalty=10, presence_penalty=2, frequency_penalty=2)
    ids = token_ids(server, prompt)
    texts = {}
    for last_n in (4, -1):
        docs = [native(server, speculative=s, repeat_last_n=last_n, **base) for s in (True, False)]
        assert docs[0]["tokens"] == docs[1]["tokens"]  # still the target's greedy text
        text = ids + docs[0]["tokens"]
        for i in range(len(ids), len(text)):
            window = text[max(0, i - 4):i] if last_n == 4 else text[:i]
            assert text[i] not in window, (last_n, i)
        texts[last_n] = docs[0]["tokens"]
    assert texts[4] != texts[-1]  # the window changed the text
    # llama-server's default window is 64.
    assert native(server, **base)["tokens"] == native(server, repeat_last_n=64, **base)["tokens"]
    off = native(server, repeat_last_n=0, **base)["tokens"]
    assert off == native(server, prompt=prompt, n_predict=20, temperature=0, ignore_eos=True,
                         return_tokens=True)["tokens"]


def test_dry_bans_repeated_pairs_and_keeps_speculation_exact(server):
    # allowed_length 1 and a multiplier of 100: a token that followed an earlier occurrence of
    # the last token loses 100 or more, so no pair of adjacent tokens repeats in prompt + text.
    prompt = "one two one two one two one"
    body = dict(prompt=prompt, n_predict=24, temperature=0, ignore_eos=True, return_tokens=True,
                dry_multiplier=100, dry_allowed_length=1, dry_sequence_breakers=[])
    docs = [native(server, speculative=s, **body) for s in (True, False)]
    assert docs[0]["tokens"] == docs[1]["tokens"]  # greedy speculation is still the target's
    text = token_ids(server, prompt) + docs[0]["tokens"]
    pairs = list(zip(text, text[1:]))
    prompt_pairs = len(token_ids(server, prompt)) - 1
    for i in range(prompt_pairs, len(pairs)):
        assert pairs[i] not in pairs[:i], (i, pairs[i])
    # Without DRY the tiny model's greedy text repeats a pair (the check above can fail).
    plain = native(server, prompt=prompt, n_predict=24, temperature=0, ignore_eos=True,
                   return_tokens=True)["tokens"]
    text = token_ids(server, prompt) + plain
    pairs = list(zip(text, text[1:]))
    assert any(pairs[i] in pairs[:i] for i in range(prompt_pairs, len(pairs)))
    settings = docs[0]["generation_settings"]
    assert settings["dry_multiplier"] == 100 and settings["dry_sequence_breakers"] == []
    assert "dry" in settings["samplers"]
    got, err = post_json(server.base, "/v1/completions",
                         {"prompt": prompt, "dry_multiplier": -1})
    assert got == 400 and err["error"]["param"] == "dry_multiplier"
    got, err = post_json(server.base, "/completion",
                         {"prompt": prompt, "dry_multiplier": 1, "dry_sequence_breakers": "\n"})
    assert got == 400 and err["error"]["param"] == "dry_sequence_breakers"


def test_response_fields_select_and_lift(server):
    doc = native(server, prompt=PROMPT, n_predict=3, temperature=0,
                 response_fields=["content", "timings/predicted_n", "generation_settings/top_k",
                                  "no_such_field"])
    assert set(doc) == {"content", "predicted_n", "top_k"}
    assert doc["predicted_n"] <= 3 and doc["top_k"] == 40


def test_logit_bias_forms(server):
    first = native(server, prompt=PROMPT, n_predict=1, temperature=0, return_tokens=True)
    tok = first["tokens"][0]
    for bias in ([[tok, False]], [[tok, -100]], {str(tok): -100}):
        other = native(server, prompt=PROMPT, n_predict=1, temperature=0, return_tokens=True,
                       logit_bias=bias)
        assert other["tokens"][0] != tok, bias
    # A text's tokens all get the bias.
    piece = post_json(server.base, "/detokenize", {"tokens": [tok]})[1]["content"]
    other = native(server, prompt=PROMPT, n_predict=1, temperature=0, return_tokens=True,
                   logit_bias=[[piece, -100]])
    assert other["tokens"][0] != tok


def test_infill_prompt_layout_and_speculation(server):
    body = {"input_prefix": "def add(a, b):\n", "input_suffix": "\nprint(add(1, 2))\n",
            "prompt": "    return", "input_extra": [{"filename": "util.py", "text": "X = 1\n"}],
            "n_predict": 10, "temperature": 0, "ignore_eos": True}
    texts = []
    for speculative in (True, False):
        doc = native(server, "/infill", speculative=speculative, **body)
        texts.append(doc["content"])
        assert doc["tokens_predicted"] == 10
    assert texts[0] == texts[1]
    # The tiny models have the three FIM markers but no repository ones: the chunk follows a
    # snippet line, then PRE prefix prompt SUF suffix MID.
    assert doc["prompt"] == ("\n\n--- snippet ---\n\nX = 1\n<|fim_prefix|>def add(a, b):\n"
                             "    return<|fim_suffix|>\nprint(add(1, 2))\n<|fim_middle|>")
    # The same tokens through /completion give the same text.
    ids = post_json(server.base, "/tokenize", {"content": doc["prompt"]})[1]["tokens"]
    assert native(server, prompt=ids, n_predict=10, temperature=0, ignore_eos=True)[
        "content"] == texts[0]


def test_infill_n_indent_and_time_limit(server):
    # A grammar fixes the text, so that the random model writes lines.
    grammar = 'root ::= "x = 1\\n    y = 2\\n    z = 3\\nw = 4\\n" [a-z]+'
    base = {"input_prefix": "if c:\n", "input_suffix": "", "n_predict": 60, "temperature": 0,
            "grammar": grammar}
    full = native(server, "/infill", **base)
    assert full["content"].startswith("x = 1\n    y = 2\n    z = 3\nw = 4\n")
    cut = native(server, "/infill", n_indent=4, **base)
    assert cut["content"] == "x = 1\n    y = 2\n    z = 3\n"
    assert cut["stop_type"] == "limit" and cut["stopping_word"] == ""
    status, events, _ = sse_stream(server.port, "/infill", {**base, "n_indent": 4})
    assert "".join(e["content"] for e in events[:-1]) == cut["content"]
    # t_max_predict_ms: once a newline is out and the time is up, the text ends.
    # (min_tokens: no end token before the time limit can act)
    timed = native(server, "/infill", **{**base, "grammar": 'root ::= "a\\n" [a-z]+',
                                         "n_predict": 400, "min_tokens": 400},
                   t_max_predict_ms=1)
    assert timed["content"].startswith("a\n") and timed["stop_type"] == "limit"
    assert timed["tokens_predicted"] < 400
    # A stop string is a "word".
    word = native(server, "/infill", stop=["z ="], **base)
    assert word["content"] == "x = 1\n    y = 2\n    " and word["stop_type"] == "word"
    assert word["stopping_word"] == "z ="


def test_budget_and_truncation(server):
    # n_predict past the context: the text ends where the context does.
    doc = native(server, prompt=PROMPT, n_predict=100000, temperature=0, ignore_eos=True)
    assert doc["truncated"] is True
    # (the last token generated need not enter the context)
    assert doc["tokens_predicted"] + doc["tokens_evaluated"] == 513
    # An infill prompt too long for the context is cut at its far ends and still answered.
    long = {"input_prefix": "a = 1\n" * 400, "input_suffix": "b = 2\n" * 400,
            "prompt": "c", "n_predict": 8, "temperature": 0}
    doc = native(server, "/infill", **long)
    assert doc["tokens_evaluated"] <= 512 - 8
    # The prefix keeps its end (then the prompt), the suffix its start.
    prefix, rest = doc["prompt"].split("<|fim_prefix|>")[1].split("<|fim_suffix|>")
    suffix = rest[:-len("<|fim_middle|>")]
    assert rest.endswith("<|fim_middle|>")
    assert prefix.endswith("c") and 0 < len(prefix) - 1 < len(long["input_prefix"])
    assert long["input_prefix"].endswith(prefix[:-1])
    assert 0 < len(suffix) < len(long["input_suffix"])
    assert long["input_suffix"].startswith(suffix)


@pytest.mark.parametrize("path,body,param", [
    ("/completion", {"prompt": PROMPT, "typical_p": -0.5}, "typical_p"),
    ("/completion", {"prompt": PROMPT, "mirostat": 3}, "mirostat"),
    ("/completion", {"prompt": PROMPT, "mirostat": 2, "mirostat_tau": -1}, "mirostat_tau"),
    ("/completion", {"prompt": PROMPT, "dry_multiplier": -0.8}, "dry_multiplier"),
    ("/completion", {"prompt": PROMPT, "xtc_probability": 1.5}, "xtc_probability"),
    ("/completion", {"prompt": PROMPT, "lora": [{"id": 0, "scale": 1}]}, "lora[0].id"),
    ("/completion", {"prompt": PROMPT, "post_sampling_probs": "yes"}, "post_sampling_probs"),
    ("/completion", {"prompt": PROMPT, "repeat_penalty": 1.1, "repeat_last_n": -3},
     "repeat_last_n"),
    ("/completion", {"prompt": {"prompt_string": "x"}}, "prompt"),
    ("/completion", {"prompt": [1, {"a": 1}]}, "prompt"),
    ("/completion", {"prompt": [10 ** 7]}, "prompt"),
    ("/completion", {"prompt": PROMPT, "n_predict": -2}, "n_predict"),
    ("/completion", {"prompt": PROMPT, "n_probs": 99}, "n_probs"),
    ("/completion", {"prompt": PROMPT, "samplers": 7}, "samplers"),
    ("/completion", {"prompt": PROMPT, "samplers": ["top_k", 1]}, "samplers"),
    ("/completion", {"prompt": PROMPT, "logit_bias": [[1]]}, "logit_bias"),
    ("/completion", {"prompt": PROMPT, "response_fields": "content"}, "response_fields"),
    ("/completion", {"n_predict": 3}, "prompt"),
    ("/completion", {"prompt": "x " * 2000}, "prompt"),
    ("/infill", {"input_extra": [{"filename": "a"}]}, "input_extra[0].text"),
    ("/infill", {"input_extra": "x"}, "input_extra"),
    ("/infill", {"input_prefix": 3}, "input_prefix"),
    ("/infill", {"prompt": "x " * 2000}, "prompt"),
])
def test_bad_requests_name_the_field(server, path, body, param):
    doc = native(server, path, status=400, **body)
    assert doc["error"]["param"] == param, doc


def test_infill_needs_fim_markers(cli, models):
    s = Server(cli, ["-m", models["slow"], "-t", "1", "-c", "256"])
    try:
        status, doc = post_json(s.base, "/infill", {"input_prefix": "x", "n_predict": 2})
        assert status == 400 and "fill-in-the-middle" in doc["error"]["message"], doc
        # No draft loaded: the settings say nobody speculates.
        status, doc = post_json(s.base, "/completion", {"prompt": "x", "n_predict": 1})
        assert status == 200 and doc["generation_settings"]["speculative"] is False, doc
    finally:
        assert s.stop() == 0


def test_props_describe_the_server_as_llama_server_does(server):
    props = json.loads(server.get("/props"))
    settings = props["default_generation_settings"]
    assert settings["n_ctx"] == 512 and settings["speculative"] is True
    assert settings["params"]["n_predict"] == -1 and settings["params"]["temperature"] == pytest.approx(0.8)
    assert props["total_slots"] == len(json.loads(server.get("/slots")))
    assert props["model_alias"] == "tiny-target" and props["model_path"].endswith(".gguf")
    assert props["modalities"] == {"vision": False, "audio": False}
    assert props["endpoint_slots"] is True and props["endpoint_props"] is False
    # /props is read-only here: settings are set per request.
    status, doc = post_json(server.base, "/props", {"n_predict": 3})
    assert status == 405


def test_slots_show_the_running_request_and_fail_on_no_slot(cli, models):
    one = Server(cli, ["-m", models["target"], "-md", models["draft"], "-t", "2", "-c", "512",
                       "--parallel", "1"])
    try:
        idle = json.loads(one.get("/slots?fail_on_no_slot=1"))
        assert [(s["id"], s["is_processing"], s["id_task"]) for s in idle] == [(0, False, -1)]
        prompt = token_ids(one, PROMPT)
        for _ in range(5):  # the request may end before a poll sees it running
            result = {}
            worker = threading.Thread(target=lambda: result.update(doc=post_json(
                one.base, "/completion", {"prompt": PROMPT, "n_predict": 400, "ignore_eos": True,
                                          "temperature": 0})))
            worker.start()
            seen = None
            decoded = []  # next_token's counts while it runs: from the prompt's 0 upwards
            while worker.is_alive():
                slot = json.loads(one.get("/slots"))[0]
                if slot["is_processing"]:
                    nt = slot["next_token"][0]
                    assert nt["has_next_token"] is True
                    assert nt["n_remain"] + nt["n_decoded"] == 400, nt
                    decoded.append(nt["n_decoded"])
                if slot["is_processing"] and seen is None:
                    seen = slot
                    try:
                        one.get("/slots?fail_on_no_slot=1")
                        busy_status = 200
                    except urllib.error.HTTPError as e:
                        busy_status = e.code
            worker.join()
            if seen is not None and decoded[-1] > 0:
                break
        assert seen is not None, "the request never showed on /slots"
        assert decoded == sorted(decoded) and 0 < decoded[-1] <= 400, decoded
        assert seen["n_prompt_tokens"] == len(prompt)
        assert seen["params"]["n_predict"] == 400 and seen["id_task"] >= 1
        assert seen["params"]["temperature"] == 0 and seen["params"]["ignore_eos"] is True
        assert busy_status == 503 or not json.loads(one.get("/slots"))[0]["is_processing"]
    finally:
        assert one.stop() == 0


def test_apply_template_is_the_chat_endpoints_prompt(server):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    status, doc = post_json(server.base, "/apply-template", {"messages": messages})
    assert status == 200, doc
    prompt = doc["prompt"]
    assert "Be brief." in prompt and "Hi" in prompt
    # The chat endpoint's prompt is these tokens.
    status, chat = post_json(server.base, "/v1/chat/completions",
                             {"messages": messages, "max_tokens": 1})
    assert chat["usage"]["prompt_tokens"] == len(token_ids(server, prompt))
    status, doc = post_json(server.base, "/apply-template", {"messages": "hi"})
    assert status == 400 and doc["error"]["param"] == "messages"
