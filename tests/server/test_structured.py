"""Structured output through `specdec serve`: OpenAI's response_format (json_object,
json_schema), llama.cpp's grammar and json_schema, vLLM's guided_json, guided_grammar,
guided_choice and guided_regex, and vLLM's structured_outputs. The tiny random-weight models write gibberish unless constrained, so every text
that follows the format shows the constraint at work; greedy text is the same with and without
speculation, and concurrent requests with different grammars each get their own."""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import post_json
from test_server import client, sse_stream

# Bounded: a random model reaches the end of it, where only the end token is allowed.
FLAG_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}},
               "required": ["ok"], "additionalProperties": False}
COLORS = ["red", "green", "blue"]
PAIR_GBNF = 'root ::= "(" [0-9] "," [0-9] ")"'


def complete(server, path="/v1/completions", **body):
    if path == "/v1/completions":
        body.setdefault("prompt", "Answer:")
    else:
        body.setdefault("messages", [{"role": "user", "content": "Answer:"}])
    status, doc = post_json(server.base, path, {"max_tokens": 48, "temperature": 0, **body})
    assert status == 200, doc
    return doc


def text_of(doc):
    c = doc["choices"][0]
    return c["text"] if "text" in c else c["message"]["content"]


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
@pytest.mark.parametrize("form", [
    {"response_format": {"type": "json_schema",
                         "json_schema": {"name": "flag", "strict": True, "schema": FLAG_SCHEMA}}},
    {"response_format": {"type": "json_object", "schema": FLAG_SCHEMA}},
    {"json_schema": FLAG_SCHEMA},
    {"guided_json": FLAG_SCHEMA},
    {"guided_json": json.dumps(FLAG_SCHEMA)},
])
def test_a_json_schema_gives_json_that_validates(server, path, form):
    doc = complete(server, path, **form)
    value = json.loads(text_of(doc))
    assert set(value) == {"ok"} and isinstance(value["ok"], bool), text_of(doc)
    assert doc["choices"][0]["finish_reason"] == "stop"


def test_json_object_mode_gives_a_json_object_prefix_or_object(server):
    for seed in range(4):
        doc = complete(server, "/v1/chat/completions", max_tokens=64, temperature=1.0, seed=seed,
                       response_format={"type": "json_object"})
        text = text_of(doc)
        assert text.startswith("{"), text
        if doc["choices"][0]["finish_reason"] == "stop":
            assert isinstance(json.loads(text), dict), text


def test_guided_choice_and_gbnf(server):
    assert text_of(complete(server, guided_choice=COLORS)) in COLORS
    for body in ({"grammar": PAIR_GBNF}, {"guided_grammar": PAIR_GBNF}):
        text = text_of(complete(server, **body))
        assert re.fullmatch(r"\([0-9],[0-9]\)", text), text
    # Unconstrained, the same request writes something else.
    assert not re.fullmatch(r"\([0-9],[0-9]\)", text_of(complete(server, ignore_eos=True)))


def test_guided_regex_and_vllms_structured_outputs(server):
    pattern = r"(ab|cd){2,3}-[0-9]{2}!"
    for body in ({"guided_regex": pattern}, {"structured_outputs": {"regex": pattern}}):
        for path in ("/v1/completions", "/v1/chat/completions"):
            text = text_of(complete(server, path, **body))
            assert re.fullmatch(pattern, text), (body, text)
    # A pattern in a JSON Schema matches the string's decoded text.
    schema = {"type": "object", "properties": {"id": {"type": "string",
                                                      "pattern": r'^"[A-F]{2}\\\d$'}},
              "required": ["id"]}
    for body in ({"json_schema": schema}, {"structured_outputs": {"json": schema}}):
        value = json.loads(text_of(complete(server, **body)))
        assert re.fullmatch(r'"[A-F]{2}\\\d', value["id"]), value
    assert text_of(complete(server, structured_outputs={"choice": COLORS})) in COLORS
    text = text_of(complete(server, structured_outputs={"grammar": PAIR_GBNF}))
    assert re.fullmatch(r"\([0-9],[0-9]\)", text), text
    docs = [complete(server, guided_regex=pattern, speculative=s) for s in (True, False)]
    assert text_of(docs[0]) == text_of(docs[1])


