#!/usr/bin/env python3
"""Code infill through llama-server's /infill on the Qwen pair: what an editor plugin
(llama.vscode, llama.vim) gets from specdec, speculative and target-only, and from llama-server
on the same GGUF files and thread count, in one run.

Each case is a gap in a small program (a function body, a method, a loop), sent the way
llama.vscode sends it: the lines before the cursor as input_prefix, the cursor's line as prompt,
the rest as input_suffix, n_indent = the cursor's indentation, n_predict 128; one case adds
another file as input_extra.

Settings:
  greedy     temperature 0: the texts must be the same with and without speculation (checked),
             and are compared with llama-server's;
  vscode     llama.vscode's sampling (top_k 40, top_p 0.99, samplers [top_k, top_p, infill]):
             specdec skips the infill sampler, so llama-server's distribution differs there.

Configurations, each its own server process with one slot (so each keeps its own prompt cache):
specdec with its draft ("specdec") and without ("specdec-target"), and with --llama-server BIN,
llama-server target-only ("llama") and with the draft ("llama-spec": --spec-type draft-simple,
its default draft length). Case by case, every server answers the case once to warm its caches,
then `--repeats` times, the servers taking turns: the wall times are those of an editor asking
again at a position whose prompt the server holds.

Prints per configuration the median over cases of the decode tokens/s the server reports
(timings.predicted_per_second) and of the client's wall time per request, and the ratios.

    scripts/bench_infill.py [--llama-server /opt/llama.cpp/build/bin/llama-server]
        [--settings greedy,vscode] [--repeats 3] [--threads 2] [--json OUT]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from bench_common import MODELS, post_json, wait_healthy  # noqa: E402


GEOMETRY = "import math\n\n\ndef circle_area(r):\n    return math.pi * r * r\n\n\n" \
           "def rectangle_area(w, h):\n    return w * h\n"

# (name, before the cursor's line, the cursor's line up to the cursor, after it, extra files)
CASES = [
    ("is_prime", "def is_prime(n):\n", "    ", "\n\nprint([n for n in range(20) if is_prime(n)])\n",
     []),
    ("stack_pop", "class Stack:\n    def __init__(self):\n        self.items = []\n\n"
     "    def push(self, item):\n        self.items.append(item)\n\n    def pop(self):\n",
     "        ", "\n\n    def __len__(self):\n        return len(self.items)\n", []),
    ("csv_sum", "import csv\n\n\ndef total(path, column):\n    \"\"\"Sum a numeric column of a "
     "CSV file with a header row.\"\"\"\n", "    ", "\n\nif __name__ == '__main__':\n"
     "    print(total('data.csv', 'amount'))\n", []),
    ("debounce_js", "function debounce(fn, wait) {\n", "  ",
     "\n}\n\nconst onResize = debounce(() => console.log('resized'), 200);\n", []),
    ("vector_sum_cpp", "#include <vector>\n\nlong long sum(const std::vector<int>& v) {\n", "  ",
     "\n}\n\nint main() { return sum({1, 2, 3}) == 6 ? 0 : 1; }\n", []),
    ("areas_extra", "from geometry import circle_area, rectangle_area\n\n\n"
     "def total_area(shapes):\n    \"\"\"shapes: ('circle', r) or ('rect', w, h) tuples.\"\"\"\n",
     "    ", "\n\nprint(total_area([('circle', 1), ('rect', 2, 3)]))\n",
     [{"filename": "geometry.py", "text": GEOMETRY}]),
    ("test_fn", "def slugify(s):\n    return '-'.join(s.lower().split())\n\n\n"
     "def test_slugify():\n", "    ", "\n", []),
    ("reverse_go", "package main\n\nfunc Reverse(s string) string {\n", "\t",
     "\n}\n\nfunc main() { println(Reverse(\"hello\")) }\n", []),
]

SETTINGS = {
    "greedy": {"temperature": 0},
    "vscode": {"top_k": 40, "top_p": 0.99, "samplers": ["top_k", "top_p", "infill"]},
}


def post(base, path, body):
    """The answer and the client's wall time for it."""
    t0 = time.perf_counter()
    doc = post_json(base, path, body)
    return doc, time.perf_counter() - t0


