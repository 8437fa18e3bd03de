"""OpenAI tool calling through `specdec serve`, on a tiny model whose chat template has Qwen2.5's
Hermes-style convention: tools are listed in the prompt, tool_choice "required" or a named
function makes the reply a call whose arguments follow the tool's schema (the random model
writes gibberish otherwise), and the reply comes back as message.tool_calls, whole or streamed,
the same with and without speculation. Templates without the convention refuse tools."""

import json
import subprocess

import pytest

from conftest import Server, post_json
from test_server import client, sse_stream

CHAT = "/v1/chat/completions"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
        "unit": {"type": "string", "enum": ["C", "F"]}},
        "required": ["city", "unit"], "additionalProperties": False}}}
ADD = {"type": "function", "function": {
    "name": "add", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 99},
        "b": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["a", "b"], "additionalProperties": False}}}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def tool_server(cli, models, tmp_path_factory):
    draft = tmp_path_factory.mktemp("tools") / "tiny-tools-draft.gguf"
    subprocess.run([cli, "make-draft", "-m", models["tools"], "--layers", "1", "-o", str(draft)],
                   check=True, timeout=60, capture_output=True)
    s = Server(cli, ["-m", models["tools"], "-md", str(draft), "--draft-max", "3",
                     "--draft-policy", "fixed", "--no-draft-hybrid", "-t", "2", "-c", "2048"])
    yield s
    assert s.stop() == 0, "".join(s.log[-30:])


def chat(server, **body):
    status, doc = post_json(server.base, CHAT, {"messages": USER, "max_tokens": 400,
                                                "temperature": 0, **body})
    assert status == 200, doc
    return doc


def check_call(call, tools_by_name):
    assert call["type"] == "function" and call["id"].startswith("call_"), call
    name = call["function"]["name"]
    args = json.loads(call["function"]["arguments"])
    params = tools_by_name[name]["function"]["parameters"]
    assert set(args) == set(params["required"]), args
    for key, value in args.items():
        spec = params["properties"][key]
        if "enum" in spec:
            assert value in spec["enum"], (key, value)
        else:
            assert isinstance(value, int) and spec["minimum"] <= value <= spec["maximum"], value
    return name, args


def test_required_tool_choice_gives_valid_calls(tool_server):
    tools = {"get_weather": WEATHER, "add": ADD}
    for parallel in (True, False):
        doc = chat(tool_server, tools=[WEATHER, ADD], tool_choice="required",
                   parallel_tool_calls=parallel)
        choice = doc["choices"][0]
        assert choice["finish_reason"] == "tool_calls", choice
        message = choice["message"]
        assert message["content"] is None
        assert len(message["tool_calls"]) >= 1
        if not parallel:
            assert len(message["tool_calls"]) == 1
        for call in message["tool_calls"]:
            check_call(call, tools)


def test_a_named_function_is_the_one_called(tool_server):
    doc = chat(tool_server, tools=[WEATHER, ADD],
               tool_choice={"type": "function", "function": {"name": "add"}})
    calls = doc["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["add"] * len(calls)
    check_call(calls[0], {"add": ADD})


def test_streamed_calls_and_speculation_give_the_same_reply(tool_server):
    body = {"tools": [WEATHER, ADD], "tool_choice": "required"}
    whole = chat(tool_server, **body)["choices"][0]["message"]
    plain = chat(tool_server, speculative=False, **body)["choices"][0]["message"]
    assert [c["function"] for c in plain["tool_calls"]] == \
        [c["function"] for c in whole["tool_calls"]]
    status, events, done = sse_stream(tool_server.port, CHAT,
                                      {"messages": USER, "max_tokens": 400, "temperature": 0,
                                       **body})
    assert status == 200 and done
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    streamed = [c for d in deltas for c in d.get("tool_calls", [])]
    assert [c["function"] for c in streamed] == [c["function"] for c in whole["tool_calls"]]
    assert [c["index"] for c in streamed] == list(range(len(streamed)))
    assert not any(d.get("content") for d in deltas)  # nothing of the call leaks as text
    finals = [e["choices"][0]["finish_reason"] for e in events if e["choices"]]
    assert finals[-1] == "tool_calls"


def test_auto_lets_the_model_answer_in_words(tool_server):
    doc = chat(tool_server, tools=[WEATHER], max_tokens=12, ignore_eos=True)
    choice = doc["choices"][0]
    # The random model writes no call: its text is the content, as streamed text is.
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "length"
    status, events, done = sse_stream(tool_server.port, CHAT,
                                      {"messages": USER, "max_tokens": 12, "temperature": 0,
                                       "ignore_eos": True, "tools": [WEATHER]})
    assert status == 200 and done
    text = "".join(e["choices"][0]["delta"].get("content") or ""
                   for e in events if e["choices"])
    assert text == choice["message"]["content"]


def test_a_conversation_with_calls_and_results_continues(tool_server):
    messages = USER + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"C\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
        {"role": "user", "content": "And in Oslo?"}]
    doc = chat(tool_server, messages=messages, tools=[WEATHER], tool_choice="required")
    name, _ = check_call(doc["choices"][0]["message"]["tool_calls"][0], {"get_weather": WEATHER})
    assert name == "get_weather"
    # The prompt holds the call and its result (the tokenize endpoint renders it the same way).
    status, tok = post_json(tool_server.base, "/tokenize", {"messages": messages})
    assert status == 200 and tok["count"] > 0


