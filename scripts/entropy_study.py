#!/usr/bin/env python3
"""Acceptance of drafted tokens against the target's entropy, over a prompt set.

Runs `specdec run --chat --stats-json` once per prompt of bench/study/<category>/*.txt (a draft
model proposes gamma tokens a round, T = 0.7, top-p 0.9, top-k and min-p off, a fixed seed per
prompt; generation stops at the end token or after -n tokens), then takes from each per-round
log every drafted position the target tested:

    (H, accepted)   H = entropy in nats of the target's sampling distribution there
                    (softmax(logits / T), cut to the top-p nucleus, renormalized), accepted 0/1

A round that drafted m tokens and accepted a of them tested positions 1..min(a + 1, m): the first
a were accepted, the (a + 1)-th (if a < m) rejected; later drafts were never tested. Also kept
per position: sum_x min(p(x), q(x)), the exact acceptance probability of the rule there, which
needs the draft's distribution q as well (a full-information reference, not a draft-time signal).

Reports per category and pooled:
  - Spearman's rho between H and accepted (average ranks for ties; H = 0 is a large tie group:
    every position whose top token holds >= top-p of the mass), a 95% CI from a bootstrap over
    prompts (prompts resampled within each category; positions of one prompt are not
    independent) and a two-sided permutation p-value (labels shuffled within each prompt, so it
    tests the within-prompt association and is not fooled by prompt-level differences);
  - AUC: the probability that a rejected position has a higher H than an accepted one (ties 1/2);
  - acceptance rate by H bin and by position in the round;
  - per prompt: mean H over its tested positions vs its acceptance rate (accepted / drafted),
    Spearman over prompts with a bootstrap CI;
  - what is known before a round drafts: Spearman of the previous round's mean H (over all its
    verified positions) and of the previous round's acceptance with this round's acceptance.
The per-round log has no draft-side confidence (the draft's entropy or q of its token), so the
draft's own confidence cannot be studied from it.
Plots into --out: acceptance_vs_entropy_bins.png (acceptance rate per H bin and category, with
the counts) and prompt_entropy_vs_acceptance.png (one point per prompt).

Prompts run interleaved across categories (summary 1, code 1, opinion 1, summary 2, ...) and
stop being launched once --max-minutes have passed, so a slow machine gives fewer but balanced
prompts. Each run's stats JSON is kept in --runs-dir and reused by a rerun with the same
settings; --json writes the compact data the analysis needs, and --from-json redoes the
analysis and plots from it without running anything.

usage:
  python3 scripts/entropy_study.py [--cli build/specdec] [-m TARGET.gguf -md DRAFT.gguf] \\
      [--prompts bench/study] [--categories summary,code,opinion] [--limit N] \\
      [--temp 0.7 --top-p 0.9 --gamma 4 -n 96 -t 2 --seed 1] [--max-minutes 11] \\
      [--runs-dir DIR] [--json FILE] [--out docs/img/study]
  python3 scripts/entropy_study.py --from-json FILE [--out docs/img/study]
Needs numpy; the plots need matplotlib (skipped with a note if it is missing).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MODELS = Path(os.environ.get("SPECDEC_MODELS", Path.home() / ".cache/specdec/models"))
DEFAULT_TARGET = MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DEFAULT_DRAFT = MODELS / "qwen2.5-coder-0.5b-instruct.gguf"
# Bin edges for H (nats); H == 0 exactly is a bin of its own.
BIN_EDGES = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, np.inf]


# ---------------------------------------------------------------- running


def list_prompts(root: Path, categories, limit):
    """(category, category index, file index, path), interleaved across categories."""
    per_cat = []
    for ci, c in enumerate(categories):
        files = sorted((root / c).glob("*.txt"))
        if not files:
            sys.exit(f"entropy_study: no *.txt in {root / c}")
        if limit:
            files = files[:limit]
        per_cat.append([(c, ci, i, f) for i, f in enumerate(files)])
    order = []
    for k in range(max(len(p) for p in per_cat)):
        for p in per_cat:
            if k < len(p):
                order.append(p[k])
    return order


def run_one(args, category, cat_index, index, path: Path):
    seed = args.seed + 100 * cat_index + index
    tag = (f"{category}-{path.stem}-T{args.temp:g}-p{args.top_p:g}-g{args.gamma}-n{args.n_predict}"
           f"-s{seed}")
    stats = Path(args.runs_dir) / f"{tag}.json"
    text_file = stats.with_suffix(".txt")
    cmd = [args.cli, "run", "-m", args.model, "-md", args.model_draft, "--chat", "-f", str(path),
           "-n", str(args.n_predict), "--temp", str(args.temp), "--top-k", "0",
           "--top-p", str(args.top_p), "--min-p", "0", "--draft-max", str(args.gamma),
           "-t", str(args.threads), "-s", str(seed), "-c", str(args.ctx), "-q",
           "--stats-json", str(stats)]
    reused = stats.exists() and text_file.exists()
    wall = None
    if not reused:
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            sys.exit(f"entropy_study: {' '.join(cmd)} failed:\n{p.stderr}")
        text_file.write_text(p.stdout)
        stats.with_suffix(".wall").write_text(f"{wall:.3f}\n")
    elif stats.with_suffix(".wall").exists():
        wall = float(stats.with_suffix(".wall").read_text())
    j = json.loads(stats.read_text())
    s = j["speculative_stats"]
    return {
        "category": category, "id": path.stem, "seed": seed,
        "prompt_tokens": j["prompt_tokens"], "generated_tokens": j["generated_tokens"],
        "finish_reason": j["finish_reason"], "prefill_ms": j["prefill_ms"],
        "decode_ms": j["decode_ms"], "decode_tokens_per_s": j["decode_tokens_per_s"],
        "wall_s": wall, "reused": reused,
        "rounds": s["rounds"], "drafted": s["drafted"], "accepted": s["accepted"],
        "acceptance_rate": s["acceptance_rate"],
        "analytic_acceptance_rate": s["analytic_acceptance_rate"],
        "per_round": [{"gamma": r["gamma"], "accepted": r["accepted"],
                       "target_entropy": [round(x, 5) for x in r["target_entropy"]],
                       "overlap": [round(x, 5) for x in r["overlap"]]}
                      for r in s["per_round"]],
        "text": text_file.read_text(),
    }


def run_all(args):
    Path(args.runs_dir).mkdir(parents=True, exist_ok=True)
    order = list_prompts(Path(args.prompts), args.categories.split(","), args.limit)
    runs, t0 = [], time.monotonic()
    for k, (c, ci, i, f) in enumerate(order):
        elapsed = time.monotonic() - t0
        if elapsed > 60 * args.max_minutes:
            print(f"[{elapsed:6.0f}s] --max-minutes {args.max_minutes:g} reached: "
                  f"{len(order) - k} prompts not run", file=sys.stderr)
            break
        r = run_one(args, c, ci, i, f)
        runs.append(r)
        how = "reused" if r["reused"] else f"{r['wall_s']:.1f}s"
        print(f"[{time.monotonic() - t0:6.0f}s] {k + 1}/{len(order)} {c}/{f.stem}: "
              f"{r['prompt_tokens']}+{r['generated_tokens']} tok ({r['finish_reason']}), "
              f"acc {r['accepted']}/{r['drafted']}, {r['decode_tokens_per_s']:.1f} tok/s, {how}",
              file=sys.stderr)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    meta = {"target": str(args.model), "draft": str(args.model_draft), "temperature": args.temp,
            "top_p": args.top_p, "top_k": 0, "min_p": 0, "gamma": args.gamma,
            "n_predict": args.n_predict, "threads": args.threads, "seed": args.seed,
            "prompts": args.prompts, "commit": commit,
            "cli_mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                       time.gmtime(Path(args.cli).stat().st_mtime)),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_s": time.monotonic() - t0, "prompts_run": len(runs),
            # seconds of the specdec runs themselves, reused ones included where known
            "runs_wall_s": sum(r["wall_s"] or 0 for r in runs),
            "prompts_listed": len(order)}
    return {"meta": meta, "runs": runs}


# ---------------------------------------------------------------- statistics


def rankdata(x):
    """Ranks 1..n with ties given their average rank (scipy.stats.rankdata's 'average')."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.r_[0, np.flatnonzero(xs[1:] != xs[:-1]) + 1]
    ends = np.r_[starts[1:], len(xs)]
    avg = (starts + ends + 1) / 2.0  # ranks starts+1..ends, averaged
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def pearson(a, b):
    a = a - a.mean()
    b = b - b.mean()
    d = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / d) if d > 0 else float("nan")