def body_of(case, setting, seed):
    name, prefix, prompt, suffix, extra = case
    indent = len(prompt) - len(prompt.lstrip(" \t"))
    b = {"input_prefix": prefix, "prompt": prompt, "input_suffix": suffix, "input_extra": extra,
         "n_predict": 128, "n_indent": indent, "cache_prompt": True, "stream": False,
         "seed": seed, **SETTINGS[setting]}
    return b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default="build/specdec")
    ap.add_argument("--llama-server", default="")
    ap.add_argument("--target", default=f"{MODELS}/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    ap.add_argument("--draft", default=f"{MODELS}/qwen2.5-coder-0.5b-instruct.gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--settings", default="greedy,vscode")
    ap.add_argument("--port", type=int, default=18801)
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    servers = {}  # name -> (base, process, extra body fields)
    procs = []

    def start(name, cmd, port, extra):
        p = subprocess.Popen(cmd + ["--port", str(port)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        procs.append(p)
        base = f"http://127.0.0.1:{port}"
        if not wait_healthy(base, p, " ".join(cmd)):
            sys.exit(f"server did not become healthy: {' '.join(cmd)}")
        servers[name] = (base, extra)

    try:
        serve = [args.cli, "serve", "-m", args.target, "-t", str(args.threads), "-c", "4096",
                 "--parallel", "1"]
        start("specdec", serve + ["-md", args.draft], args.port, {})
        start("specdec-target", serve, args.port + 3, {})
        if args.llama_server:
            common = ["-m", args.target, "-t", str(args.threads), "-c", "4096", "-np", "1",
                      "--host", "127.0.0.1"]
            start("llama", [args.llama_server] + common, args.port + 1, {})
            start("llama-spec", [args.llama_server] + common +
                  ["-md", args.draft, "--spec-type", "draft-simple"], args.port + 2, {})
        results = {}
        for setting in args.settings.split(","):
            per = {name: {c[0]: {"tps": [], "wall": [], "text": [], "n": []} for c in CASES}
                   for name in servers}
            for case in CASES:
                for name, (base, extra) in servers.items():  # warm the prompt cache
                    post(base, "/infill", {**body_of(case, setting, 1), **extra})
                for rep in range(args.repeats):
                    for name, (base, extra) in servers.items():
                        doc, wall = post(base, "/infill",
                                         {**body_of(case, setting, 100 + rep), **extra})
                        r = per[name][case[0]]
                        r["tps"].append(doc["timings"]["predicted_per_second"])
                        r["wall"].append(wall)
                        r["text"].append(doc["content"])
                        r["n"].append(doc["timings"]["predicted_n"])
            summary = {}
            for name in servers:
                tps = [statistics.median(per[name][c[0]]["tps"]) for c in CASES]
                wall = [statistics.median(per[name][c[0]]["wall"]) for c in CASES]
                toks = [statistics.median(per[name][c[0]]["n"]) for c in CASES]
                summary[name] = {"tps": statistics.median(tps), "wall": statistics.median(wall),
                                 "tokens": statistics.median(toks),
                                 "per_case_tps": dict(zip([c[0] for c in CASES], tps)),
                                 "per_case_wall": dict(zip([c[0] for c in CASES], wall))}
            if setting == "greedy":
                same = sum(per["specdec"][c[0]]["text"] == per["specdec-target"][c[0]]["text"]
                           for c in CASES)
                summary["same_text_spec_vs_target"] = f"{same}/{len(CASES)}"
                if "llama" in servers:
                    agree = sum(per["specdec-target"][c[0]]["text"][0] ==
                                per["llama"][c[0]]["text"][0] for c in CASES)
                    summary["same_text_as_llama_server"] = f"{agree}/{len(CASES)}"
                summary["texts"] = {c[0]: per["specdec"][c[0]]["text"][0] for c in CASES}
            results[setting] = summary
            print(f"== {setting} (medians over {len(CASES)} cases of each case's median of "
                  f"{args.repeats})")
            base_tps = summary["specdec-target"]["tps"]
            for name in servers:
                s = summary[name]
                print(f"  {name:15s} decode {s['tps']:6.1f} tok/s ({s['tps'] / base_tps:4.2f}x "
                      f"specdec-target)  wall {1000 * s['wall']:7.0f} ms  "
                      f"tokens {s['tokens']:.0f}")
            for k in ("same_text_spec_vs_target", "same_text_as_llama_server"):
                if k in summary:
                    print(f"  {k}: {summary[k]}")
            if "llama" in servers:
                best = max(summary["llama"]["tps"], summary["llama-spec"]["tps"])
                print(f"  specdec / llama-server's faster configuration: "
                      f"{summary['specdec']['tps'] / best:4.2f}x decode")
            sys.stdout.flush()
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
