#!/usr/bin/env python3
"""Speculative decoding vs the target-only baseline, side by side in one run.

For every repeat, the baseline and each gamma run one after the other, in an order that
rotates between repeats so machine drift affects all configurations alike. Each run is one
`specdec run ... --stats-json` process; we report medians over repeats of decode tokens/s,
acceptance (accepted / drafted), mean accepted per round, and the measured speedup
(baseline per-token decode latency / speculative per-token decode latency).

usage:
  python3 scripts/bench_speculative.py --model M.gguf (--draft D.gguf | --ngram) \
      --prompt-file bench/prompts/summary.txt [--chat] [--gammas 1,2,3,4,5,6,7,8] \
      [--temps 0,0.7] [--top-p 0.9] [--n-predict 200] [--repeats 3] [--threads 2] \
      [--cli build/specdec] [--json-out FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(args, temp: float, gamma: int | None, seed: int) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        cmd = [args.cli, "run", "-m", args.model, "-f", args.prompt_file, "-n", str(args.n_predict),
               "--temp", str(temp), "--top-p", str(args.top_p), "--top-k", "0", "--min-p", "0",
               "-s", str(seed), "-t", str(args.threads), "-c", "2048", "--ignore-eos", "-q",
               "--stats-json", tmp.name]
        if args.chat:
            cmd.append("--chat")
        if gamma is not None:
            cmd += (["-md", args.draft] if args.draft else ["--draft-ngram"]) + ["--draft-max", str(gamma)]
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"bench_speculative: {' '.join(cmd)} failed: {r.stderr.strip()}")
        return json.load(open(tmp.name))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--draft")
    g.add_argument("--ngram", action="store_true", help="prompt-lookup drafting (--draft-ngram)")
    ap.add_argument("--prompt-file", required=True)
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("--gammas", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--temps", default="0,0.7")
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--n-predict", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cli", default=str(ROOT / "build" / "specdec"))
    ap.add_argument("--json-out")
    args = ap.parse_args()
    gammas = [int(x) for x in args.gammas.split(",")]
    temps = [float(x) for x in args.temps.split(",")]
    configs = [None] + gammas
    raw = []
    for temp in temps:
        for rep in range(args.repeats):
            order = configs[rep % len(configs):] + configs[:rep % len(configs)]
            for gamma in order:
                stats = run_once(args, temp, gamma, seed=1000 + rep)
                raw.append({"temp": temp, "gamma": gamma, "repeat": rep, "stats": stats})
                print(f"T={temp} gamma={gamma} rep={rep}: {stats['decode_tokens_per_s']:.1f} tok/s",
                      file=sys.stderr)
    print(f"| T | mode | γ | decode tok/s (median) | acceptance (median, range) | accepted/round | speedup |")
    print("|---|---|---|---|---|---|---|")
    for temp in temps:
        def runs(gamma):
            return [r["stats"] for r in raw if r["temp"] == temp and r["gamma"] == gamma]
        base = statistics.median(s["decode_ms"] / s["generated_tokens"] for s in runs(None))
        print(f"| {temp} | target only | - | {statistics.median(s['decode_tokens_per_s'] for s in runs(None)):.1f} | - | - | 1.00x |")
        for gamma in gammas:
            rs = runs(gamma)
            lat = statistics.median(s["decode_ms"] / s["generated_tokens"] for s in rs)
            acc = [s["speculative_stats"]["acceptance_rate"] for s in rs]
            apr = statistics.median(s["speculative_stats"]["mean_accepted_per_round"] for s in rs)
            mode = "draft model" if args.draft else "n-gram"
            print(f"| {temp} | {mode} | {gamma} | {statistics.median(s['decode_tokens_per_s'] for s in rs):.1f} | "
                  f"{100 * statistics.median(acc):.1f} % ({100 * min(acc):.1f}–{100 * max(acc):.1f}) | "
                  f"{apr:.2f} | {base / lat:.2f}x |")
    if args.json_out:
        json.dump(raw, open(args.json_out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