def spearman(x, y):
    return pearson(rankdata(x), rankdata(y))


def auc_higher_when_rejected(h, acc):
    """P(H of a rejected position > H of an accepted one), ties counted 1/2."""
    h, acc = np.asarray(h, float), np.asarray(acc, int)
    n_rej, n_acc = int((acc == 0).sum()), int((acc == 1).sum())
    if n_rej == 0 or n_acc == 0:
        return float("nan")
    r = rankdata(h)
    u = r[acc == 0].sum() - n_rej * (n_rej + 1) / 2.0
    return float(u / (n_rej * n_acc))


def positions(run):
    """(H, accepted, overlap, position in round 1..m) for each drafted position tested."""
    for rnd in run["per_round"]:
        m, a = rnd["gamma"], rnd["accepted"]
        if m == 0:
            continue
        for j in range(min(a + 1, m)):
            yield rnd["target_entropy"][j], 1 if j < a else 0, rnd["overlap"][j], j + 1


def group_arrays(runs):
    """Per run: arrays h, acc, ov, pos."""
    out = []
    for r in runs:
        p = list(positions(r))
        a = np.array(p, dtype=float).reshape(-1, 4)
        out.append((a[:, 0], a[:, 1], a[:, 2], a[:, 3]))
    return out


def round_pairs(run):
    """Consecutive speculative rounds (r-1, r) of a run: (mean H over all of r-1's verified
    positions, r-1's accepted / drafted, r's accepted / drafted). Both predictors are known
    before round r drafts."""
    prev = None
    for rnd in run["per_round"]:
        if rnd["gamma"] == 0:
            prev = None
            continue
        if prev is not None:
            yield (float(np.mean(prev["target_entropy"])), prev["accepted"] / prev["gamma"],
                   rnd["accepted"] / rnd["gamma"])
        prev = rnd


