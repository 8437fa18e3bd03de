#!/usr/bin/env python3
"""Tool calling on the Qwen pair: speculative vs target-only decoding of forced calls.

Starts `specdec serve` with the target and draft, then sends each prompt with tool_choice
"required" (the reply is a call, constrained by the tools' schemas) and "auto" (the model
decides), speculative and target-only alternating, `--repeats` times, in two settings:

- cold: a new conversation (a nonce in the system message, so neither model holds the prompt):
  the client's wall time for the whole request, prompt included, since the draft must read the
  prompt too before it can propose;
- warm: the same request again (both models hold the prompt, as in a follow-up turn): the
  server's decode tokens/s.

Prints medians and the ratios, and the call each reply made. `--api anthropic` sends the same
requests through Anthropic's /v1/messages (tools with input_schema, tool_choice any / auto).

    scripts/bench_tools.py [--target T.gguf --draft D.gguf] [--threads 2] [--repeats 3]
                           [--api openai|anthropic]
"""


import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from bench_common import add_pair_server_args, pair_server  # noqa: E402
from bench_common import post_json as post  # noqa: E402

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"]}}},
    {"type": "function", "function": {
        "name": "search_code", "description": "Search a code base",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "language": {"type": "string", "enum": ["python", "rust", "cpp", "go"]},
            "max_results": {"type": "integer", "minimum": 1, "maximum": 50}},
            "required": ["query", "language", "max_results"]}}},
    {"type": "function", "function": {
        "name": "create_issue", "description": "File an issue in a tracker",
        "parameters": {"type": "object", "properties": {
            "title": {"type": "string"},
            "body": {"type": "string"},
            "labels": {"type": "array", "items": {"type": "string"}, "maxItems": 4}},
            "required": ["title", "body", "labels"]}}},
]
PROMPTS = [
    "What's the weather in Paris right now, in celsius?",
    "Find up to 10 Python examples of reading a CSV file with the csv module.",
    "File an issue: the server crashes when the prompt is empty. Describe how to reproduce it "
    "and label it as a bug with high priority.",
]


def openai_request(base, system, prompt, choice, max_tokens, spec):
    """(decode tokens/s, the calls or the content, new tokens, prompt tokens)."""
    doc = post(base, "/v1/chat/completions", {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
        "tools": TOOLS, "tool_choice": choice, "temperature": 0, "max_tokens": max_tokens,
        "speculative": spec})
    msg = doc["choices"][0]["message"]
    reply = ([c["function"]["name"] + " " + c["function"]["arguments"]
              for c in msg.get("tool_calls", [])] or
             ["(content) " + (msg["content"] or "")[:60].replace("\n", " ")])
    return (doc["specdec"]["tokens_per_second"], reply, doc["usage"]["completion_tokens"],
            doc["usage"]["prompt_tokens"])


def anthropic_request(base, system, prompt, choice, max_tokens, spec):
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in TOOLS]
    doc = post(base, "/v1/messages", {
        "system": system, "messages": [{"role": "user", "content": prompt}], "tools": tools,
        "tool_choice": {"type": "any" if choice == "required" else "auto"}, "temperature": 0,
        "max_tokens": max_tokens, "speculative": spec})
    reply = ([b["name"] + " " + json.dumps(b["input"], separators=(",", ":"))
              for b in doc["content"] if b["type"] == "tool_use"] or
             ["(content) " + "".join(b.get("text", "") for b in doc["content"])[:60]
              .replace("\n", " ")])
    usage = doc["usage"]
    return (doc["specdec"]["tokens_per_second"], reply, usage["output_tokens"],
            usage["input_tokens"] + usage["cache_read_input_tokens"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_pair_server_args(ap, port=18791)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--api", choices=["openai", "anthropic"], default="openai")
    args = ap.parse_args()
    request = anthropic_request if args.api == "anthropic" else openai_request

    with pair_server(args) as base:
        cold, warm, calls = {}, {}, {}
        nonce = 0
        for rep in range(args.repeats):
            for i, prompt in enumerate(PROMPTS):
                for choice in ("required", "auto"):
                    for spec in (True, False) if rep % 2 == 0 else (False, True):
                        nonce += 1
                        system = f"You are a helpful assistant (session {nonce})."
                        t0 = time.monotonic()
                        request(base, system, prompt, choice, args.max_tokens, spec)
                        cold.setdefault((i, choice, spec), []).append(time.monotonic() - t0)
                        tps, reply, n, n_prompt = request(base, system, prompt, choice,
                                                          args.max_tokens, spec)
                        warm.setdefault((i, choice, spec), []).append(tps)
                        calls[(i, choice)] = (reply, n, n_prompt)
        print(f"{'prompt':>6} {'tool_choice':>11} | cold: {'plain s':>7} {'spec s':>7} {'ratio':>6} "
              f"| warm: {'plain t/s':>9} {'spec t/s':>8} {'ratio':>6} | prompt  new  reply")
        med = statistics.median
        for i in range(len(PROMPTS)):
            for choice in ("required", "auto"):
                cp, cs = med(cold[(i, choice, False)]), med(cold[(i, choice, True)])
                wp, ws = med(warm[(i, choice, False)]), med(warm[(i, choice, True)])
                reply, n, n_prompt = calls[(i, choice)]
                print(f"{i:>6} {choice:>11} |       {cp:>7.2f} {cs:>7.2f} {cp / cs:>5.2f}x "
                      f"|       {wp:>9.1f} {ws:>8.1f} {ws / wp:>5.2f}x | {n_prompt:>6} {n:>4}  "
                      f"{reply[0][:70]}")


if __name__ == "__main__":
    main()
