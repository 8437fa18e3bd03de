"""Thinking models (a chat template with Qwen3's <think> tags): the reply's leading reasoning
block comes back apart from the answer (`reasoning_content` on the chat endpoint, as vLLM's and
llama-server's reasoning parsers give it; `thinking` on Ollama's endpoints), whole and streamed;
Anthropic's /v1/messages returns it as a thinking block and /v1/responses as a reasoning item;
thinking can be switched off (chat_template_kwargs.enable_thinking, Ollama's think, Anthropic's
thinking.type, the Responses API's reasoning.effort none), which writes the empty block into the
prompt as Qwen3's template does."""

import http.client
import json
import subprocess

import anthropic
import openai
import pytest

from conftest import Server, post_json

USER = [{"role": "user", "content": "What is 2+3?"}]
# The random-weight model writes what this grammar allows: a reasoning block, then the answer.
THINK_GBNF = 'root ::= "<think>\\nadd them\\n</think>\\n\\nThe answer is 5."'
EMPTY_BLOCK = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module")
def thinker(cli, models):
    s = Server(cli, ["-m", models["thinking"], "-md", models["thinking"], "--draft-max", "3",
                     "--draft-policy", "fixed", "--no-draft-hybrid", "-t", "2", "-c", "2048"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def chat(server, status=200, **body):
    got, doc = post_json(server.base, "/v1/chat/completions",
                         {"messages": USER, "max_tokens": 40, "temperature": 0, **body})
    assert got == status, doc
    return doc


def sse(port, path, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        raw = resp.read().decode()
    finally:
        conn.close()
    return raw


def test_the_reasoning_block_is_reasoning_content_whole_and_streamed(thinker):
    for speculative in (True, False):
        msg = chat(thinker, grammar=THINK_GBNF, speculative=speculative)["choices"][0]["message"]
        assert msg["reasoning_content"] == "add them"
        assert msg["content"] == "The answer is 5."
    raw = sse(thinker.port, "/v1/chat/completions",
              {"messages": USER, "max_tokens": 40, "temperature": 0, "grammar": THINK_GBNF,
               "stream": True, "logprobs": True})
    chunks = [json.loads(line[6:]) for line in raw.split("\n\n")
              if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "add them"
    assert "".join(d.get("content") or "" for d in deltas) == "The answer is 5."
    # The reasoning comes first, and every token's logprob entry is sent once.
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert all(not d.get("reasoning_content") for d in deltas[first_content:])
    entries = [e for c in chunks if c["choices"] and c["choices"][0].get("logprobs")
               for e in c["choices"][0]["logprobs"]["content"]]
    whole = chat(thinker, grammar=THINK_GBNF, logprobs=True)["choices"][0]["logprobs"]["content"]
    assert entries == whole


def test_a_model_without_the_tags_keeps_them_in_its_content(server):
    msg = chat(server, grammar=THINK_GBNF)["choices"][0]["message"]
    assert msg["content"] == "<think>\nadd them\n</think>\n\nThe answer is 5."
    assert msg.get("reasoning_content") is None


def prompt_tokens(server, **body):
    return chat(server, max_tokens=1, **body)["usage"]["prompt_tokens"]


def test_thinking_off_writes_the_empty_block_on_every_api(thinker):
    on = prompt_tokens(thinker)
    off = prompt_tokens(thinker, chat_template_kwargs={"enable_thinking": False})
    # The prompt grew by exactly the empty block's tokens.
    status, plain = post_json(thinker.base, "/tokenize", {"messages": USER})
    status, block = post_json(thinker.base, "/tokenize", {
        "content": "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n" +
        EMPTY_BLOCK})
    assert plain["count"] == on and block["count"] == off > on
    assert prompt_tokens(thinker, chat_template_kwargs={"enable_thinking": True}) == on
    status, doc = post_json(thinker.base, "/api/chat", {
        "model": "specdec", "messages": USER, "think": False, "stream": False,
        "options": {"num_predict": 1}})
    assert status == 200 and doc["prompt_eval_count"] == off
    status, doc = post_json(thinker.base, "/v1/messages", {
        "messages": USER, "max_tokens": 1, "thinking": {"type": "disabled"}})
    assert status == 200
    assert doc["usage"]["input_tokens"] + doc["usage"]["cache_read_input_tokens"] == off
    # Only enable_thinking can be set: the template is not run as Jinja.
    doc = chat(thinker, status=400, chat_template_kwargs={"tools_in_user_message": True})
    assert doc["error"]["param"] == "chat_template_kwargs.tools_in_user_message"


def test_ollama_returns_the_reasoning_as_thinking(thinker):
    status, doc = post_json(thinker.base, "/api/show", {"model": "specdec"})
    assert "thinking" in doc["capabilities"]
    # A prefill that opens the block: the reply starts inside it, and without a closing tag it
    # is all reasoning (the random-weight model does not write one).
    turns = USER + [{"role": "assistant", "content": "<think>\nLet me"}]
    body = {"model": "specdec", "messages": turns, "stream": False, "think": True,
            "options": {"temperature": 0, "num_predict": 12}}
    status, whole = post_json(thinker.base, "/api/chat", body)
    assert status == 200, whole
    assert whole["message"]["content"] == "" and whole["message"]["thinking"]
    raw = sse(thinker.port, "/api/chat", {**body, "stream": True})
    docs = [json.loads(line) for line in raw.split("\n") if line]
    assert "".join(d["message"].get("thinking", "") for d in docs) == \
        whole["message"]["thinking"]
    assert "".join(d["message"]["content"] for d in docs) == ""
    status, doc = post_json(thinker.base, "/api/chat", {
        "model": "specdec", "messages": USER, "think": "high", "stream": False,
        "options": {"num_predict": 1}})
    assert status == 200  # an effort level means think


def test_anthropic_returns_the_reasoning_as_a_thinking_block(thinker):
    body = {"messages": USER, "max_tokens": 40, "temperature": 0, "grammar": THINK_GBNF}
    for speculative in (True, False):
        status, doc = post_json(thinker.base, "/v1/messages", {**body, "speculative": speculative})
        assert status == 200, doc
        assert doc["content"] == [
            {"type": "thinking", "thinking": "add them", "signature": ""},
            {"type": "text", "text": "The answer is 5."}]
    # The SDK's stream assembles the same blocks from the events: the thinking block first (its
    # deltas, then its signature delta), closed before the text block opens.
    client = anthropic.Anthropic(base_url=thinker.base, api_key="unused", timeout=60,
                                 max_retries=0)
    with client.messages.stream(model="specdec", max_tokens=40, messages=USER,
                                extra_body={"grammar": THINK_GBNF, "temperature": 0}) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert [b.model_dump(exclude_none=True) for b in final.content] == doc["content"]
    kinds = [(e.type, getattr(e, "index", None)) for e in events
             if e.type in ("content_block_start", "content_block_stop")]
    assert kinds == [("content_block_start", 0), ("content_block_stop", 0),
                     ("content_block_start", 1), ("content_block_stop", 1)]
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert deltas[-1] == "text_delta" and deltas.index("signature_delta") == \
        deltas.index("text_delta") - 1
    assert set(deltas[:deltas.index("signature_delta")]) == {"thinking_delta"}
    # A prefill that opens the block: all reasoning, streamed and whole alike.
    turns = USER + [{"role": "assistant", "content": "<think>\nLet me"}]
    status, whole = post_json(thinker.base, "/v1/messages",
                              {"messages": turns, "max_tokens": 12, "temperature": 0})
    assert [b["type"] for b in whole["content"]] == ["thinking"]
    with client.messages.stream(model="specdec", max_tokens=12, messages=turns,
                                extra_body={"temperature": 0}) as stream:
        assert stream.get_final_message().content[0].thinking == \
            whole["content"][0]["thinking"]


def test_responses_returns_the_reasoning_as_a_reasoning_item(thinker):
    body = {"input": USER, "max_output_tokens": 40, "temperature": 0, "grammar": THINK_GBNF}
    status, doc = post_json(thinker.base, "/v1/responses", body)
    assert status == 200, doc
    reasoning, message = doc["output"]
    assert reasoning["type"] == "reasoning" and reasoning["id"].startswith("rs_")
    assert reasoning["content"] == [{"type": "reasoning_text", "text": "add them"}]
    assert message["content"][0]["text"] == "The answer is 5."
    # "<think>\nadd them\n</think>" are the reasoning's tokens, fewer than the reply's.
    status, tokens = post_json(thinker.base, "/tokenize", {"content": "<think>\nadd them\n</think>"})
    details = doc["usage"]["output_tokens_details"]
    assert details["reasoning_tokens"] == tokens["count"] < doc["usage"]["output_tokens"]
    # The SDK reads the stream's events: the reasoning item (its part and deltas) closes before
    # the message item opens, and response.completed holds the same items.
    client = openai.OpenAI(base_url=thinker.base + "/v1", api_key="unused", timeout=60,
                           max_retries=0)
    events = list(client.responses.create(model="specdec", input=USER, max_output_tokens=40,
                                          temperature=0, stream=True,
                                          extra_body={"grammar": THINK_GBNF}))
    done = events[-1].response
    assert [i.model_dump(exclude_none=True) for i in done.output][0]["content"] == \
        reasoning["content"]
    assert done.output[1].content[0].text == "The answer is 5."
    order = [(e.type, getattr(e, "output_index", None)) for e in events
             if e.type.startswith("response.output_item") or e.type.endswith(".done")]
    assert order[:5] == [("response.output_item.added", 0), ("response.reasoning_text.done", 0),
                         ("response.content_part.done", 0), ("response.output_item.done", 0),
                         ("response.output_item.added", 1)]
    text = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert text == "add them"
    # Cut inside the reasoning (after "<think>\nadd"): the reasoning item alone, whole and
    # streamed, and the response incomplete.
    status, head = post_json(thinker.base, "/tokenize", {"content": "<think>\nadd"})
    n_cut = head["count"]
    cut = {"input": USER, "max_output_tokens": n_cut, "temperature": 0, "grammar": THINK_GBNF}
    status, doc = post_json(thinker.base, "/v1/responses", cut)
    assert status == 200, doc
    assert doc["status"] == "incomplete", doc
    assert [i["type"] for i in doc["output"]] == ["reasoning"], doc["output"]
    assert doc["output"][0]["content"] == [{"type": "reasoning_text", "text": "add"}]
    events = list(client.responses.create(model="specdec", input=USER, max_output_tokens=n_cut,
                                          temperature=0, stream=True,
                                          extra_body={"grammar": THINK_GBNF}))
    assert [i.type for i in events[-1].response.output] == ["reasoning"]
    assert not [e for e in events if e.type.startswith("response.output_text")]
    # effort none switches thinking off: the empty block is in the prompt.
    def input_tokens(**extra):
        status, doc = post_json(thinker.base, "/v1/responses",
                                {"input": USER, "max_output_tokens": 16, **extra})
        assert status == 200, doc
        return doc["usage"]["input_tokens"]
    assert input_tokens(reasoning={"effort": "none"}) > input_tokens(reasoning={"effort": "low"})


def test_reasoning_format_none_leaves_the_reply_whole(thinker):
    whole = "<think>\nadd them\n</think>\n\nThe answer is 5."
    msg = chat(thinker, grammar=THINK_GBNF, reasoning_format="none")["choices"][0]["message"]
    assert msg["content"] == whole and msg.get("reasoning_content") is None
    raw = sse(thinker.port, "/v1/chat/completions",
              {"messages": USER, "max_tokens": 40, "temperature": 0, "grammar": THINK_GBNF,
               "stream": True, "reasoning_format": "none"})
    deltas = [json.loads(line[6:])["choices"][0]["delta"] for line in raw.split("\n\n")
              if line.startswith("data: {") and json.loads(line[6:])["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == whole
    assert not any(d.get("reasoning_content") for d in deltas)
    msg = chat(thinker, grammar=THINK_GBNF, reasoning_format="deepseek")["choices"][0]["message"]
    assert msg["reasoning_content"] == "add them"
    assert chat(thinker, status=400, reasoning_format="raw")["error"]["code"] == "invalid_value"


@pytest.fixture(scope="module")
def plain_thinker(cli, models):
    """llama-server's --reasoning-format none --reasoning-budget 0: replies whole, no thinking
    unless a request asks for it."""
    s = Server(cli, ["-m", models["thinking"], "-t", "2", "-c", "2048",
                     "--reasoning-format", "none", "--reasoning-budget", "0"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def test_the_servers_reasoning_flags_are_request_defaults(thinker, plain_thinker):
    msg = chat(plain_thinker, grammar=THINK_GBNF)["choices"][0]["message"]
    assert msg["content"].startswith("<think>") and msg.get("reasoning_content") is None
    msg = chat(plain_thinker, grammar=THINK_GBNF,
               reasoning_format="auto")["choices"][0]["message"]
    assert msg["reasoning_content"] == "add them"
    # Thinking off unless asked: the prompt holds the empty block, as enable_thinking false
    # writes it on a server without the flag.
    off = prompt_tokens(thinker, chat_template_kwargs={"enable_thinking": False})
    on = prompt_tokens(thinker)
    assert prompt_tokens(plain_thinker) == off
    assert prompt_tokens(plain_thinker, chat_template_kwargs={}) == off
    assert prompt_tokens(plain_thinker, chat_template_kwargs={"enable_thinking": True}) == on
    status, doc = post_json(plain_thinker.base, "/api/chat", {
        "model": "specdec", "messages": USER, "stream": False, "options": {"num_predict": 1}})
    assert status == 200 and doc["prompt_eval_count"] == off
    status, doc = post_json(plain_thinker.base, "/api/chat", {
        "model": "specdec", "messages": USER, "think": True, "stream": False,
        "options": {"num_predict": 1}})
    assert status == 200 and doc["prompt_eval_count"] == on


def test_reasoning_format_deepseek_legacy_gives_both(thinker):
    """llama-server's deepseek-legacy: reasoning_content apart, and the whole reply, tags and
    all, as the content; streamed the same way; the other APIs split as deepseek does."""
    whole = "<think>\nadd them\n</think>\n\nThe answer is 5."
    msg = chat(thinker, grammar=THINK_GBNF,
               reasoning_format="deepseek-legacy")["choices"][0]["message"]
    assert msg["content"] == whole and msg["reasoning_content"] == "add them"
    raw = sse(thinker.port, "/v1/chat/completions",
              {"messages": USER, "max_tokens": 40, "temperature": 0, "grammar": THINK_GBNF,
               "stream": True, "reasoning_format": "deepseek-legacy", "logprobs": True})
    chunks = [json.loads(line[6:]) for line in raw.split("\n\n")
              if line.startswith("data: {") and json.loads(line[6:])["choices"]]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content") or "" for d in deltas) == whole
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == "add them"
    # The logprobs go with the content, which is the whole reply: one entry per token of it.
    entries = [e for c in chunks if (c["choices"][0].get("logprobs") or {}).get("content")
               for e in c["choices"][0]["logprobs"]["content"]]
    assert "".join(e["token"] for e in entries) == whole


@pytest.fixture(scope="module")
def legacy_thinker(cli, models):
    """llama-server's --reasoning-format deepseek-legacy as the server's default."""
    s = Server(cli, ["-m", models["thinking"], "-t", "2", "-c", "2048",
                     "--reasoning-format", "deepseek-legacy"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def test_deepseek_legacy_as_the_servers_default(legacy_thinker):
    whole = "<think>\nadd them\n</think>\n\nThe answer is 5."
    msg = chat(legacy_thinker, grammar=THINK_GBNF)["choices"][0]["message"]
    assert msg["content"] == whole and msg["reasoning_content"] == "add them"
    # Ollama's chat has its own field for the reasoning: split as deepseek does, the content
    # without it. (A prefill opens the block, which the random-weight model never closes: all
    # of the reply is reasoning.)
    turns = USER + [{"role": "assistant", "content": "<think>\nLet me"}]
    body = {"model": "specdec", "messages": turns, "stream": False, "think": True,
            "options": {"temperature": 0, "num_predict": 12}}
    status, doc = post_json(legacy_thinker.base, "/api/chat", body)
    assert status == 200, doc
    assert doc["message"]["content"] == "" and doc["message"]["thinking"], doc
    raw = sse(legacy_thinker.port, "/api/chat", {**body, "stream": True})
    docs = [json.loads(line) for line in raw.split("\n") if line]
    assert "".join(d["message"]["content"] for d in docs) == ""
    assert "".join(d["message"].get("thinking", "") for d in docs) == doc["message"]["thinking"]


def test_reasoning_budget_closes_the_block_and_the_answer_follows(thinker):
    """llama-server's reasoning_budget_tokens: after N tokens inside the block, the message and
    </think> are forced; the reply goes on as the answer. The same text with and without
    speculation (the budget masks both models' distributions, as a grammar does)."""
    # The prefill opens the block, which the random-weight model never closes by itself.
    turns = USER + [{"role": "assistant", "content": "<think>\nLet me"}]
    status, close = post_json(thinker.base, "/tokenize", {"content": "</think>"})
    assert status == 200, close
    n_close = close["count"]

    cont = {"continue_final_message": True, "add_generation_prompt": False}

    def ask(max_tokens=24, **extra):
        return chat(thinker, messages=turns, max_tokens=max_tokens, **cont, **extra)

    free = ask()
    assert free["choices"][0]["message"]["content"] in ("", None)  # all reasoning
    doc = ask(reasoning_budget_tokens=5)
    msg = doc["choices"][0]["message"]
    assert msg["reasoning_content"] and msg["content"], msg
    # Token by token (logprobs: one entry per generated token, the reasoning's first): 5 free
    # ones, then the closing tag's.
    entries = ask(reasoning_budget_tokens=5, logprobs=True)["choices"][0]["logprobs"]["content"]
    assert "".join(e["token"] for e in entries[5:5 + n_close]) == "</think>", entries
    # The first 5 tokens are the unconstrained reply's.
    assert free["choices"][0]["message"]["reasoning_content"].startswith(msg["reasoning_content"])
    plain = ask(reasoning_budget_tokens=5, speculative=False)["choices"][0]["message"]
    assert plain == msg
    # The message goes out as the reasoning's last words.
    said = ask(max_tokens=48, reasoning_budget_tokens=5,
               reasoning_budget_message=" Enough; answering.")
    said_msg = said["choices"][0]["message"]
    assert said_msg["reasoning_content"].endswith("Enough; answering."), said_msg
    assert said_msg["reasoning_content"].startswith(msg["reasoning_content"])
    # Budget 0: the block is closed at once.
    zero = ask(reasoning_budget_tokens=0, logprobs=True)["choices"][0]
    assert zero["message"].get("reasoning_content") in (None, "") and zero["message"]["content"]
    assert "".join(e["token"] for e in zero["logprobs"]["content"][:n_close]) == "</think>"
    # Streamed: the same reasoning and content.
    raw = sse(thinker.port, "/v1/chat/completions",
              {"messages": turns, "max_tokens": 24, "temperature": 0, "stream": True,
               "reasoning_budget_tokens": 5, **cont})
    deltas = [json.loads(line[6:])["choices"][0]["delta"] for line in raw.split("\n\n")
              if line.startswith("data: {") and json.loads(line[6:])["choices"]]
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == msg["reasoning_content"]
    assert "".join(d.get("content") or "" for d in deltas) == msg["content"]
    # Anthropic's thinking.budget_tokens is the same budget.
    status, anth = post_json(thinker.base, "/v1/messages", {
        "model": "specdec", "max_tokens": 24, "temperature": 0, "messages": turns,
        "thinking": {"type": "enabled", "budget_tokens": 5}})
    assert status == 200, anth
    assert anth["content"][0]["thinking"] == msg["reasoning_content"], anth
    assert anth["content"][1]["text"] == msg["content"], anth
    # Bad values are the client's error.
    for bad in (-2, "5", 1.5, 2 ** 31):
        doc = chat(thinker, status=400, messages=turns, **cont, reasoning_budget_tokens=bad)
        assert doc["error"]["param"] == "reasoning_budget_tokens", doc
    doc = chat(thinker, status=400, messages=turns, **cont, reasoning_budget_message=3)
    assert doc["error"]["param"] == "reasoning_budget_message", doc
    status, doc = post_json(thinker.base, "/v1/messages", {
        "model": "specdec", "max_tokens": 24, "messages": turns,
        "thinking": {"type": "enabled", "budget_tokens": -1}})
    assert status == 400 and "budget_tokens" in json.dumps(doc), doc


# ---------------------------------------------------------------------------------------------
# The same flags on the command line: specdec run and specdec chat (cli/reasoning_options.h)

OPEN_PROMPT = "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n<think>\nLet me"


def run_cli(cli, args, stdin=None):
    r = subprocess.run([cli, *args], input=stdin, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r


def test_run_reasoning_budget_closes_the_block_and_the_answer_follows(cli, models):
    """`run --reasoning-budget N`: N tokens inside the block the raw prompt opens, then the message
    and </think> are forced and the answer follows; the same bytes with and without speculation,
    and what the server answers to the same budget."""
    base = ["run", "-m", models["thinking"], "-p", OPEN_PROMPT, "-n", "24", "--temp", "0",
            "-t", "2", "-c", "2048", "-q"]
    free = run_cli(cli, base).stdout
    assert b"</think>" not in free  # the random-weight model never closes the block itself
    budget = base + ["--reasoning-budget", "5", "--reasoning-budget-message", " Enough."]
    said = run_cli(cli, budget).stdout
    cut = said.find(b" Enough.</think>")
    assert cut > 0, said
    assert free.startswith(said[:cut]), (free, said)  # the reasoning's first 5 tokens are free
    assert len(said) > cut + len(b" Enough.</think>") + 1  # an answer follows (and a newline)
    speculative = run_cli(cli, budget + ["-md", models["thinking"], "--draft-max", "3",
                                         "--draft-policy", "fixed", "--no-draft-hybrid"])
    assert speculative.stdout == said
    # Budget 0: the block is closed at once.
    zero = run_cli(cli, base + ["--reasoning-budget", "0"]).stdout
    assert zero.startswith(b"</think>"), zero


def test_reasoning_budget_zero_writes_the_empty_block_in_chat_prompts(cli, models):
    """`--reasoning-budget 0` with a chat prompt (`run --chat`, `chat`): the prompt gets the empty
    block that Qwen3's template writes for enable_thinking false, so the reply is what the raw
    prompt with that block gives."""
    common = ["-m", models["thinking"], "-n", "12", "--temp", "0", "-t", "2", "-c", "2048"]
    raw = run_cli(cli, ["run", *common, "-q", "-p",
                        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
                        "<think>\n\n</think>\n\n"]).stdout
    thinking = run_cli(cli, ["run", *common, "-q", "--chat", "-p", "hi"]).stdout
    assert thinking != raw  # the block changes the reply, so the comparisons below mean something
    off = run_cli(cli, ["run", *common, "-q", "--chat", "-p", "hi", "--reasoning-budget", "0"])
    assert off.stdout == raw
    chat = run_cli(cli, ["chat", *common, "--reasoning-budget", "0"], stdin=b"hi\n")
    assert chat.stdout == raw


def test_reasoning_flags_on_a_model_that_does_not_think(cli, models):
    """A template without <think> tags ignores the flags, as llama.cpp does, with a note; a bad
    budget is a one-line error before any model loads."""
    base = ["run", "-m", models["target"], "-p", "hello", "-n", "8", "--temp", "0", "-t", "2"]
    plain = run_cli(cli, base).stdout
    r = run_cli(cli, base + ["--reasoning-budget", "0"])
    assert r.stdout == plain
    assert b"does not think in <think> tags; --reasoning-budget changes nothing" in r.stderr
    for command in ("run", "chat"):
        bad = subprocess.run([cli, command, "-m", models["target"], "--reasoning-budget", "-2"],
                             capture_output=True, timeout=60)
        assert bad.returncode == 1
        assert bad.stderr.decode().startswith("error: --reasoning-budget must be -1"), bad.stderr