def bootstrap_ci(runs, arrays, stat, n_boot, rng):
    """95% percentile CI of stat(h, acc) over prompts resampled within each category."""
    cats = sorted({r["category"] for r in runs})
    idx_by_cat = [[i for i, r in enumerate(runs) if r["category"] == c] for c in cats]
    vals = []
    for _ in range(n_boot):
        pick = np.concatenate([rng.choice(ix, size=len(ix), replace=True) for ix in idx_by_cat])
        h = np.concatenate([arrays[i][0] for i in pick])
        acc = np.concatenate([arrays[i][1] for i in pick])
        v = stat(h, acc)
        if not np.isnan(v):
            vals.append(v)
    if not vals:
        return float("nan"), float("nan")
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def permutation_p(arrays, n_perm, rng):
    """Two-sided p of Spearman(H, acc) with acc shuffled within each prompt."""
    h = np.concatenate([a[0] for a in arrays])
    rh = rankdata(h)
    rh = rh - rh.mean()
    accs = [a[1].copy() for a in arrays]
    acc = np.concatenate(accs)
    # acc is binary: its ranks are an affine map of acc, so Pearson(rank h, acc) is Spearman.
    def rho(y):
        yc = y - y.mean()
        d = np.sqrt((rh * rh).sum() * (yc * yc).sum())
        return (rh * yc).sum() / d if d > 0 else 0.0
    observed = rho(acc)
    if np.isnan(observed) or (acc == acc[0]).all():
        return float("nan")
    hits = 0
    for _ in range(n_perm):
        y = np.concatenate([rng.permutation(a) for a in accs])
        if abs(rho(y)) >= abs(observed) - 1e-12:
            hits += 1
    return (hits + 1) / (n_perm + 1)


