"""OpenAI's Responses API (/v1/responses), which newer OpenAI clients and agents speak: the same
greedy text as the chat endpoint for the same turns, with and without speculation, whole or as
the typed event stream the openai SDK accumulates; function tools, function_call and
function_call_output items; text.format; and 400s naming the Responses fields for what is not
served (nothing is stored)."""

import http.client
import json

import pytest

from conftest import check_leaving_client_frees_its_slot, post_json
from test_server import client
from test_tools import ADD, WEATHER, check_call, tool_server  # noqa: F401 (a fixture)

RESPONSES = "/v1/responses"
TIMEOUT = 60
CHAT_TURNS = [{"role": "system", "content": "Be brief."},
              {"role": "user", "content": "Tell me about Paris."}]


def create(server, status=200, **body):
    got, doc = post_json(server.base, RESPONSES, {"input": "Tell me about Paris.",
                                                   "instructions": "Be brief.",
                                                   "max_output_tokens": 12, "temperature": 0,
                                                   **body})
    assert got == status, doc
    return doc


def text_of(doc):
    return "".join(part["text"] for item in doc["output"] if item["type"] == "message"
                   for part in item["content"])


def chat_text(server, messages, max_tokens=12, **extra):
    status, doc = post_json(server.base, "/v1/chat/completions",
                            {"messages": messages, "max_tokens": max_tokens, "temperature": 0,
                             **extra})
    assert status == 200, doc
    return doc