def test_deprecated_functions_get_the_call_the_tools_form_gets(tool_server):
    # OpenAI's deprecated form ("functions", "function_call"; one call per reply) is the tools
    # form with parallel_tool_calls false, answered as message.function_call.
    functions = [WEATHER["function"], ADD["function"]]
    doc = chat(tool_server, functions=functions, function_call={"name": "add"})
    choice = doc["choices"][0]
    assert choice["finish_reason"] == "function_call", choice
    message = choice["message"]
    assert message["content"] is None and "tool_calls" not in message, message
    call = message["function_call"]
    check_call({"type": "function", "id": "call_x", "function": call}, {"add": ADD})
    modern = chat(tool_server, tools=[WEATHER, ADD], parallel_tool_calls=False,
                  tool_choice={"type": "function", "function": {"name": "add"}})
    assert [c["function"] for c in modern["choices"][0]["message"]["tool_calls"]] == [call]
    # Streamed: the call as delta.function_call, and the same finish.
    status, events, done = sse_stream(tool_server.port, CHAT,
                                      {"messages": USER, "max_tokens": 400, "temperature": 0,
                                       "functions": functions, "function_call": {"name": "add"}})
    assert status == 200 and done
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    assert [d["function_call"] for d in deltas if "function_call" in d] == [call]
    assert not any(d.get("content") or d.get("tool_calls") for d in deltas)
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == \
        "function_call"


def test_a_conversation_in_the_deprecated_form_renders_as_the_tools_form(tool_server):
    call = {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"C\"}"}
    legacy = USER + [{"role": "assistant", "content": None, "function_call": call},
                     {"role": "function", "name": "get_weather", "content": "{\"temp\": 21}"},
                     {"role": "user", "content": "And in Oslo?"}]
    modern = USER + [{"role": "assistant", "content": None, "tool_calls": [
                          {"id": "call_1", "type": "function", "function": call}]},
                     {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
                     {"role": "user", "content": "And in Oslo?"}]
    rendered = []
    for messages, tools in ((legacy, {"functions": [WEATHER["function"]]}),
                            (modern, {"tools": [WEATHER]})):
        status, doc = post_json(tool_server.base, "/apply-template", {"messages": messages, **tools})
        assert status == 200, doc
        rendered.append(doc["prompt"])
    assert rendered[0] == rendered[1]
    assert "get_weather" in rendered[0] and "{\"temp\": 21}" in rendered[0]
    doc = chat(tool_server, messages=legacy, functions=[WEATHER["function"]],
               function_call={"name": "get_weather"})
    assert doc["choices"][0]["message"]["function_call"]["name"] == "get_weather"


def test_the_openai_client_reads_a_deprecated_function_call(tool_server):
    reply = client(tool_server).chat.completions.create(
        model="specdec", messages=USER, functions=[WEATHER["function"]],
        function_call={"name": "get_weather"}, max_tokens=400, temperature=0)
    call = reply.choices[0].message.function_call
    assert call.name == "get_weather"
    assert json.loads(call.arguments)["city"] in ["Paris", "Oslo", "Lima"]
    assert reply.choices[0].finish_reason == "function_call"


def test_the_openai_client_reads_the_calls(tool_server):
    reply = client(tool_server).chat.completions.create(
        model="specdec", messages=USER, tools=[WEATHER], tool_choice="required", max_tokens=400,
        temperature=0)
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments)["city"] in ["Paris", "Oslo", "Lima"]
    assert reply.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("path, body, param", [
    (CHAT, {"tools": [{"type": "function", "function": {"name": "bad name"}}]},
     "tools[0].function.name"),
    (CHAT, {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}},
     "tool_choice"),
    (CHAT, {"tools": [WEATHER], "tool_choice": "required",
            "response_format": {"type": "json_object"}}, "tool_choice"),
    ("/v1/completions", {"prompt": "x", "tools": [WEATHER]}, "tools"),
    # OpenAI's deprecated function calling: refused where it is not read, and in bad shapes.
    ("/v1/completions", {"prompt": "x", "functions": [WEATHER["function"]]}, "functions"),
    (CHAT, {"functions": [WEATHER["function"]], "tools": [WEATHER]}, "functions"),
    (CHAT, {"functions": [{"name": "bad name"}]}, "functions[0].name"),
    (CHAT, {"functions": [WEATHER["function"]], "function_call": {"name": "x"}}, "function_call"),
    (CHAT, {"functions": [WEATHER["function"]], "function_call": "required"}, "function_call"),
])
def test_bad_tool_requests_get_400(tool_server, path, body, param):
    status, doc = post_json(tool_server.base, path, {"messages": USER, "max_tokens": 4, **body})
    assert status == 400, doc
    assert doc["error"]["param"] == param, doc


def test_a_template_without_the_convention_refuses_tools(server):
    status, doc = post_json(server.base, CHAT, {"messages": USER, "tools": [WEATHER],
                                                "max_tokens": 4})
    assert status == 400 and doc["error"]["param"] == "tools", doc
    assert "tool-calling convention" in doc["error"]["message"]
    status, doc = post_json(server.base, CHAT, {"messages": USER + [
        {"role": "tool", "content": "42"}], "max_tokens": 4})
    assert status == 400 and doc["error"]["param"] == "messages", doc
    # tool_choice "none" asks for no tools: fine anywhere.
    status, doc = post_json(server.base, CHAT, {"messages": USER, "tools": [WEATHER],
                                                "tool_choice": "none", "max_tokens": 4})
    assert status == 200, doc