def analyze(data, n_boot, n_perm, seed):
    runs = data["runs"]
    cats = []
    for r in runs:
        if r["category"] not in cats:
            cats.append(r["category"])
    rng = np.random.default_rng(seed)
    groups = [(c, [r for r in runs if r["category"] == c]) for c in cats] + [("pooled", runs)]
    res = {"positions": [], "prompts": [], "bins": [], "by_pos": [], "next_round": []}
    for name, rs in groups:
        arr = group_arrays(rs)
        h = np.concatenate([a[0] for a in arr])
        acc = np.concatenate([a[1] for a in arr])
        ov = np.concatenate([a[2] for a in arr])
        pos = np.concatenate([a[3] for a in arr])
        rho = spearman(h, acc)
        lo, hi = bootstrap_ci(rs, arr, spearman, n_boot, rng)
        p = permutation_p(arr, n_perm, rng)
        zero = h == 0
        res["positions"].append({
            "group": name, "prompts": len(rs), "n": int(len(h)), "acc_rate": float(acc.mean()),
            "mean_h": float(h.mean()), "rho": rho, "ci": (lo, hi), "p_perm": p,
            "auc": auc_higher_when_rejected(h, acc),
            "rho_overlap": spearman(ov, acc), "auc_overlap": 1 - auc_higher_when_rejected(ov, acc),
            "share_h0": float(zero.mean()),
            "acc_h0": float(acc[zero].mean()) if zero.any() else float("nan"),
            "acc_hpos": float(acc[~zero].mean()) if (~zero).any() else float("nan")})
        # bins
        rows = []
        for b in range(len(BIN_EDGES)):
            if b == 0:
                m = h == 0
                label = "0"
            else:
                lo_e, hi_e = BIN_EDGES[b - 1], BIN_EDGES[b]
                m = (h > lo_e) & (h <= hi_e)
                label = f"({lo_e:g},{hi_e:g}]" if np.isfinite(hi_e) else f">{lo_e:g}"
            n = int(m.sum())
            rows.append({"bin": label, "n": n,
                         "acc": float(acc[m].mean()) if n else float("nan"),
                         "overlap": float(ov[m].mean()) if n else float("nan")})
        res["bins"].append({"group": name, "rows": rows})
        res["by_pos"].append({"group": name, "rows": [
            {"pos": k, "n": int((pos == k).sum()),
             "acc": float(acc[pos == k].mean()) if (pos == k).any() else float("nan"),
             "mean_h": float(h[pos == k].mean()) if (pos == k).any() else float("nan")}
            for k in range(1, int(pos.max()) + 1)]})
        # the previous round as a draft-time predictor of this round's acceptance
        pairs = [np.array(list(round_pairs(r)), dtype=float).reshape(-1, 3) for r in rs]
        pooled_pairs = np.concatenate(pairs)
        nr = {"group": name, "n": int(len(pooled_pairs))}
        for key, col in (("prev_h", 0), ("prev_acc", 1)):
            vals = []
            for _ in range(n_boot):
                pick = rng.integers(0, len(pairs), len(pairs))
                sub = np.concatenate([pairs[i] for i in pick])
                v = spearman(sub[:, col], sub[:, 2])
                if not np.isnan(v):
                    vals.append(v)
            nr[key] = spearman(pooled_pairs[:, col], pooled_pairs[:, 2])
            nr[key + "_ci"] = ((float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5)))
                               if vals else (float("nan"), float("nan")))
        res["next_round"].append(nr)
        # per prompt
        mh = np.array([a[0].mean() for a in arr])
        ar = np.array([r["acceptance_rate"] for r in rs])
        boots = []
        for _ in range(n_boot):
            if name == "pooled":
                pick = np.concatenate([rng.choice([i for i, r in enumerate(rs)
                                                   if r["category"] == c],
                                                  size=sum(r["category"] == c for r in rs))
                                       for c in cats])
            else:
                pick = rng.integers(0, len(rs), len(rs))
            v = spearman(mh[pick], ar[pick])
            if not np.isnan(v):
                boots.append(v)
        rho_p = spearman(mh, ar)
        perm_hits = sum(abs(spearman(mh, rng.permutation(ar))) >= abs(rho_p) - 1e-12
                        for _ in range(n_perm)) if not np.isnan(rho_p) else None
        res["prompts"].append({
            "group": name, "n": len(rs), "rho": spearman(mh, ar),
            "ci": ((float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5)))
                   if boots else (float("nan"), float("nan"))),
            "p_perm": (perm_hits + 1) / (n_perm + 1) if perm_hits is not None else float("nan"),
            "mean_h_range": (float(mh.min()), float(mh.max())),
            "acc_range": (float(ar.min()), float(ar.max()))})
    res["per_prompt"] = [{"category": r["category"], "id": r["id"],
                          "mean_h": float(a[0].mean()), "acc": r["acceptance_rate"],
                          "n": int(len(a[0]))} for r, a in zip(runs, group_arrays(runs))]
    res["cats"] = cats
    return res


# ---------------------------------------------------------------- reporting


