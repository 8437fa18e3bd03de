"""Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens), which Claude Code and the
`anthropic` SDKs speak: the same greedy text as the chat endpoint for the same turns, with and
without speculation, whole or as Anthropic's event stream; the system prompt, prefill, stop
sequences, tool_use and tool_result blocks, usage and stop reasons; and Anthropic's error shape
for what it refuses."""

import http.client
import json
import re

import anthropic
import pytest

from conftest import Server, check_leaving_client_frees_its_slot, post_json
from test_tools import ADD, WEATHER, check_call, tool_server  # noqa: F401 (a fixture)

MESSAGES = "/v1/messages"
USER = [{"role": "user", "content": "Tell me about Paris."}]
TIMEOUT = 60


def create(server, status=200, **body):
    got, doc = post_json(server.base, MESSAGES, {"max_tokens": 12, "temperature": 0,
                                                  "messages": USER, **body})
    assert got == status, doc
    return doc


def chat_reply(server, messages, max_tokens=12, **extra):
    status, doc = post_json(server.base, "/v1/chat/completions",
                            {"messages": messages, "max_tokens": max_tokens, "temperature": 0,
                             **extra})
    assert status == 200, doc
    return doc


def text_of(doc):
    return "".join(b["text"] for b in doc["content"] if b["type"] == "text")


