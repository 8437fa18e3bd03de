#!/usr/bin/env python3
"""Speculative decoding on a draft/target pair: specdec vs llama.cpp, side by side in one run.

For every repeat and every prompt, these configurations run back to back in a rotating order
(so that none always gets the warmest cache or the quietest minute), all on the same GGUF files,
the same chat-formatted prompt (ChatML with Qwen's default system message), the same thread count,
greedy or sampled at the same temperature, with end-of-text ignored so that every run generates
exactly --n-predict tokens:

  specdec-target   build/specdec run -m TARGET ...                     (target only)
  specdec-NAME     build/specdec run -m TARGET -md DRAFT FLAGS, for each --specdec NAME=FLAGS
                   (default: one configuration "spec" with specdec's default flags)
  llama-target     llama-speculative with the target as its own draft is not target-only, so
                   llama.cpp's target-only decode is llama-bench's tg at the prompt's depth
                   (-d PROMPT_TOKENS -n N_PREDICT), measured once per repeat
  llama-spec-G     llama-speculative -m TARGET -md DRAFT --spec-draft-n-max G, for each --llama-gammas G

Decode tokens/s come from each engine's own timing of generation (specdec: --stats-json
decode_ms; llama-speculative: its "decoded N tokens in S seconds" line; llama-bench: its t/s).
The table gives medians over prompts and repeats, and each speculative configuration's speedup
over its own engine's target-only run, plus specdec's speculative speed over the faster of
llama.cpp's target-only and best speculative configuration.

Usage:
  python3 scripts/bench_pair_vs_llamacpp.py [--target NAME|PATH] [--draft NAME|PATH]
      [--categories summary,code] [--n-predict 128] [--threads 2] [--repeats 1] [--temp 0]
      [--llama-bin /opt/llama.cpp/build/bin] [--llama-gammas 4,8]
      [--specdec fixed5="--draft-max 5" --specdec adaptive="--draft-policy adaptive"]
      [--json-out FILE]
Models default to the pair scripts/run.sh uses (qwen2.5-coder-1.5b / qwen2.5-coder-0.5b).
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from bench_common import die, resolve_model  # noqa: E402
SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def chatml(user: str) -> str:
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            "<|im_start|>assistant\n")


def run(cmd: list[str], timeout: int = 1800) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        die(f"{shlex.join(cmd[:3])} ... failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r


def specdec_run(cli: Path, target: Path, draft: Path | None, prompt: str, a,
                flags: str = "") -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as stats:
        cmd = [str(cli), "run", "-m", str(target), "-p", prompt, "-n", str(a.n_predict),
               "--temp", str(a.temp), "--top-p", str(a.top_p), "--top-k", "0", "--min-p", "0",
               "-s", "1", "-t", str(a.threads), "--ignore-eos", "-c", "2048", "-q",
               "--stats-json", stats.name]
        if draft is not None:
            cmd += ["-md", str(draft)] + shlex.split(flags)
        run(cmd)
        s = json.load(open(stats.name))
    out = {"tok_s": s["generated_tokens"] / (s["decode_ms"] / 1000.0),
           "prompt_tokens": s["prompt_tokens"]}
    spec = s.get("speculative_stats") or {}
    if spec.get("drafted"):
        out["accept"] = spec["accepted"] / spec["drafted"]
    return out


def llama_spec_run(bin_dir: Path, target: Path, draft: Path, prompt: str, gamma: int, a) -> dict:
    cmd = [str(bin_dir / "llama-speculative"), "-m", str(target), "-md", str(draft), "-p", prompt,
           "-n", str(a.n_predict), "--temp", str(a.temp), "--top-p", str(a.top_p), "--top-k", "0",
           "--min-p", "0", "-s", "1", "-t", str(a.threads), "-td", str(a.threads),
           "--ignore-eos", "-c", "2048", "--spec-draft-n-max", str(gamma)]
    r = run(cmd)
    log = r.stdout + r.stderr
    m = re.search(r"decoded\s+(\d+)\s+tokens in\s+([\d.]+)\s+seconds", log)
    if not m:
        die("could not find llama-speculative's 'decoded N tokens' line")
    out = {"tok_s": int(m.group(1)) / float(m.group(2))}
    acc = re.search(r"accept\s*=\s*([\d.]+)%", log)
    if acc:
        out["accept"] = float(acc.group(1)) / 100
    return out


def llama_bench_tg(bin_dir: Path, target: Path, depth: int, a) -> float:
    cmd = [str(bin_dir / "llama-bench"), "-m", str(target), "-p", "0", "-n", str(a.n_predict),
           "-d", str(depth), "-t", str(a.threads), "-r", "1", "-o", "json"]
    rows = json.loads(run(cmd).stdout)
    return float(rows[0]["avg_ts"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft", default="qwen2.5-coder-0.5b")
    ap.add_argument("--prompts", default=str(ROOT / "bench" / "prompts"))
    ap.add_argument("--categories", default="summary,code")
    ap.add_argument("--max-prompts", type=int, default=0, help="per category (0: all)")
    ap.add_argument("--n-predict", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--cli", default=str(ROOT / "build" / "specdec"))
    ap.add_argument("--llama-bin", default="/opt/llama.cpp/build/bin")
    ap.add_argument("--llama-gammas", default="4,8")
    ap.add_argument("--specdec", action="append", default=[], metavar="NAME=FLAGS",
                    help="a speculative specdec configuration (repeatable), e.g. "
                         "fixed6='--draft-max 6'")
    ap.add_argument("--json-out", default="")
    a = ap.parse_args()

    cli, bin_dir = Path(a.cli), Path(a.llama_bin)
    if not cli.is_file():
        die(f"{cli} not found; build it first (cmake --build build)")
    for tool in ("llama-speculative", "llama-bench"):
        if not (bin_dir / tool).is_file():
            die(f"{bin_dir / tool} not found (scripts/oracle/README.md says how to build it)")
    target, draft = resolve_model(a.target), resolve_model(a.draft)
    gammas = [int(g) for g in a.llama_gammas.split(",") if g]

    prompts = []
    for cat in a.categories.split(","):
        files = sorted((Path(a.prompts) / cat).glob("*.txt"))
        if a.max_prompts:
            files = files[: a.max_prompts]
        if not files:
            die(f"no prompts in {Path(a.prompts) / cat}")
        prompts += [(cat, f.stem, chatml(f.read_text().strip())) for f in files]

    spec_flags = {}
    for item in a.specdec or ["spec="]:
        name, sep, flags = item.partition("=")
        if not sep or not name:
            die(f"--specdec wants NAME=FLAGS, got '{item}'")
        spec_flags[f"specdec-{name}"] = flags
    configs = ["specdec-target"] + list(spec_flags) + [f"llama-spec-{g}" for g in gammas]
    results: dict[str, list[dict]] = {c: [] for c in configs}
    llama_target: list[float] = []
    step = 0
    for rep in range(a.repeats):
        for cat, pid, text in prompts:
            order = configs[step % len(configs):] + configs[: step % len(configs)]
            step += 1
            prompt_tokens = None
            for c in order:
                if c == "specdec-target":
                    r = specdec_run(cli, target, None, text, a)
                    prompt_tokens = r["prompt_tokens"]
                elif c in spec_flags:
                    r = specdec_run(cli, target, draft, text, a, spec_flags[c])
                else:
                    r = llama_spec_run(bin_dir, target, draft, text, int(c.rsplit("-", 1)[1]), a)
                r.update(category=cat, prompt=pid, repeat=rep)
                results[c].append(r)
                print(f"[{rep}] {cat}/{pid} {c}: {r['tok_s']:.2f} tok/s"
                      + (f", accept {r['accept']:.1%}" if "accept" in r else ""), file=sys.stderr)
            # llama.cpp's target-only decode at this prompt's depth (llama-bench tg).
            tg = llama_bench_tg(bin_dir, target, prompt_tokens or 256, a)
            llama_target.append(tg)
            print(f"[{rep}] {cat}/{pid} llama-target (llama-bench tg at depth "
                  f"{prompt_tokens}): {tg:.2f} tok/s", file=sys.stderr)

    def med(xs):
        return statistics.median(xs) if xs else float("nan")

    rows = {"llama-target": med(llama_target)}
    accept = {}
    for c in configs:
        rows[c] = med([r["tok_s"] for r in results[c]])
        acc = [r["accept"] for r in results[c] if "accept" in r]
        if acc:
            accept[c] = med(acc)
    best_llama = max([rows["llama-target"]] + [rows[f"llama-spec-{g}"] for g in gammas])
    best_spec = max(spec_flags, key=lambda c: rows[c])
    print(f"target {target.name}, draft {draft.name}, {a.threads} threads, {a.n_predict} tokens, "
          f"T {a.temp}, {len(prompts)} prompts x {a.repeats} repeats ({a.categories})\n"
          + "; ".join(f"{c}: {f or '(defaults)'}" for c, f in spec_flags.items()))
    print(f"{'configuration':<18} {'tok/s':>7} {'vs own target':>14} {'accept':>7}")
    for c in ["specdec-target"] + list(spec_flags) + ["llama-target"] + [f"llama-spec-{g}" for g in gammas]:
        base = rows["specdec-target"] if c.startswith("specdec") else rows["llama-target"]
        acc = f"{accept[c]:.1%}" if c in accept else ""
        print(f"{c:<18} {rows[c]:>7.2f} {rows[c] / base:>13.2f}x {acc:>7}")
    print(f"{best_spec} / best llama.cpp configuration: {rows[best_spec] / best_llama:.2f}x")
    cats = list(dict.fromkeys(cat for cat, _, _ in prompts))
    if len(cats) > 1:
        print("per category (median tok/s, speedup over the engine's own target-only):")
        for cat in cats:
            lt = med([t for t, (c2, _, _) in zip(llama_target, prompts * a.repeats) if c2 == cat])
            st = med([r["tok_s"] for r in results["specdec-target"] if r["category"] == cat])
            cells = [f"specdec-target {st:.2f}", f"llama-target {lt:.2f}"]
            for c in configs[1:]:
                v = med([r["tok_s"] for r in results[c] if r["category"] == cat])
                base = st if c.startswith("specdec") else lt
                cells.append(f"{c} {v:.2f} ({v / base:.2f}x)")
            print(f"  {cat}: " + ", ".join(cells))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(
            {"args": vars(a), "medians": rows, "accept": accept, "runs": results,
             "llama_target_runs": llama_target}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