def print_report(data, res):
    m = data["meta"]
    runs = data["runs"]
    gen = sum(r["generated_tokens"] for r in runs)
    print(f"target {Path(m['target']).name}, draft {Path(m['draft']).name}")
    print(f"T {m['temperature']:g}, top-p {m['top_p']:g} (top-k, min-p off), gamma {m['gamma']}, "
          f"-n {m['n_predict']}, {m['threads']} threads, seed {m['seed']}+, commit {m['commit']}; "
          f"{m['prompts_run']}/{m['prompts_listed']} prompts, {gen} tokens generated, "
          f"{m.get('runs_wall_s', m['wall_s']) / 60:.1f} min of specdec runs")
    print("\nPer drafted position the target tested (H: target entropy there, nats):")
    print(f"{'group':<8} {'prompts':>7} {'positions':>9} {'accept':>7} {'mean H':>6} "
          f"{'H=0':>5} {'acc|H=0':>7} {'acc|H>0':>7} {'rho(H,acc)':>10} {'95% CI':>16} "
          f"{'p perm':>7} {'AUC':>5} {'rho(ov,acc)':>11}")
    for g in res["positions"]:
        lo, hi = g["ci"]
        print(f"{g['group']:<8} {g['prompts']:>7} {g['n']:>9} {100 * g['acc_rate']:>6.1f}% "
              f"{g['mean_h']:>6.3f} {100 * g['share_h0']:>4.0f}% {100 * g['acc_h0']:>6.1f}% "
              f"{100 * g['acc_hpos']:>6.1f}% {g['rho']:>+10.3f} [{lo:+.3f}, {hi:+.3f}] "
              f"{g['p_perm']:>7.4f} {g['auc']:>5.3f} {g['rho_overlap']:>+11.3f}")
    print("\nAcceptance rate by H bin (n positions):")
    labels = [r["bin"] for r in res["bins"][0]["rows"]]
    print(f"{'group':<8} " + " ".join(f"{lab:>15}" for lab in labels))
    for b in res["bins"]:
        cells = [(f"{100 * r['acc']:.0f}% ({r['n']})" if r["n"] else "-") for r in b["rows"]]
        print(f"{b['group']:<8} " + " ".join(f"{c:>15}" for c in cells))
    print("\nAcceptance rate by position in the round (tested positions; mean H):")
    for b in res["by_pos"]:
        cells = [f"{r['pos']}: {100 * r['acc']:.0f}% n={r['n']} H={r['mean_h']:.2f}"
                 for r in b["rows"]]
        print(f"{b['group']:<8} " + " | ".join(cells))
    print("\nDraft-time predictors of a round's acceptance (accepted / drafted), from the round"
          " before it:")
    print(f"{'group':<8} {'pairs':>6} {'rho(prev mean H)':>17} {'95% CI':>16} "
          f"{'rho(prev acceptance)':>21} {'95% CI':>16}")
    for g in res["next_round"]:
        print(f"{g['group']:<8} {g['n']:>6} {g['prev_h']:>+17.3f} [{g['prev_h_ci'][0]:+.3f}, "
              f"{g['prev_h_ci'][1]:+.3f}] {g['prev_acc']:>+21.3f} [{g['prev_acc_ci'][0]:+.3f}, "
              f"{g['prev_acc_ci'][1]:+.3f}]")
    print("\nPer prompt: mean H over tested positions vs acceptance rate (accepted / drafted):")
    print(f"{'group':<8} {'prompts':>7} {'rho':>7} {'95% CI':>16} {'p perm':>7} "
          f"{'mean H range':>14} {'accept range':>14}")
    for g in res["prompts"]:
        lo, hi = g["ci"]
        a, b = g["mean_h_range"]
        c, d = g["acc_range"]
        print(f"{g['group']:<8} {g['n']:>7} {g['rho']:>+7.3f} [{lo:+.3f}, {hi:+.3f}] "
              f"{g['p_perm']:>7.4f} {a:>6.2f}..{b:<6.2f} {100 * c:>5.0f}%..{100 * d:.0f}%")


