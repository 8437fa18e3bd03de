#!/usr/bin/env python3
"""Plots from `specdec bench --json FILE`.

usage: python3 scripts/plot_bench.py --json FILE --out DIR

Writes to DIR:
  speedup_vs_gamma.png       measured speedup per category vs gamma, one line per temperature
                             (dashed: the analytic E/(gamma c + 1) from the same runs)
  acceptance_vs_gamma.png    mean acceptance per category vs gamma (bars: min-max over runs)
  accepted_histogram.png     share of rounds that accepted a drafts, per category, one line per gamma
  acceptance_vs_entropy.png  every drafted position the target tested: accepted (1) or not (0)
                             against the target's entropy there, with the binned acceptance rate.
                             Only T > 0: at T = 0 the filtered distribution is one-hot (entropy 0).
Needs matplotlib (pip install matplotlib); the C++ build and tests do not.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path


def by_category(rows):
    cats = []
    for r in rows:
        if r["category"] not in cats:
            cats.append(r["category"])
    return cats


def subplots(plt, n, title):
    fig, axes = plt.subplots(1, n, figsize=(4.5 * n, 3.8), squeeze=False)
    fig.suptitle(title)
    return fig, axes[0]


def plot_speedup(plt, summary, out: Path):
    cats = by_category(summary)
    fig, axes = subplots(plt, len(cats), "speedup over target-only decoding")
    for ax, cat in zip(axes, cats):
        temps = sorted({r["temperature"] for r in summary if r["category"] == cat})
        for i, t in enumerate(temps):
            rows = sorted((r for r in summary if r["category"] == cat and r["temperature"] == t
                           and r["gamma"] > 0), key=lambda r: r["gamma"])
            g = [r["gamma"] for r in rows]
            color = f"C{i}"
            ax.plot(g, [r["speedup"] for r in rows], "o-", color=color, label=f"T={t:g} measured")
            ax.plot(g, [r["theoretical_speedup"] for r in rows], "--", color=color,
                    label=f"T={t:g} theory")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(sorted({r["gamma"] for r in summary if r["gamma"] > 0}))
        ax.set_title(cat)
        ax.set_xlabel("γ (drafted tokens per round)")
        ax.set_ylabel("speedup (×)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "speedup_vs_gamma.png", dpi=120)
    plt.close(fig)


def plot_acceptance(plt, summary, out: Path):
    cats = by_category(summary)
    fig, axes = subplots(plt, len(cats), "acceptance rate (accepted / drafted)")
    for ax, cat in zip(axes, cats):
        temps = sorted({r["temperature"] for r in summary if r["category"] == cat})
        for i, t in enumerate(temps):
            rows = sorted((r for r in summary if r["category"] == cat and r["temperature"] == t
                           and r["gamma"] > 0), key=lambda r: r["gamma"])
            g = [r["gamma"] for r in rows]
            mean = [100 * r["acceptance_mean"] for r in rows]
            lo = [m - 100 * r["acceptance_min"] for m, r in zip(mean, rows)]
            hi = [100 * r["acceptance_max"] - m for m, r in zip(mean, rows)]
            ax.errorbar(g, mean, yerr=[lo, hi], fmt="o-", capsize=3, color=f"C{i}",
                        label=f"T={t:g}")
        ax.set_title(cat)
        ax.set_xticks(sorted({r["gamma"] for r in summary if r["gamma"] > 0}))
        ax.set_xlabel("γ")
        ax.set_ylabel("acceptance (%)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "acceptance_vs_gamma.png", dpi=120)
    plt.close(fig)


def plot_histogram(plt, runs, out: Path):
    spec = [r for r in runs if r["gamma"] > 0 and r.get("speculative_stats")]
    cats = by_category(spec)
    if not cats:
        return
    fig, axes = subplots(plt, len(cats), "accepted drafts per round (all temperatures)")
    for ax, cat in zip(axes, cats):
        hist = defaultdict(lambda: defaultdict(int))
        for r in spec:
            if r["category"] != cat:
                continue
            for a, n in enumerate(r["speculative_stats"]["accepted_histogram"]):
                hist[r["gamma"]][a] += n
        for i, g in enumerate(sorted(hist)):
            total = sum(hist[g].values()) or 1
            xs = list(range(g + 1))
            ax.plot(xs, [hist[g][a] / total for a in xs], "o-", color=f"C{i % 10}", label=f"γ={g}")
        ax.set_title(cat)
        ax.set_xlabel("drafts accepted in the round")
        ax.set_ylabel("share of rounds")
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out / "accepted_histogram.png", dpi=120)
    plt.close(fig)


def tested_positions(run):
    """(entropy, accepted) for each drafted position the target tested in a run."""
    for rnd in run["speculative_stats"]["per_round"]:
        m, a, ent = rnd["gamma"], rnd["accepted"], rnd["target_entropy"]
        for i, h in enumerate(ent[: min(a + 1, m)]):
            yield h, 1 if i < a else 0


def plot_entropy(plt, runs, out: Path):
    temps = sorted({r["temperature"] for r in runs if r["gamma"] > 0 and r["temperature"] > 0})
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    rng = random.Random(0)
    for i, t in enumerate(temps):
        points = [p for r in runs if r["gamma"] > 0 and r["temperature"] == t
                  and r.get("speculative_stats") for p in tested_positions(r)]
        if not points:
            continue
        xs = [h for h, _ in points]
        ys = [acc + rng.uniform(-0.06, 0.06) for _, acc in points]
        ax.scatter(xs, ys, s=4, alpha=0.15, color=f"C{i}")
        top = max(xs) or 1.0
        n_bins = 12
        sums, counts = [0] * n_bins, [0] * n_bins
        for h, acc in points:
            b = min(n_bins - 1, int(h / top * n_bins))
            sums[b] += acc
            counts[b] += 1
        centers = [(b + 0.5) * top / n_bins for b in range(n_bins) if counts[b]]
        rates = [sums[b] / counts[b] for b in range(n_bins) if counts[b]]
        ax.plot(centers, rates, "o-", color=f"C{i}", label=f"T={t:g} (binned rate)")
    ax.set_xlabel("target entropy at the position (nats)")
    ax.set_ylabel("accepted (jittered 0/1) and acceptance rate")
    ax.set_title("acceptance vs target entropy (T > 0)")
    ax.set_ylim(-0.15, 1.15)
    if temps:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "acceptance_vs_entropy.png", dpi=120)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", required=True, help="output of specdec bench --json")
    ap.add_argument("--out", required=True, help="folder for the PNGs (created)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_bench: needs matplotlib (pip install matplotlib)")
    try:
        data = json.loads(Path(args.json).read_text())
        summary, runs = data["summary"], data["runs"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"plot_bench: cannot read {args.json} as specdec bench --json output: {e}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plot_speedup(plt, summary, out)
    plot_acceptance(plt, summary, out)
    plot_histogram(plt, runs, out)
    plot_entropy(plt, runs, out)
    for p in sorted(out.glob("*.png")):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
