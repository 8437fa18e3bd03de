#!/usr/bin/env python3
"""Prompt-lookup drafting policies compared by deterministic counts, not wall-clock time.

Each run is one `specdec run --draft-ngram ... --stats-json` on a bench prompt (chat template,
--ignore-eos, top-k and min-p off, as `specdec bench` does). From the per-round log we take the
tokens committed, the speculative rounds, the tokens drafted per round, and a modelled cost

    cost = sum over target passes of (1 + c * drafted)   (a target-only step drafts 0)

for the verify-cost slopes c given by --costs (0.36: a pass over g+1 tokens on today's 2-core
kernels; 0.1: the hoped-for batched kernels). Modelled speedup = tokens / cost, against 1 for
target-only decoding. At T = 0 the committed text does not depend on the drafter (greedy
equality), so the numbers are exact; at T > 0 they are averaged over --seeds.

--replay instead reads the token ids of T = 0 runs and prints, per effective match length, how
often a prompt-lookup copy is accepted: the prior table of NgramDrafter (ngram_drafter.cpp).

--bound asks how far any prompt-lookup policy could go. At T = 0 the text is the target's greedy
text whatever the drafter does, so on it we can replay drafters that know the future: "oracle"
uses the same lookup as NgramDrafter (most recent occurrence of the longest suffix, n <= 3) and
drafts exactly the tokens that will be accepted (never a rejected one, never a missed one);
"oracle-any" may pick the best continuation among all occurrences of that suffix (a perfect
choice among the candidates a tree of drafts could verify). Both are printed next to the
adaptive drafter's real run on the same text (gamma <= 8), all charged the same pass costs:
--pass-costs (the pass / decode-step ratios for k = 1..9 of `specdec verify-cost --k-max 9`) or
else 1 + c * drafted with c the first of --costs.

usage:
  python3 scripts/ngram_policy_eval.py --cli build-ngram/specdec \\
      [--model M.gguf] [--categories summary,opinion,code] [--temps 0,0.7] [--seeds 1,2,3] \\
      [-n 128] [--jobs 1] [--json-out FILE] \\
      [--policy NAME='FLAGS' ...]          # default: fixed g=1,2,4 and adaptive (c 0.36, 0.1)
  python3 scripts/ngram_policy_eval.py --cli build-ngram/specdec --replay
  python3 scripts/ngram_policy_eval.py --bound [--pass-costs 1,1.12,1.27,...] [-n 200]
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = Path.home() / ".cache/specdec/models/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_POLICIES = [
    ("fixed-g1", "--ngram-policy fixed --draft-max 1"),
    ("fixed-g2", "--ngram-policy fixed --draft-max 2"),
    ("fixed-g4", "--ngram-policy fixed --draft-max 4"),
    ("adaptive-c0.36", "--ngram-policy adaptive --ngram-verify-cost 0.36 --draft-max 8"),
    ("adaptive-c0.1", "--ngram-policy adaptive --ngram-verify-cost 0.1 --draft-max 8"),
]


def prompts(categories: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for cat in categories:
        for f in sorted((ROOT / "bench" / "prompts" / cat).glob("*.txt")):
            # Trailing blanks stripped as `specdec bench` does, so the token ids match its runs.
            out.append((cat, f.stem, f.read_text().rstrip(" \n\r")))
    return out


def run_one(cli: str, model: str, text: str, flags: list[str], temp: float, seed: int, n: int,
            threads: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        cmd = [cli, "run", "-m", model, "-p", text, "--chat", "-n", str(n), "--temp", str(temp),
               "--top-p", "0.9", "--top-k", "0", "--min-p", "0", "-s", str(seed), "-t",
               str(threads), "-c", "2048", "--ignore-eos", "-q", "--stats-json", stats] + flags
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.exit(f"ngram_policy_eval: {shlex.join(cmd)} failed: {r.stderr.strip()}")
        with open(stats) as f:
            return json.load(f)


def counts(stats: dict, costs: list[float]) -> dict:
    s = stats.get("speculative_stats")
    log = s["per_round"] if s else [{"gamma": 0}] * stats["generated_tokens"]
    drafted = [r["gamma"] for r in log]
    return {
        "tokens": stats["generated_tokens"],
        "passes": len(drafted),
        "rounds": sum(1 for g in drafted if g > 0),
        "drafted": sum(drafted),
        "accepted": s["accepted"] if s else 0,
        "cost": {str(c): sum(1 + c * g for g in drafted) for c in costs},
    }


# --- replay (T = 0): the same lookup as NgramDrafter::lookup, by brute force -------------------
def lookup(t: list[int], n_max: int = 3, n_min: int = 1, max_match: int = 32):
    size = len(t)
    for n in range(min(n_max, size - 1), n_min - 1, -1):
        suffix = t[size - n:]
        for e in range(size - 1, n - 1, -1):  # most recent occurrence first
            if t[e - n:e] == suffix:
                length = n
                while length < max_match and e - length - 1 >= 0 and \
                        t[e - length - 1] == t[size - length - 1]:
                    length += 1
                return e, length
    return -1, 0


def replay_table(runs: list[dict], gamma: int = 16) -> dict[int, list[int]]:
    """Fixed-policy prompt lookup replayed on greedy output: per effective match length (the
    match length plus the drafts before it, all accepted), [tested, accepted]."""
    table: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0])
    for stats in runs:
        t, gen = list(stats["prompt_token_ids"]), stats["token_ids"]
        i = 0
        while i < len(gen):
            g = min(gamma, len(gen) - i - 1)
            e, length = lookup(t) if g > 0 else (-1, 0)
            drafts = t[e:e + min(g, len(t) - e)] if e >= 0 else []
            a = 0
            while a < len(drafts) and drafts[a] == gen[i + a]:
                a += 1
            for k in range(min(a + 1, len(drafts))):
                cell = table[min(length + k, 12)]
                cell[0] += 1
                cell[1] += k < a
            take = min(a + 1, len(gen) - i)
            t.extend(gen[i:i + take])
            i += take
    return table


# --- bound (T = 0): drafters that know the greedy text ----------------------------------------
def agreement(t: list[int], e: int, gen: list[int], i: int, most: int) -> int:
    """How many of the tokens copied from t[e:] equal gen[i:], at most `most`."""
    a = 0
    while a < most and e + a < len(t) and gen[i + a] == t[e + a]:
        a += 1
    return a


def occurrences(t: list[int], n_max: int = 3) -> list[int]:
    """Continuation starts of every earlier occurrence of the longest suffix that occurs."""
    size = len(t)
    for n in range(min(n_max, size - 1), 0, -1):
        suffix = t[size - n:]
        found = [e for e in range(size - 1, n - 1, -1) if t[e - n:e] == suffix]
        if found:
            return found
    return []


def oracle_drafts(prompt: list[int], gen: list[int], gamma: int, any_occurrence: bool) -> list[int]:
    """Drafts per target pass (0: a plain step) of an oracle prompt-lookup drafter."""
    t, i, log = list(prompt), 0, []
    while i < len(gen):
        most = min(gamma, len(gen) - i - 1)  # a round emits its drafts and one more token
        found = occurrences(t) if most > 0 else []
        if not any_occurrence:
            found = found[:1]
        a = max((agreement(t, e, gen, i, most) for e in found), default=0)
        log.append(a)
        t.extend(gen[i:i + a + 1])
        i += a + 1
    return log


def pass_cost(drafted: int, curve: list[float], slope: float) -> float:
    if curve:
        if drafted >= len(curve):
            sys.exit(f"ngram_policy_eval: --pass-costs has no entry for k = {drafted + 1}")
        return curve[drafted]
    return 1 + slope * drafted


def bound(args, ps) -> int:
    curve = [float(c) for c in args.pass_costs.split(",")] if args.pass_costs else []
    slope = float(args.costs.split(",")[0])
    gamma = 8
    flags = ["--draft-ngram", "--draft-max", str(gamma)]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda p: run_one(args.cli, args.model, p[2], flags, 0.0, 1, args.n,
                                               args.threads), ps))
    cost_desc = ("pass costs " + ",".join(f"{c:g}" for c in curve)) if curve else \
        f"pass cost 1 + {slope:g} x drafted"
    print(f"T = 0, gamma <= {gamma}, {cost_desc}; modelled speedup (passes) per prompt")
    print(f"{'category':8} {'prompt':24} {'adaptive':>14} {'oracle':>14} {'oracle-any':>14}")
    totals: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for (cat, pid, _), stats in zip(ps, runs):
        gen, prompt = stats["token_ids"], list(stats["prompt_token_ids"])
        s = stats.get("speculative_stats")
        logs = {
            "adaptive": [r["gamma"] for r in s["per_round"]] if s else [0] * len(gen),
            "oracle": oracle_drafts(prompt, gen, gamma, False),
            "oracle-any": oracle_drafts(prompt, gen, gamma, True),
        }
        cells = []
        for name, log in logs.items():
            cost = sum(pass_cost(g, curve, slope) for g in log)
            for key in (cat, "all"):
                totals[key][name + ":cost"] += cost
                totals[key][name + ":tokens"] += len(gen)
            cells.append(f"{len(gen) / cost:6.2f}x ({len(log):3d})")
        print(f"{cat:8} {pid:24} " + " ".join(f"{c:>14}" for c in cells))
    for key, tot in totals.items():
        print(f"{key:8} {'(pooled)':24} " + " ".join(
            f"{tot[n + ':tokens'] / tot[n + ':cost']:13.2f}x" for n in logs))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=str(ROOT / "build" / "specdec"))
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--categories", default="summary,opinion,code")
    ap.add_argument("--temps", default="0,0.7")
    ap.add_argument("--seeds", default="1,2,3", help="seeds for T > 0 (T = 0 runs once)")
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel (counts do not care)")
    ap.add_argument("--costs", default="0.36,0.1")
    ap.add_argument("--policy", action="append", default=[],
                    help="NAME='specdec run flags' (repeatable; replaces the defaults)")
    ap.add_argument("--replay", action="store_true",
                    help="print the acceptance-by-match-length table from greedy runs")
    ap.add_argument("--bound", action="store_true",
                    help="greedy runs: the adaptive drafter against drafters that know the text")
    ap.add_argument("--pass-costs", default="",
                    help="--bound: pass cost in decode steps for k = 1..9 (specdec verify-cost --k-max 9)")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    cats = args.categories.split(",")
    costs = [float(c) for c in args.costs.split(",")]
    ps = prompts(cats)

    if args.bound:
        return bound(args, ps)
    if args.replay:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda p: run_one(args.cli, args.model, p[2], [], 0.0, 1, args.n,
                                                   args.threads), ps))
        print("match length  tested  accepted  rate")
        for length, (tested, acc) in sorted(replay_table(runs).items()):
            label = f"{length}+" if length == 12 else str(length)
            print(f"{label:>12}  {tested:6d}  {acc:8d}  {acc / tested:.3f}")
        return 0

    policies = [tuple(p.split("=", 1)) for p in args.policy] or DEFAULT_POLICIES
    temps = [float(t) for t in args.temps.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = []
    for name, flags in policies:
        for temp in temps:
            for seed in (seeds if temp > 0 else [1]):
                for cat, pid, text in ps:
                    jobs.append((name, flags, temp, seed, cat, pid, text))

    def work(job):
        name, flags, temp, seed, cat, pid, text = job
        stats = run_one(args.cli, args.model, text, ["--draft-ngram"] + shlex.split(flags), temp,
                        seed, args.n, args.threads)
        return {"policy": name, "flags": flags, "temp": temp, "seed": seed, "category": cat,
                "prompt": pid, **counts(stats, costs)}

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(work, jobs))

    agg: dict[tuple, dict] = {}
    for r in results:
        for cat in (r["category"], "all"):
            a = agg.setdefault((r["temp"], cat, r["policy"]), collections.Counter())
            a.update({k: r[k] for k in ("tokens", "passes", "rounds", "drafted", "accepted")})
            a.update({f"cost{c}": r["cost"][str(c)] for c in costs})
    header = (f"{'T':>4} {'category':8} {'policy':16} {'tokens':>6} {'passes':>6} {'rounds':>6} "
              f"{'draft/rnd':>9} {'accept':>6} " + " ".join(f"{'x@c=' + str(c):>8}" for c in costs))
    print(header)
    summary = []
    for (temp, cat, name), a in sorted(agg.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all",
                                                                     kv[0][1])):
        row = {"temp": temp, "category": cat, "policy": name, **dict(a),
               "drafted_per_round": a["drafted"] / a["rounds"] if a["rounds"] else 0.0,
               "acceptance": a["accepted"] / a["drafted"] if a["drafted"] else 0.0,
               "speedup": {str(c): a["tokens"] / a[f"cost{c}"] for c in costs}}
        summary.append(row)
        print(f"{temp:4g} {cat:8} {name:16} {a['tokens']:6d} {a['passes']:6d} {a['rounds']:6d} "
              f"{row['drafted_per_round']:9.2f} {row['acceptance']:6.1%} " +
              " ".join(f"{row['speedup'][str(c)]:8.3f}" for c in costs))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"policies": dict(policies), "summary": summary, "runs": results}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