def plot(res, out: Path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("entropy_study: matplotlib missing, no plots (pip install matplotlib)",
              file=sys.stderr)
        return
    out.mkdir(parents=True, exist_ok=True)
    labels = [r["bin"] for r in res["bins"][0]["rows"]]
    x = np.arange(len(labels))
    fig, (ax, axn) = plt.subplots(2, 1, figsize=(7.2, 5.6), sharex=True,
                                  gridspec_kw={"height_ratios": [2.2, 1]})
    groups = res["bins"]
    width = 0.8 / len(groups)
    for k, b in enumerate(groups):
        style = dict(color="black", lw=2, marker="s") if b["group"] == "pooled" else \
            dict(color=f"C{k}", marker="o")
        acc = np.array([r["acc"] for r in b["rows"]])
        n = np.array([r["n"] for r in b["rows"]])
        ok = n >= 5
        ax.plot(x[ok], 100 * acc[ok], label=b["group"], **style)
        if b["group"] != "pooled":
            axn.bar(x + (k - (len(groups) - 2) / 2) * width, n, width, color=f"C{k}",
                    label=b["group"])
    pooled = groups[-1]["rows"]
    for xi, r in zip(x, pooled):
        if r["n"] >= 5:
            ax.annotate(f"n={r['n']}", (xi, 100 * r["acc"]), textcoords="offset points",
                        xytext=(0, -13), ha="center", fontsize=7)
    ax.set_ylabel("acceptance rate (%)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("drafted positions tested: acceptance vs target entropy (bins with n >= 5)",
                 fontsize=10)
    axn.set_ylabel("positions")
    axn.set_yscale("log")
    axn.set_xticks(x)
    axn.set_xticklabels(labels)
    axn.set_xlabel("target entropy H at the position (nats; T 0.7, top-p 0.9 nucleus)")
    fig.tight_layout()
    fig.savefig(out / "acceptance_vs_entropy_bins.png", dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    for k, c in enumerate(res["cats"]):
        pts = [p for p in res["per_prompt"] if p["category"] == c]
        g = next(g for g in res["prompts"] if g["group"] == c)
        ax.scatter([p["mean_h"] for p in pts], [100 * p["acc"] for p in pts], s=18,
                   color=f"C{k}", label=f"{c} (rho {g['rho']:+.2f})")
    g = res["prompts"][-1]
    ax.set_title(f"per prompt: mean target entropy vs acceptance (pooled rho {g['rho']:+.2f},"
                 f" {g['n']} prompts)", fontsize=10)
    ax.set_xlabel("mean target entropy over the prompt's tested positions (nats)")
    ax.set_ylabel("acceptance rate, accepted / drafted (%)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "prompt_entropy_vs_acceptance.png", dpi=90)
    plt.close(fig)
    for p in sorted(out.glob("*.png")):
        print(f"{p} ({p.stat().st_size // 1024} KB)", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default="build/specdec", help="specdec binary")
    ap.add_argument("-m", "--model", default=str(DEFAULT_TARGET), help="target GGUF")
    ap.add_argument("-md", "--model-draft", default=str(DEFAULT_DRAFT), help="draft GGUF")
    ap.add_argument("--prompts", default="bench/study", help="folder of <category>/*.txt")
    ap.add_argument("--categories", default="summary,code,opinion")
    ap.add_argument("--limit", type=int, default=0, help="first N prompts per category (0: all)")
    ap.add_argument("--temp", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--gamma", type=int, default=4, help="tokens drafted per round")
    ap.add_argument("-n", "--n-predict", type=int, default=96)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-c", "--ctx", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1,
                    help="base seed; a prompt's is seed + 100 * category index + file index")
    ap.add_argument("--max-minutes", type=float, default=11.0,
                    help="launch no new prompt after this long")
    ap.add_argument("--runs-dir", default="build-study/entropy-runs",
                    help="per-run stats JSON and text (reused when present)")
    ap.add_argument("--json", help="write the compact data (per-round logs) here")
    ap.add_argument("--from-json", help="analyze a file written by --json; runs nothing")
    ap.add_argument("--out", default="docs/img/study", help="folder for the PNGs")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples")
    ap.add_argument("--permutations", type=int, default=2000, help="permutations")
    args = ap.parse_args()

    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
    else:
        if not Path(args.cli).exists():
            sys.exit(f"entropy_study: no specdec binary at {args.cli} (see --cli)")
        data = run_all(args)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(data, indent=None) + "\n")
            print(f"wrote {args.json}", file=sys.stderr)
    if not data["runs"]:
        sys.exit("entropy_study: no runs")
    res = analyze(data, args.bootstrap, args.permutations, seed=0)
    print_report(data, res)
    if not args.no_plots:
        plot(res, Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