def event_stream(port, body, headers=None):
    """(status, [(event name, data)]) of a streamed /v1/messages request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("POST", MESSAGES, json.dumps({**body, "stream": True}),
                     {"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, [("error", json.loads(resp.read()))]
        assert resp.getheader("Content-Type").startswith("text/event-stream")
        events = []
        for raw in resp.read().decode().split("\n\n"):
            if not raw:
                continue
            name, data = raw.split("\n")
            assert name.startswith("event: ") and data.startswith("data: "), raw
            doc = json.loads(data[len("data: "):])
            assert doc["type"] == name[len("event: "):]
            events.append((doc["type"], doc))
        return resp.status, events
    finally:
        conn.close()


def sdk(server, key="unused"):
    return anthropic.Anthropic(base_url=server.base, api_key=key, timeout=TIMEOUT, max_retries=0)


@pytest.mark.parametrize("speculative", [True, False])
def test_greedy_reply_is_the_chat_endpoints(server, speculative):
    doc = create(server, ignore_eos=True, speculative=speculative)
    want = chat_reply(server, USER, ignore_eos=True)
    assert text_of(doc) == want["choices"][0]["message"]["content"]
    assert doc["id"].startswith("msg_") and doc["type"] == "message"
    assert doc["role"] == "assistant" and doc["model"] == "tiny-target"
    assert doc["stop_reason"] == "max_tokens" and doc["stop_sequence"] is None
    usage = doc["usage"]
    assert usage["output_tokens"] == 12
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == \
        want["usage"]["prompt_tokens"]
    assert doc["specdec"]["speculative"] is speculative


def test_the_stream_carries_the_same_reply(server):
    whole = create(server, ignore_eos=True, max_tokens=16)
    status, events = event_stream(server.port, {"messages": USER, "max_tokens": 16,
                                                "temperature": 0, "ignore_eos": True})
    assert status == 200
    names = [n for n, _ in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[3:-3]) == {"content_block_delta"}
    start = events[0][1]["message"]
    assert start["id"].startswith("msg_") and start["content"] == [] and \
        start["stop_reason"] is None
    assert start["usage"]["input_tokens"] == whole["usage"]["input_tokens"] + \
        whole["usage"]["cache_read_input_tokens"]
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text == text_of(whole)
    assert all(d["index"] == 0 for n, d in events if n.startswith("content_block"))
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert delta["usage"]["output_tokens"] == 16


def test_the_anthropic_sdk_reads_replies_and_streams(server):
    client = sdk(server)
    body = dict(model="specdec", max_tokens=10, messages=USER,
                extra_body={"temperature": 0, "ignore_eos": True})
    reply = client.messages.create(**body)
    assert reply.stop_reason == "max_tokens" and reply.usage.output_tokens == 10
    assert reply.content[0].type == "text"
    with client.messages.stream(**body) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == reply.content[0].text == final.content[0].text
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 10
    counted = client.messages.count_tokens(model="specdec", messages=USER)
    assert counted.input_tokens == reply.usage.input_tokens + reply.usage.cache_read_input_tokens
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="specdec", max_tokens=10,
                               messages=[{"role": "system", "content": "x"}])
    assert "messages[0].role" in str(bad.value)
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-opus-4", max_tokens=10, messages=USER)
    models = list(client.models.list())
    assert [m.id for m in models] == ["tiny-target"] and models[0].display_name == "tiny-target"
    assert models[0].created_at.year >= 2025


def test_a_client_that_leaves_mid_stream_frees_its_slot(cli, models):
    check_leaving_client_frees_its_slot(
        cli, models, MESSAGES, {"messages": USER, "max_tokens": 4000, "ignore_eos": True},
        b"event: message_start", {"messages": USER, "max_tokens": 3, "ignore_eos": True},
        lambda doc: doc["usage"]["output_tokens"])


def test_system_prompt_and_text_blocks_are_the_chat_turns(server):
    system = [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Be kind."}]
    blocks = [{"type": "text", "text": "Tell me"}, {"type": "text", "text": "about Paris."}]
    doc = create(server, system=system, messages=[{"role": "user", "content": blocks}],
                 ignore_eos=True)
    chat = [{"role": "system", "content": "You are terse.\nBe kind."},
            {"role": "user", "content": "Tell me\nabout Paris."}]
    assert text_of(doc) == chat_reply(server, chat, ignore_eos=True)["choices"][0]["message"][
        "content"]
    status, counted = post_json(server.base, "/v1/messages/count_tokens",
                                {"system": system, "messages": [{"role": "user",
                                                                 "content": blocks}]})
    assert status == 200
    assert counted["input_tokens"] == post_json(server.base, "/tokenize",
                                                {"messages": chat})[1]["count"]


def test_a_final_assistant_turn_is_continued(server):
    prefill = "Paris is"
    doc = create(server, messages=USER + [{"role": "assistant", "content": prefill}],
                 ignore_eos=True)
    # The same prompt as text: the chat turns through the template, then the prefill.
    ids = post_json(server.base, "/tokenize", {"messages": USER})[1]["tokens"]
    prompt = post_json(server.base, "/detokenize", {"tokens": ids})[1]["content"] + prefill
    status, want = post_json(server.base, "/v1/completions",
                             {"prompt": prompt, "max_tokens": 12, "temperature": 0,
                              "ignore_eos": True})
    assert status == 200
    assert text_of(doc) == want["choices"][0]["text"]
    assert not text_of(doc).startswith(prefill) or want["choices"][0]["text"].startswith(prefill)


def test_openai_continue_final_message_is_the_same_prefill(server):
    turns = USER + [{"role": "assistant", "content": "Paris is"}]
    want = text_of(create(server, messages=turns, ignore_eos=True))
    got = chat_reply(server, turns, continue_final_message=True, add_generation_prompt=False,
                     ignore_eos=True)
    assert got["choices"][0]["message"]["content"] == want
    assert chat_reply(server, turns, continue_final_message=True, ignore_eos=True)[
        "choices"][0]["message"]["content"] == want
    # /tokenize renders the same prompt.
    status, tok = post_json(server.base, "/tokenize", {"messages": turns,
                                                       "continue_final_message": True})
    counted = post_json(server.base, "/v1/messages/count_tokens", {"messages": turns})[1]
    assert status == 200 and tok["count"] == counted["input_tokens"]
    # Without it the final assistant message is a finished turn and a new one starts.
    assert chat_reply(server, turns, ignore_eos=True)["choices"][0]["message"]["content"] != want
    for body, param in [
            ({"messages": turns, "continue_final_message": True, "add_generation_prompt": True},
             "add_generation_prompt"),
            ({"messages": USER, "continue_final_message": True}, "continue_final_message")]:
        status, doc = post_json(server.base, "/v1/chat/completions", {"max_tokens": 4, **body})
        assert status == 400 and doc["error"]["param"] == param, doc


def test_stop_sequences(server):
    full = text_of(create(server, ignore_eos=True, max_tokens=24))
    stop = full[8:11]
    assert stop.strip(), full
    doc = create(server, ignore_eos=True, max_tokens=24, stop_sequences=[stop])
    assert doc["stop_reason"] == "stop_sequence" and doc["stop_sequence"] == stop
    assert text_of(doc) == full[:full.index(stop)]
    status, events = event_stream(server.port, {"messages": USER, "max_tokens": 24,
                                                "temperature": 0, "ignore_eos": True,
                                                "stop_sequences": [stop]})
    assert status == 200
    assert events[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": stop}


def test_max_tokens_beyond_the_context_ends_where_the_context_does(server):
    # max_tokens is required and sized for hosted models; the tiny server holds 512 tokens.
    doc = create(server, max_tokens=32000, ignore_eos=True)
    assert doc["stop_reason"] == "model_context_window_exceeded"
    usage = doc["usage"]
    # The last token is sampled from the last row the context holds; it needs no row itself.
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] + \
        usage["output_tokens"] == 512 + 1
    status, err = post_json(server.base, MESSAGES, {
        "max_tokens": 5, "messages": [{"role": "user", "content": "word " * 600}]})
    assert status == 400 and err["error"]["type"] == "invalid_request_error"
    assert re.fullmatch(r"prompt is too long: \d+ tokens > 511 maximum", err["error"]["message"])


ANTHROPIC_WEATHER = {"name": "get_weather", "description": "Current weather in a city",
                     "input_schema": WEATHER["function"]["parameters"]}
ANTHROPIC_ADD = {"name": "add", "input_schema": ADD["function"]["parameters"]}
TOOLS_BY_NAME = {"get_weather": WEATHER, "add": ADD}


def tool_uses(doc):
    return [b for b in doc["content"] if b["type"] == "tool_use"]


def as_openai_call(block):
    return {"type": "function", "id": "call_" + block["id"][len("toolu_"):],
            "function": {"name": block["name"], "arguments": json.dumps(block["input"])}}


def test_tool_choice_any_and_a_named_tool_give_valid_tool_use(tool_server):  # noqa: F811
    doc = create(tool_server, max_tokens=400, tools=[ANTHROPIC_WEATHER, ANTHROPIC_ADD],
                 tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert doc["stop_reason"] == "tool_use" and doc["stop_sequence"] is None
    uses = tool_uses(doc)
    assert len(uses) == 1 and uses[0]["id"].startswith("toolu_")
    check_call(as_openai_call(uses[0]), TOOLS_BY_NAME)
    # The same call as the chat endpoint's for the same request.
    chat = chat_reply(tool_server, USER, max_tokens=400, tools=[WEATHER, ADD],
                      tool_choice="required", parallel_tool_calls=False)
    call = chat["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (uses[0]["name"], uses[0]["input"]) == (call["name"], json.loads(call["arguments"]))
    named = create(tool_server, max_tokens=400, tools=[ANTHROPIC_WEATHER, ANTHROPIC_ADD],
                   tool_choice={"type": "tool", "name": "add"})
    assert [u["name"] for u in tool_uses(named)] == ["add"] * len(tool_uses(named))


def test_streamed_tool_use_and_speculation_give_the_same_calls(tool_server):  # noqa: F811
    body = {"messages": USER, "max_tokens": 400, "temperature": 0,
            "tools": [ANTHROPIC_WEATHER, ANTHROPIC_ADD], "tool_choice": {"type": "any"}}
    whole = create(tool_server, **{k: v for k, v in body.items() if k != "messages"})
    plain = create(tool_server, speculative=False,
                   **{k: v for k, v in body.items() if k != "messages"})
    assert [(u["name"], u["input"]) for u in tool_uses(plain)] == \
        [(u["name"], u["input"]) for u in tool_uses(whole)]
    status, events = event_stream(tool_server.port, body)
    assert status == 200
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert all(b["type"] == "tool_use" and b["input"] == {} for b in starts)
    inputs = {}
    for n, d in events:
        if n == "content_block_delta":
            assert d["delta"]["type"] == "input_json_delta"
            inputs[d["index"]] = inputs.get(d["index"], "") + d["delta"]["partial_json"]
    assert [(b["name"], json.loads(inputs[i])) for i, b in enumerate(starts)] == \
        [(u["name"], u["input"]) for u in tool_uses(whole)]
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_a_conversation_with_tool_use_and_tool_result_continues(tool_server):  # noqa: F811
    turns = USER + [
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris", "unit": "C"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1",
             "content": [{"type": "text", "text": "{\"temp\": 21}"}]},
            {"type": "text", "text": "And in Oslo?"}]}]
    doc = create(tool_server, messages=turns, max_tokens=400, tools=[ANTHROPIC_WEATHER],
                 tool_choice={"type": "any"})
    check_call(as_openai_call(tool_uses(doc)[0]), TOOLS_BY_NAME)
    # The prompt is the chat endpoint's for the same conversation.
    openai_turns = USER + [
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {
                "name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"C\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "And in Oslo?"}]
    want = chat_reply(tool_server, openai_turns, max_tokens=400, tools=[WEATHER],
                      tool_choice="required")
    assert doc["usage"]["input_tokens"] + doc["usage"]["cache_read_input_tokens"] == \
        want["usage"]["prompt_tokens"]
    # The SDK reads the call.
    reply = sdk(tool_server).messages.create(
        model="specdec", max_tokens=400, messages=USER, tools=[ANTHROPIC_WEATHER],
        tool_choice={"type": "tool", "name": "get_weather"}, extra_body={"temperature": 0})
    block = next(b for b in reply.content if b.type == "tool_use")
    assert block.name == "get_weather" and block.input["city"] in ["Paris", "Oslo", "Lima"]


BAD = [
    ({"messages": USER}, "max_tokens"),
    ({"max_tokens": 0, "messages": USER}, "max_tokens"),
    ({"max_tokens": 5, "messages": []}, "messages"),
    ({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "AAAA"}}]}]}, "messages[0].content[0].type"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": []}]}, "messages[0].content"),
    ({"max_tokens": 5, "messages": USER, "temperature": 1.5}, "temperature"),
    ({"max_tokens": 5, "messages": USER, "stop_sequences": "x"}, "stop_sequences"),
    ({"max_tokens": 5, "messages": USER, "stop_sequences": [1]}, "stop_sequences"),
    ({"max_tokens": 5, "messages": USER, "system": 3}, "system"),
    ({"max_tokens": 5, "messages": USER,
      "tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"max_tokens": 5, "messages": USER, "tools": [{"name": "f"}]}, "tools[0].input_schema"),
    ({"max_tokens": 5, "messages": USER,
      "tools": [{"name": "bad name", "input_schema": {"type": "object"}}]}, "tools[0].name"),
    ({"max_tokens": 5, "messages": USER, "tool_choice": {"type": "sometimes"}},
     "tool_choice.type"),
    ({"max_tokens": 5, "messages": USER, "output_config": {"format": {"type": "xml"}}},
     "output_config.format.type"),
    ({"max_tokens": 5, "messages": USER, "thinking": {"type": "always"}}, "thinking.type"),
]


@pytest.mark.parametrize("body, field", BAD)
def test_bad_requests_get_anthropics_400(server, body, field):
    status, doc = post_json(server.base, MESSAGES, body)
    assert status == 400, doc
    assert doc["type"] == "error" and doc["error"]["type"] == "invalid_request_error", doc
    assert f"'{field}'" in doc["error"]["message"], doc


def test_malformed_bodies_unknown_models_and_methods(server):
    status, doc = post_json(server.base, MESSAGES, b'{"max_tokens": ')
    assert status == 400 and doc["error"]["type"] == "invalid_request_error"
    status, doc = post_json(server.base, MESSAGES, b"[" * 100000)
    assert status == 400 and doc["type"] == "error"
    status, doc = post_json(server.base, MESSAGES, {"model": "claude-x", "max_tokens": 5,
                                                    "messages": USER})
    assert status == 404 and doc["error"]["type"] == "not_found_error"
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    conn.request("GET", MESSAGES)
    resp = conn.getresponse()
    doc = json.loads(resp.read())
    conn.close()
    assert resp.status == 405 and doc["error"]["type"] == "invalid_request_error", doc
    # Errors stay in OpenAI's shape on OpenAI's endpoints.
    status, doc = post_json(server.base, "/v1/chat/completions", {"messages": []})
    assert status == 400 and "type" not in doc and doc["error"]["param"] == "messages"


def test_output_config_format_constrains_the_reply(server):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}},
              "required": ["ok"], "additionalProperties": False}
    doc = create(server, max_tokens=40, output_config={"format": {"type": "json_schema",
                                                                  "schema": schema}})
    assert doc["stop_reason"] == "end_turn", doc
    assert set(json.loads(text_of(doc))) == {"ok"}


def test_x_api_key_and_bearer_both_authenticate(cli, models):
    s = Server(cli, ["-m", models["target"], "-t", "1", "-c", "128", "--api-key", "sekret"])
    try:
        body = {"max_tokens": 2, "messages": USER}
        status, doc = post_json(s.base, MESSAGES, body)
        assert status == 401 and doc["error"]["type"] == "authentication_error"
        status, doc = post_json(s.base, MESSAGES, body, headers={"x-api-key": "wrong"})
        assert status == 401
        assert post_json(s.base, MESSAGES, body, headers={"x-api-key": "sekret"})[0] == 200
        assert post_json(s.base, MESSAGES, body,
                         headers={"Authorization": "Bearer sekret"})[0] == 200
        # The SDK sends x-api-key.
        assert sdk(s, key="sekret").messages.count_tokens(
            model="specdec", messages=USER).input_tokens > 0
        with pytest.raises(anthropic.AuthenticationError):
            sdk(s, key="nope").messages.create(model="specdec", max_tokens=2, messages=USER)
        # The metrics count the endpoint under its own name.
        metrics = s.wait_idle(headers={"x-api-key": "sekret"})
        assert metrics['specdec_http_requests_total{endpoint="/v1/messages",status="200"}'] == 2
        assert metrics['specdec_http_requests_total{endpoint="/v1/messages",status="401"}'] >= 2
    finally:
        assert s.stop() == 0
