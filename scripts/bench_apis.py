#!/usr/bin/env python3
"""The same greedy requests through each chat front end: OpenAI's chat completions, Anthropic's
Messages API, OpenAI's Responses API and Ollama's /api/chat, speculative and target-only.

Starts `specdec serve` on the Qwen pair (one slot), sends each prompt through each API with
speculation on and off, alternating, `--repeats` times, and prints the server's decode tokens/s
(medians; each prompt is read by both models before its counted requests), the speedup, and
whether the text is the same with and without speculation and across the APIs.

    scripts/bench_apis.py [--target T.gguf --draft D.gguf] [--threads 2] [--repeats 3]
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from bench_common import add_pair_server_args, pair_server  # noqa: E402
from bench_common import post_json as post  # noqa: E402

PROMPTS = [
    "Write a Python function that checks whether a string is a palindrome.",
    "Explain what a mutex is, in two paragraphs.",
    "Summarize the plot of Romeo and Juliet in five sentences.",
]


def chat(base, prompt, n, spec):
    doc = post(base, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": prompt}], "max_tokens": n, "temperature": 0,
        "speculative": spec})
    return doc["choices"][0]["message"]["content"], doc["specdec"]["tokens_per_second"]


def messages(base, prompt, n, spec):
    doc = post(base, "/v1/messages", {
        "messages": [{"role": "user", "content": prompt}], "max_tokens": n, "temperature": 0,
        "speculative": spec})
    return "".join(b["text"] for b in doc["content"]), doc["specdec"]["tokens_per_second"]


def responses(base, prompt, n, spec):
    doc = post(base, "/v1/responses", {
        "input": prompt, "max_output_tokens": n, "temperature": 0, "speculative": spec})
    text = "".join(p["text"] for item in doc["output"] if item["type"] == "message"
                   for p in item["content"])
    return text, doc["specdec"]["tokens_per_second"]


def ollama(base, prompt, n, spec):
    doc = post(base, "/api/chat", {
        "model": "specdec", "messages": [{"role": "user", "content": prompt}], "stream": False,
        "options": {"temperature": 0, "num_predict": n}, "speculative": spec})
    # Ollama's own rate: eval_count over eval_duration (the decode time, in nanoseconds).
    return doc["message"]["content"], doc["eval_count"] / (doc["eval_duration"] / 1e9)


APIS = {"chat": chat, "messages": messages, "responses": responses, "ollama": ollama}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_pair_server_args(ap, port=18793)
    ap.add_argument("--tokens", type=int, default=160)
    args = ap.parse_args()

    with pair_server(args) as base:
        tps, texts = {}, {}
        for rep in range(args.repeats):
            for i, prompt in enumerate(PROMPTS):
                # Not counted: both models read the prompt, so that every counted request finds
                # it cached (the first speculative request of a prompt would otherwise pay the
                # draft's read of it inside its decode time).
                chat(base, prompt, 16, True)
                for api, call in APIS.items():
                    for spec in (True, False) if rep % 2 == 0 else (False, True):
                        text, rate = call(base, prompt, args.tokens, spec)
                        tps.setdefault((i, api, spec), []).append(rate)
                        texts.setdefault((i, api, spec), set()).add(text)
        print(f"{'prompt':>6} {'api':>9} | {'target-only':>11} {'speculative':>11} {'ratio':>6} "
              f"| same text: with/without draft, across APIs")
        med = statistics.median
        for i in range(len(PROMPTS)):
            reference = texts[(i, "chat", False)]
            for api in APIS:
                plain, spec = med(tps[(i, api, False)]), med(tps[(i, api, True)])
                same_spec = texts[(i, api, True)] == texts[(i, api, False)]
                same_api = texts[(i, api, False)] == reference and len(reference) == 1
                print(f"{i:>6} {api:>9} | {plain:>11.1f} {spec:>11.1f} {spec / plain:>5.2f}x "
                      f"| {same_spec!s:>5} {same_api!s:>5}")


if __name__ == "__main__":
    main()
