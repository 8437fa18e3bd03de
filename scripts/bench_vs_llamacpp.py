#!/usr/bin/env python3
"""Prefill and decode throughput: specdec's CLI vs llama.cpp (llama-cpp-python), same GGUF.

For each repeat, the two engines run one after the other (the order alternates between repeats,
so neither always gets the warmer cache); the table reports the median over the repeats.

  prefill tok/s: a ~128-token prompt evaluated in one go
  decode tok/s:  128 greedily generated tokens, one at a time, after that prompt

specdec is run as
  build/specdec run -m MODEL -p PROMPT -n N --temp 0 -t THREADS --stats-json FILE
and FILE must hold {"prompt_tokens":..,"prefill_ms":..,"generated_tokens":..,"decode_ms":..}.
llama.cpp runs in-process through llama-cpp-python with the same thread count, n_batch 512.

Usage:
  python3 scripts/bench_vs_llamacpp.py [--model PATH|NAME] [--threads 2] [--repeats 5]
      [--n-predict 128] [--prompt-tokens 128] [--cli build/specdec] [--json-out FILE]
MODEL may be a path or a scripts/fetch-models.sh name (default smollm2-135m).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from bench_common import die, resolve_model  # noqa: E402

FILLER = (
    "The history of clocks is a long story of people trying to measure time more precisely. "
    "Sundials followed the shadow of the sun, water clocks counted drops, and candles burned "
    "down at a steady rate. Mechanical clocks with escapements appeared in European towers in "
    "the thirteenth century, and pendulums made them far more accurate four hundred years later. "
    "Quartz crystals and then atomic transitions pushed the error down to a second in millions "
    "of years. Today satellites, phones and power grids all depend on shared, exact time. "
)


def make_prompt(llm, n_tokens: int) -> tuple[str, int]:
    """Longest prefix of repeated FILLER (whole words) with at most n_tokens tokens."""
    text = FILLER * (n_tokens // 40 + 2)
    words = text.split(" ")
    lo, hi = 1, len(words)
    while lo < hi:  # binary search on the number of words
        mid = (lo + hi + 1) // 2
        if len(llm.tokenize(" ".join(words[:mid]).encode(), add_bos=True)) <= n_tokens:
            lo = mid
        else:
            hi = mid - 1
    prompt = " ".join(words[:lo])
    return prompt, len(llm.tokenize(prompt.encode(), add_bos=True))


def run_llamacpp(llm, prompt: str, n_predict: int) -> dict:
    import numpy as np
    toks = llm.tokenize(prompt.encode(), add_bos=True)
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(toks)
    t1 = time.perf_counter()
    for _ in range(n_predict):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        llm.eval([tok])
    t2 = time.perf_counter()
    return {"prompt_tokens": len(toks), "prefill_ms": (t1 - t0) * 1e3,
            "generated_tokens": n_predict, "decode_ms": (t2 - t1) * 1e3}


STATS_KEYS = ("prompt_tokens", "prefill_ms", "generated_tokens", "decode_ms")


def run_specdec(cli: Path, model: Path, prompt: str, n_predict: int, threads: int) -> dict:
    with tempfile.TemporaryDirectory() as td:
        stats = Path(td) / "stats.json"
        cmd = [str(cli), "run", "-m", str(model), "-p", prompt, "-n", str(n_predict),
               "--temp", "0", "-t", str(threads), "--stats-json", str(stats)]
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            die(f"specdec CLI failed (exit {proc.returncode}): {' '.join(cmd[:2])} ... \n"
                f"{proc.stderr.strip()[-2000:]}\n(the benchmark needs `specdec run` with -m -p -n "
                f"--temp -t and --stats-json FILE)")
        if not stats.is_file():
            die("specdec CLI did not write the --stats-json file; it must write "
                '{"prompt_tokens":..,"prefill_ms":..,"generated_tokens":..,"decode_ms":..}')
        try:
            data = json.loads(stats.read_text())
        except json.JSONDecodeError as e:
            die(f"--stats-json output is not JSON: {e}")
        missing = [k for k in STATS_KEYS if k not in data]
        if missing:
            die(f"--stats-json output lacks {missing} (has: {sorted(data)[:20]})")
        return {k: float(data[k]) for k in STATS_KEYS}


def rates(r: dict) -> tuple[float, float]:
    pre = r["prompt_tokens"] / (r["prefill_ms"] / 1e3) if r["prefill_ms"] > 0 else float("nan")
    dec = r["generated_tokens"] / (r["decode_ms"] / 1e3) if r["decode_ms"] > 0 else float("nan")
    return pre, dec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m", help="GGUF path or fetch-models.sh name")
    ap.add_argument("--threads", "-t", type=int, default=2)
    ap.add_argument("--repeats", "-r", type=int, default=5)
    ap.add_argument("--n-predict", "-n", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--cli", type=Path, default=ROOT / "build" / "specdec")
    ap.add_argument("--json-out", type=Path, help="also write the raw per-repeat results here")
    args = ap.parse_args()

    if not os.access(args.cli, os.X_OK):
        die(f"{args.cli} not found; build it first (scripts/run.sh --help, or cmake --build build)")
    try:
        import llama_cpp
    except ImportError:
        die("llama-cpp-python is not installed (pip install llama-cpp-python)")
    model = resolve_model(args.model)

    llm = llama_cpp.Llama(model_path=str(model), n_ctx=1024, n_batch=512, n_ubatch=512,
                          n_threads=args.threads, n_threads_batch=args.threads,
                          logits_all=False, verbose=False, seed=0)
    prompt, n_prompt = make_prompt(llm, args.prompt_tokens)
    print(f"model {model.name}, {args.threads} threads, prompt {n_prompt} tokens (llama.cpp "
          f"tokenizer), {args.n_predict} generated, median of {args.repeats}", file=sys.stderr)

    # Preflight (also the warm-up): fail fast on our side before spending minutes on llama.cpp.
    run_specdec(args.cli, model, prompt, 4, args.threads)
    run_llamacpp(llm, prompt, 4)

    results = {"llama.cpp": [], "specdec": []}
    for i in range(args.repeats):
        order = ["llama.cpp", "specdec"] if i % 2 == 0 else ["specdec", "llama.cpp"]
        for eng in order:
            if eng == "llama.cpp":
                r = run_llamacpp(llm, prompt, args.n_predict)
            else:
                r = run_specdec(args.cli, model, prompt, args.n_predict, args.threads)
            results[eng].append(r)
            pre, dec = rates(r)
            print(f"  repeat {i + 1}/{args.repeats} {eng:9s}: prefill {pre:8.1f} tok/s "
                  f"({int(r['prompt_tokens'])} tok), decode {dec:7.1f} tok/s "
                  f"({int(r['generated_tokens'])} tok)", file=sys.stderr)

    med = {}
    for eng, rs in results.items():
        pres, decs = zip(*(rates(r) for r in rs))
        med[eng] = (statistics.median(pres), statistics.median(decs))

    L, S = med["llama.cpp"], med["specdec"]
    print(f"\nModel `{model.name}`, {args.threads} threads, prompt {n_prompt} tokens, "
          f"{args.n_predict} decoded tokens (greedy), median of {args.repeats} repeats.\n")
    print("| engine | prefill tok/s | decode tok/s |")
    print("|---|---:|---:|")
    print(f"| llama.cpp (llama-cpp-python {llama_cpp.__version__}) | {L[0]:.1f} | {L[1]:.1f} |")
    print(f"| specdec | {S[0]:.1f} | {S[1]:.1f} |")
    print(f"| ratio specdec / llama.cpp | {S[0] / L[0]:.2f}x | {S[1] / L[1]:.2f}x |")

    if args.json_out:
        args.json_out.write_text(json.dumps({
            "model": str(model), "threads": args.threads, "prompt_tokens": n_prompt,
            "n_predict": args.n_predict, "repeats": results,
            "median_tok_s": {k: {"prefill": v[0], "decode": v[1]} for k, v in med.items()},
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