def test_numeric_bounds_hold(server):
    schema = {"type": "object", "properties": {
        "stars": {"type": "integer", "minimum": 1, "maximum": 5},
        "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 100}},
        "required": ["stars", "price"]}
    for seed in range(3):
        value = json.loads(text_of(complete(server, json_schema=schema, temperature=1.0,
                                            seed=seed, max_tokens=64)))
        assert isinstance(value["stars"], int) and 1 <= value["stars"] <= 5, value
        assert 0 < value["price"] <= 100, value


def test_speculation_keeps_the_greedy_constrained_text(server):
    gbnf = 'root ::= "[" item ("," item){0,5} "]"\nitem ::= [a-z]{1,3}'
    docs = [complete(server, grammar=gbnf, speculative=s) for s in (True, False)]
    assert text_of(docs[0]) == text_of(docs[1])
    assert re.fullmatch(r"\[[a-z]{1,3}(,[a-z]{1,3}){0,5}\]", text_of(docs[0])), text_of(docs[0])
    assert docs[0]["specdec"]["drafted"] > 0, docs[0]["specdec"]


def test_streamed_constrained_text_is_the_same(server):
    whole = text_of(complete(server, guided_choice=COLORS, seed=3, temperature=1.0))
    status, events, done = sse_stream(server.port, "/v1/completions",
                                      {"prompt": "Answer:", "max_tokens": 48, "temperature": 1.0,
                                       "seed": 3, "guided_choice": COLORS})
    assert status == 200 and done
    assert "".join(e["choices"][0]["text"] for e in events if e["choices"]) == whole


def test_several_choices_and_concurrent_requests_each_follow_their_own_grammar(server):
    doc = complete(server, n=3, temperature=1.0, seed=5, guided_choice=COLORS)
    assert len(doc["choices"]) == 3
    assert all(c["text"] in COLORS for c in doc["choices"])

    def one(i):
        if i % 2 == 0:
            return "choice", text_of(complete(server, guided_choice=COLORS, temperature=1.0,
                                              seed=i))
        return "pair", text_of(complete(server, grammar=PAIR_GBNF, temperature=1.0, seed=i))

    with ThreadPoolExecutor(6) as pool:
        for kind, text in pool.map(one, range(6)):
            if kind == "choice":
                assert text in COLORS, text
            else:
                assert re.fullmatch(r"\([0-9],[0-9]\)", text), text


@pytest.mark.parametrize("body, param", [
    ({"grammar": "root ::= missing"}, "grammar"),
    ({"grammar": "root ::= root \"a\""}, "grammar"),  # left recursion
    ({"json_schema": {"type": "integer", "multipleOf": 3}}, "json_schema"),
    ({"json_schema": {"type": "integer", "minimum": 3, "maximum": 2}}, "json_schema"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": 5}}},
     "response_format.json_schema.schema"),
    ({"guided_choice": COLORS, "grammar": PAIR_GBNF}, "guided_choice"),
    ({"guided_regex": "(a)\\1"}, "guided_regex"),
    ({"json_schema": {"type": "string", "pattern": "a(?=b)"}}, "json_schema"),
    ({"structured_outputs": {"regex": "[z-a]"}}, "structured_outputs.regex"),
    ({"structured_outputs": {"structural_tag": {}}}, "structured_outputs.structural_tag"),
])
def test_bad_grammars_and_schemas_get_400(server, body, param):
    status, doc = post_json(server.base, "/v1/completions",
                            {"prompt": "x", "max_tokens": 4, **body})
    assert status == 400, doc
    assert doc["error"]["param"] == param, doc
    assert server.alive()


def test_properties_come_in_the_schemas_order(server):
    schema = {"type": "object", "properties": {"zeta": {"const": 1}, "alpha": {"const": 2}},
              "required": ["zeta", "alpha"]}
    for body in ({"json_schema": schema}, {"guided_json": json.dumps(schema)},
                 {"response_format": {"type": "json_schema",
                                      "json_schema": {"name": "o", "schema": schema}}}):
        text = text_of(complete(server, **body))
        assert json.loads(text, object_pairs_hook=list) == [("zeta", 1), ("alpha", 2)], text