def event_stream(port, body):
    """(status, [event documents]) of a streamed /v1/responses request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        conn.request("POST", RESPONSES, json.dumps({**body, "stream": True}),
                     {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, [json.loads(resp.read())]
        events = []
        for raw in resp.read().decode().split("\n\n"):
            if raw:
                name, data = raw.split("\n")
                doc = json.loads(data[len("data: "):])
                assert name == "event: " + doc["type"], raw
                events.append(doc)
        return resp.status, events
    finally:
        conn.close()


@pytest.mark.parametrize("speculative", [True, False])
def test_greedy_text_is_the_chat_endpoints(server, speculative):
    doc = create(server, ignore_eos=True, speculative=speculative)
    want = chat_text(server, CHAT_TURNS, ignore_eos=True)
    assert text_of(doc) == want["choices"][0]["message"]["content"]
    assert doc["object"] == "response" and doc["id"].startswith("resp_")
    assert doc["status"] == "incomplete"
    assert doc["incomplete_details"] == {"reason": "max_output_tokens"}
    assert doc["model"] == "tiny-target" and doc["instructions"] == "Be brief."
    assert doc["max_output_tokens"] == 12 and doc["temperature"] == 0
    usage = doc["usage"]
    assert usage["output_tokens"] == 12
    assert usage["input_tokens"] == want["usage"]["prompt_tokens"]
    assert usage["total_tokens"] == usage["input_tokens"] + 12
    assert doc["specdec"]["speculative"] is speculative


def test_the_event_stream_builds_the_same_response(server):
    whole = create(server, ignore_eos=True, max_output_tokens=16)
    status, events = event_stream(server.port, {"input": "Tell me about Paris.",
                                                "instructions": "Be brief.",
                                                "max_output_tokens": 16, "temperature": 0,
                                                "ignore_eos": True})
    assert status == 200
    types = [e["type"] for e in events]
    assert types[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.incomplete"]
    assert set(types[4:-4]) == {"response.output_text.delta"}
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == text_of(whole) == events[-4]["text"]
    final = events[-1]["response"]
    assert final["output"][0]["id"] == events[2]["item"]["id"] == events[-2]["item"]["id"]
    assert text_of(final) == text and final["usage"]["output_tokens"] == 16
    assert events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []


def test_the_openai_sdk_creates_and_streams_responses(server):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}},
              "required": ["ok"], "additionalProperties": False}
    body = dict(model="specdec", input="Reply in JSON.", max_output_tokens=40, temperature=0,
                text={"format": {"type": "json_schema", "name": "reply", "schema": schema,
                                 "strict": True}})
    sdk = client(server)
    reply = sdk.responses.create(**body)
    assert reply.status == "completed", reply
    assert set(json.loads(reply.output_text)) == {"ok"}
    with sdk.responses.stream(**body) as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas == final.output_text == reply.output_text
    assert final.status == "completed" and final.usage.output_tokens == reply.usage.output_tokens


def test_function_tools_give_function_call_items(tool_server):  # noqa: F811
    tools = [{"type": "function", **t["function"]} for t in (WEATHER, ADD)]
    turn = "What is the weather in Paris?"
    doc = create(tool_server, input=turn, instructions=None, max_output_tokens=400, tools=tools,
                 tool_choice="required", parallel_tool_calls=False)
    assert doc["status"] == "completed"
    calls = [i for i in doc["output"] if i["type"] == "function_call"]
    assert len(calls) == 1 and not [i for i in doc["output"] if i["type"] == "message"]
    call = calls[0]
    check_call({"type": "function", "id": call["call_id"],
                "function": {"name": call["name"], "arguments": call["arguments"]}},
               {"get_weather": WEATHER, "add": ADD})
    want = chat_text(tool_server, [{"role": "user", "content": turn}], max_tokens=400,
                     tools=[WEATHER, ADD], tool_choice="required", parallel_tool_calls=False)
    assert call["arguments"] == want["choices"][0]["message"]["tool_calls"][0]["function"][
        "arguments"]
    # Streamed: the same call, as an item with its arguments.
    status, events = event_stream(tool_server.port, {
        "input": turn, "max_output_tokens": 400, "temperature": 0, "tools": tools,
        "tool_choice": "required", "parallel_tool_calls": False, "speculative": False})
    assert status == 200
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [(i["name"], i["arguments"]) for i in done] == [(call["name"], call["arguments"])]
    args = "".join(e["delta"] for e in events
                   if e["type"] == "response.function_call_arguments.delta")
    assert args == call["arguments"] and events[-1]["type"] == "response.completed"
    # The next turn carries the call and its output; the SDK reads the new call.
    follow_up = [{"role": "user", "content": turn},
                 {"type": "function_call", "call_id": call["call_id"], "name": call["name"],
                  "arguments": call["arguments"]},
                 {"type": "function_call_output", "call_id": call["call_id"],
                  "output": "{\"temp\": 21}"},
                 {"role": "user", "content": "And in Oslo?"}]
    reply = client(tool_server).responses.create(
        model="specdec", input=follow_up, tools=tools, tool_choice="required",
        max_output_tokens=400, temperature=0)
    fc = [o for o in reply.output if o.type == "function_call"]
    assert fc and fc[0].name in ("get_weather", "add")


@pytest.mark.parametrize("body, param", [
    ({}, "input"),
    ({"input": []}, "input"),
    ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
    ({"input": "x", "background": True}, "background"),
    ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]},
     "input[0].content[0].type"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "x", "tools": [{"type": "function", "name": "f", "parameters": 3}]},
     "tools[0].parameters"),
    ({"input": "x", "text": {"format": {"type": "json_schema"}}}, "text.format.schema"),
])
def test_bad_requests_get_a_400_naming_the_field(server, body, param):
    status, doc = post_json(server.base, RESPONSES, body)
    assert status == 400, doc
    assert doc["error"]["type"] == "invalid_request_error" and doc["error"]["param"] == param, doc


def test_a_client_that_leaves_mid_stream_frees_its_slot(cli, models):
    check_leaving_client_frees_its_slot(
        cli, models, RESPONSES, {"input": "x", "max_output_tokens": 4000, "ignore_eos": True},
        b"event: response.created", {"input": "x", "max_output_tokens": 3, "ignore_eos": True},
        lambda doc: doc["usage"]["output_tokens"])
