#!/usr/bin/env python3
"""Accounts a `specdec bench --json` run pass by pass: every target pass of a speculative run
(plain steps and verify passes alike, from the per-round log) is charged the cost that
`specdec verify-cost --json` measured for a pass of that width, in decode steps; the modelled
speedup is tokens / total cost. Set beside the measured speedup it shows how much of the gap
to the textbook E/(gamma c + 1) comes from plain steps (no draft proposed) and verify width.

usage: scripts/bench_pass_model.py --bench ngram.json --verify-cost vc.json
"""
import argparse
import json
import statistics
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="output of specdec bench --json")
    ap.add_argument("--verify-cost", required=True, help="output of specdec verify-cost --json")
    args = ap.parse_args()
    bench = json.load(open(args.bench))
    vc = json.load(open(args.verify_cost))
    ratio = {p["k"]: p["ratio"] for p in vc["passes"]}
    k_max = max(ratio)

    runs = defaultdict(lambda: defaultdict(list))
    for r in bench["runs"]:
        key = (r["category"], r["temperature"], r["gamma"])
        runs[key]["ms"].append(r["ms_per_token"])
        if r["gamma"] == 0:
            continue
        rounds = r["speculative_stats"]["per_round"]
        if any(x["gamma"] + 1 > k_max for x in rounds):
            raise SystemExit(f"verify-cost covers k <= {k_max}; rerun it with a larger --k-max")
        cost = sum(ratio[x["gamma"] + 1] for x in rounds)
        runs[key]["model"].append(r["generated_tokens"] / cost)
        runs[key]["plain"].append(sum(x["gamma"] == 0 for x in rounds) / len(rounds))

    print("| category | T | gamma cap | measured | pass model | measured / model | plain passes |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (cat, temp, gamma), v in sorted(runs.items()):
        if gamma == 0:
            continue
        measured = statistics.median(runs[(cat, temp, 0)]["ms"]) / statistics.median(v["ms"])
        model = statistics.mean(v["model"])
        print(f"| {cat} | {temp:g} | {gamma} | {measured:.2f}x | {model:.2f}x | "
              f"{measured / model:.2f} | {100 * statistics.mean(v['plain']):.0f} % |")


if __name__ == "__main__":
    main()
