#!/usr/bin/env python3
"""Embeddings through /v1/embeddings on one GGUF: specdec serve against llama-server
(--embeddings, the same pooling, file, threads and slots), in one run.

The texts are the benchmark prompts in bench/prompts/ (12 chat prompts) and the first
paragraphs of docs/architecture.md, 10 to about 450 tokens each. Each round sends every text
once as its own request, from --clients concurrent clients, to one server, then the same to the
other (the servers taking turns, --repeats rounds): texts per second and input tokens per second
over the round's wall time, medians over the rounds. Both servers' vectors for each text are
compared (cosine similarity: the same model read by different kernels, so close to 1, not equal).

    scripts/bench_embeddings.py [--target FILE] [--threads 2] [--parallel 2] [--clients 1,2]
        [--pooling last] [--repeats 3] [--llama-server /opt/llama.cpp/build/bin/llama-server]
        [--texts 40] [--json OUT]
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from bench_common import MODELS, ROOT, die, post_json, wait_healthy  # noqa: E402


def texts(limit):
    out = []
    for category in ("summary", "code", "opinion"):
        for p in sorted((ROOT / "bench" / "prompts" / category).glob("*.txt")):
            out.append(p.read_text().strip())
    prose = (ROOT / "docs" / "architecture.md").read_text().split("\n\n")
    for para in prose:
        para = para.strip()
        if len(para) > 200 and not para.startswith(("|", "```", "#")):
            out.append(para[:2000])
    return out[:limit]


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def run_round(base, items, clients):
    """Sends every text once from `clients` threads; returns (wall s, tokens, vectors)."""
    vectors = [None] * len(items)
    tokens = [0] * len(items)
    errors = []
    next_item = [0]
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                i = next_item[0]
                next_item[0] += 1
            if i >= len(items):
                return
            try:
                doc = post_json(base, "/v1/embeddings", {"input": items[i], "model": "specdec",
                                                         "encoding_format": "float"})
                vectors[i] = doc["data"][0]["embedding"]
                tokens[i] = doc["usage"]["prompt_tokens"]
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"text {i}: {e}")

    start = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        die("; ".join(errors[:3]))
    return time.monotonic() - start, sum(tokens), vectors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default="build/specdec")
    ap.add_argument("--target", default=f"{MODELS}/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--llama-server", default="/opt/llama.cpp/build/bin/llama-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--clients", default="1,2")
    ap.add_argument("--pooling", default="last")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--texts", type=int, default=40)
    ap.add_argument("--port", type=int, default=8790)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if not Path(args.target).is_file():
        die(f"{args.target} not found")
    items = texts(args.texts)
    ctx = 4096
    servers = {
        "specdec": [args.cli, "serve", "-m", args.target, "-t", str(args.threads), "-c", str(ctx),
                    "--parallel", str(args.parallel), "--pooling", args.pooling],
    }
    if args.llama_server:
        if not Path(args.llama_server).is_file():
            die(f"{args.llama_server} not found (or pass --llama-server '')")
        # llama-server splits -c among its slots.
        servers["llama"] = [args.llama_server, "-m", args.target, "-t", str(args.threads), "-c",
                            str(ctx * args.parallel), "-np", str(args.parallel), "--embeddings",
                            "--pooling", args.pooling, "-ub", "2048", "-b", "2048"]
    procs, bases = [], {}
    try:
        for n, (name, cmd) in enumerate(servers.items()):
            port = args.port + n
            p = subprocess.Popen(cmd + ["--port", str(port)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            procs.append(p)
            bases[name] = f"http://127.0.0.1:{port}"
            if not wait_healthy(bases[name], p, name, timeout_s=300):
                die(f"{name} did not come up")
        results = {"texts": len(items), "threads": args.threads, "parallel": args.parallel,
                   "pooling": args.pooling, "target": args.target, "runs": {}}
        vectors = {}
        for clients in [int(c) for c in args.clients.split(",")]:
            for name in servers:  # warm-up: first-touch costs out of the timed rounds
                run_round(bases[name], items[:4], clients)
            per = {name: [] for name in servers}
            for _ in range(args.repeats):
                for name in servers:
                    wall, tokens, vecs = run_round(bases[name], items, clients)
                    per[name].append((wall, tokens))
                    vectors[name] = vecs
            line = [f"{clients} client(s):"]
            for name, runs in per.items():
                wall = statistics.median(w for w, _ in runs)
                tokens = runs[0][1]
                results["runs"].setdefault(name, {})[clients] = {
                    "walls_s": [w for w, _ in runs], "tokens": tokens,
                    "texts_per_s": len(items) / wall, "tokens_per_s": tokens / wall}
                line.append(f"{name} {len(items) / wall:.2f} texts/s {tokens / wall:.0f} tok/s "
                            f"({tokens} tokens)")
            if "llama" in per:
                ratio = statistics.median(w for w, _ in per["llama"]) / \
                    statistics.median(w for w, _ in per["specdec"])
                line.append(f"specdec/llama {ratio:.2f}x")
                results["runs"].setdefault("ratio", {})[clients] = ratio
            print("  ".join(line), flush=True)
        if "llama" in vectors:
            cos = [cosine(a, b) for a, b in zip(vectors["specdec"], vectors["llama"])]
            results["cosine"] = cos
            print(f"cosine(specdec, llama-server) per text: min {min(cos):.5f} "
                  f"median {statistics.median(cos):.5f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)


if __name__ == "__main__":
    main()
