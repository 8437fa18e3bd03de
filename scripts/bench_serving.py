#!/usr/bin/env python3
"""Serving many users at once: specdec serve --parallel N vs llama-server -np N, in one run.

For each client count N (default 1, 2, 4, 8) and each engine configuration, a server starts with
N slots on the same GGUF files and thread count, then N concurrent clients (the openai Python
client, streaming, on loopback) each send --requests-per-client chat requests one after another,
drawn round-robin from bench/prompts (summaries, code, opinions: prompts of mixed length), with
temperature 0 (or --temp, --top-p, --seed) and end-of-text ignored so that every request generates exactly --n-predict tokens.

  specdec         build/specdec serve -m TARGET -md DRAFT --parallel N   (speculative)
  specdec-plain   the same server, requests sent with "speculative": false (target only)
  specdec-noshare specdec with --no-prefix-sharing (a slot recomputes a prompt prefix that
                  another slot's cache holds instead of copying it)
  specdec-base    specdec from another build (--base-specdec BIN, e.g. the commit before a
                  change), with the same flags: before and after in one run
  llama           llama-server -m TARGET -np N                          (target only)
  llama-spec      llama-server -m TARGET -md DRAFT --spec-type draft-simple --spec-draft-n-max G

Reported per configuration and N: aggregate tokens/s (all completion tokens over the wall time
from the first request sent to the last token received), median per-request decode tokens/s
(tokens after the first over the time from the first to the last token), and p50/p95 time to
first token; for specdec, also its /metrics counters after the run (target passes and rows,
drafted and accepted tokens, the warm-up request included; each /metrics page is saved beside
the server logs), which do not drift with the machine as the wall clock does. Each server is
stopped before the next starts; the order of configurations rotates with the client count so
that none always runs first.

Usage:
  python3 scripts/bench_serving.py [--target NAME|PATH] [--draft NAME|PATH] [--clients 1,2,4,8]
      [--n-predict 64] [--requests-per-client 2] [--threads 2] [--ctx 2048]
      [--configs specdec,specdec-plain,specdec-noshare,specdec-base,llama,llama-spec]
      [--base-specdec OTHER_BUILD/specdec]
      [--categories summary,code,opinion]
      [--llama-bin /opt/llama.cpp/build/bin]
      [--llama-draft-max 8] [--temp 0] [--top-p P] [--seed S] [--repeats 1] [--json-out FILE]
      [--system-file FILE] [--lora ADAPTER.gguf [--lora-scales 1,0,0.5,-1]]

--system-file replaces the short default system message with a file's text, e.g.
bench/prompts/system/support-agent.txt (617 tokens with the chat template: the kind of
instructions a deployed assistant carries in every request), where prefix caching decides the
time to first token. The warm-up request carries it too, so the clients find it cached; with
--cold-system the warm-up has another system message and the clients all start on a system
prompt no slot holds (a new deployment's first users, a changed system prompt).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "lib"))
from bench_common import die, resolve_model, wait_healthy  # noqa: E402

SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
CONFIGS = ["specdec", "specdec-plain", "specdec-noshare", "specdec-base", "llama", "llama-spec"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_prompts(categories: list[str]) -> list[str]:
    per_cat = []
    for cat in categories:
        files = sorted((ROOT / "bench" / "prompts" / cat).glob("*.txt"))
        if not files:
            die(f"no prompts in bench/prompts/{cat}")
        per_cat.append([f.read_text().strip() for f in files])
    # Interleave categories so that consecutive requests differ in length and kind.
    out = []
    for i in range(max(len(c) for c in per_cat)):
        out += [c[i] for c in per_cat if i < len(c)]
    return out


class Server:
    def __init__(self, argv: list[str], port: int, log: Path):
        self.port = port
        self.log = open(log, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        if wait_healthy(f"http://127.0.0.1:{port}", self.proc, f"{' '.join(argv)} (log: {log})"):
            return
        self.stop()
        die(f"server not healthy after 300 s: {' '.join(argv)} (log: {log})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def one_request(client, model: str, prompt: str, n_predict: int, extra: dict,
                sampling: dict, system: str) -> dict:
    """One streamed chat request with this system message."""
    t0 = time.monotonic()
    first = last = None
    chunks = 0
    usage = None
    stream = client.chat.completions.create(
        model=model, messages=[{"role": "system", "content": system},
                               {"role": "user", "content": prompt}],
        max_tokens=n_predict, stream=True, **sampling,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True, **extra})
    for ch in stream:
        if ch.usage is not None:
            usage = ch.usage
        if ch.choices and ch.choices[0].delta and ch.choices[0].delta.content:
            now = time.monotonic()
            first = first or now
            last = now
            chunks += 1
    tokens = usage.completion_tokens if usage is not None else chunks
    if first is None:
        raise RuntimeError("no text came back")
    return {"start": t0, "first": first, "last": last, "tokens": tokens}


def run_load(port: int, model: str, clients: int, per_client: int, prompts: list[str],
             n_predict: int, extra: dict, sampling: dict, system: str | None = None,
             lora_scales: list[float] | None = None) -> dict:
    """Every request's system message is SYSTEM (or --system-file's text) unless given. With
    lora_scales, client c's requests run the server's first LoRA adapter at scale
    lora_scales[c % len(lora_scales)] (llama-server's per-request `lora`)."""
    import openai

    results, errors = [], []
    lock = threading.Lock()

    def client_loop(c: int) -> None:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x",
                               timeout=600, max_retries=0)
        mine = dict(extra)
        if lora_scales:
            mine["lora"] = [{"id": 0, "scale": lora_scales[c % len(lora_scales)]}]
        for r in range(per_client):
            prompt = prompts[(c * per_client + r) % len(prompts)]
            try:
                res = one_request(client, model, prompt, n_predict, mine, sampling,
                                  SYSTEM if system is None else system)
                with lock:
                    results.append(res)
            except Exception as e:  # noqa: BLE001 - counted and reported
                with lock:
                    errors.append(repr(e))

    threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(clients)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        die(f"{len(errors)} requests failed: {errors[:3]}")
    wall = max(r["last"] for r in results) - t0
    total = sum(r["tokens"] for r in results)
    per_request = [(r["tokens"] - 1) / (r["last"] - r["first"]) for r in results
                   if r["last"] > r["first"]]
    ttft = sorted(r["first"] - r["start"] for r in results)
    p95 = ttft[min(len(ttft) - 1, int(round(0.95 * (len(ttft) - 1))))]
    return {"requests": len(results), "tokens": total, "wall_s": wall,
            "aggregate_tps": total / wall, "per_request_tps": statistics.median(per_request) if per_request else 0.0,
            "ttft_p50_s": statistics.median(ttft), "ttft_p95_s": p95}


def specdec_counters(port: int, save: Path) -> dict:
    """specdec's /metrics after a run (saved whole to `save`): how many target passes and rows
    it took and what the drafts did, the warm-up request included. Unlike the wall clock these
    do not drift with the machine, so a change to the scheduler or the drafting shows in them
    even where its speed effect is inside the run-to-run spread."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    save.write_text(text)
    values: dict = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        values[name] = float(value)
    keys = {"target_passes": "specdec_target_pass_rows_count",
            "target_rows": "specdec_target_pass_rows_sum",
            "rounds": "specdec_speculative_rounds_total",
            "drafted": "specdec_draft_tokens_total",
            "accepted": "specdec_draft_accepted_total",
            "generated": "specdec_generated_tokens_total",
            "cached_prompt": "specdec_prompt_tokens_cached_total",
            "shared_prompt": "specdec_prompt_tokens_shared_total"}
    return {k: int(values[v]) for k, v in keys.items() if v in values}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draft", default="qwen2.5-coder-0.5b")
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--n-predict", type=int, default=64)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048, help="context per slot")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--categories", default="summary,code,opinion",
                    help="prompt sets from bench/prompts (summaries are the longest)")
    ap.add_argument("--specdec", default=str(ROOT / "build" / "specdec"))
    ap.add_argument("--specdec-flags", default="", help="extra flags for specdec serve")
    ap.add_argument("--base-specdec", help="the specdec binary of configuration specdec-base")
    ap.add_argument("--llama-bin", default="/opt/llama.cpp/build/bin")
    ap.add_argument("--llama-draft-max", type=int, default=8)
    ap.add_argument("--temp", type=float, default=0.0,
                    help="temperature of every request (0: greedy)")
    ap.add_argument("--top-p", type=float, default=None, help="top_p of every request")
    ap.add_argument("--seed", type=int, default=None,
                    help="seed of every request (sampled requests only)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of every (configuration, client count); the tables show medians")
    ap.add_argument("--lora", help="a LoRA adapter both servers load (--lora FILE)")
    ap.add_argument("--lora-scales",
                    help="with --lora: client c runs it at the c-th of these scales (cycled), "
                         "e.g. 1,0,0.5,-1 (requests at different scales at once)")
    ap.add_argument("--json-out")
    ap.add_argument("--system-file", help="the system message of every request, from a file")
    ap.add_argument("--cold-system", action="store_true",
                    help="the warm-up request has another system message, so that the clients "
                         "start on a system prompt no slot holds yet")
    a = ap.parse_args()

    target, draft = resolve_model(a.target), resolve_model(a.draft)
    sampling: dict = {"temperature": a.temp}
    if a.top_p is not None:
        sampling["top_p"] = a.top_p
    if a.seed is not None:
        sampling["seed"] = a.seed
    configs = [c for c in a.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            die(f"unknown configuration {c!r} (known: {', '.join(CONFIGS)})")
    counts = [int(x) for x in a.clients.split(",")]
    lora_scales = [float(x) for x in a.lora_scales.split(",")] if a.lora_scales else None
    if lora_scales and not a.lora:
        die("--lora-scales needs --lora FILE")
    prompts = load_prompts(a.categories.split(","))
    if a.system_file:
        global SYSTEM
        SYSTEM = Path(a.system_file).read_text().strip()
    if "specdec-base" in configs and not (a.base_specdec and Path(a.base_specdec).exists()):
        die("configuration specdec-base needs --base-specdec BIN")
    llama_server = Path(a.llama_bin) / "llama-server"
    if any(c.startswith("llama") for c in configs) and not llama_server.exists():
        die(f"{llama_server} not found (scripts/oracle/README.md builds it)")
    logdir = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    rows = []
    for rep, (ci, n) in ((rep, x) for rep in range(a.repeats) for x in enumerate(counts)):
        shift = (ci + rep) % len(configs)
        order = configs[shift:] + configs[:shift]
        for cfg in order:
            port = free_port()
            extra: dict = {}
            if cfg.startswith("specdec"):
                binary = a.base_specdec if cfg == "specdec-base" else a.specdec
                argv = [binary, "serve", "-m", str(target), "-md", str(draft), "--port",
                        str(port), "-t", str(a.threads), "-c", str(a.ctx), "--parallel", str(n),
                        "--queue-size", str(max(16, 2 * n)), *a.specdec_flags.split(),
                        *(["--lora", a.lora] if a.lora else [])]
                if cfg == "specdec-noshare":
                    argv.append("--no-prefix-sharing")
                model = "specdec"
                if cfg == "specdec-plain":
                    extra = {"speculative": False}
            else:
                argv = [str(llama_server), "-m", str(target), "--port", str(port), "-t",
                        str(a.threads), "-np", str(n), "-c", str(a.ctx * n), "--no-webui",
                        *(["--lora", a.lora] if a.lora else [])]
                if cfg == "llama-spec":
                    argv += ["-md", str(draft), "--spec-type", "draft-simple",
                             "--spec-draft-n-max", str(a.llama_draft_max)]
                model = target.stem
            server = Server(argv, port, logdir / f"{cfg}-{n}.log")
            try:
                # Warm-up: one short request (page cache, allocator, packed weights), with a
                # prompt of its own so that no measured request finds its prefix cached beyond
                # the system message (nor that with --cold-system).
                run_load(port, model, 1, 1, ["Say hello."], 8, extra, sampling,
                         "You are terse." if a.cold_system else None)
                r = run_load(port, model, n, a.requests_per_client, prompts, a.n_predict, extra,
                             sampling, lora_scales=lora_scales)
                if cfg.startswith("specdec"):
                    r.update(specdec_counters(port, logdir / f"{cfg}-{n}-{rep}.metrics"))
            finally:
                server.stop()
            r.update({"config": cfg, "clients": n, "repeat": rep})
            rows.append(r)
            counters = "".join(f", {k} {r[k]}" for k in ("target_passes", "target_rows",
                                                           "drafted", "accepted", "shared_prompt")
                               if k in r)
            print(f"{cfg:15s} clients {n}: aggregate {r['aggregate_tps']:6.1f} tok/s, "
                  f"per request {r['per_request_tps']:5.1f} tok/s, TTFT p50 "
                  f"{r['ttft_p50_s']:.2f} s p95 {r['ttft_p95_s']:.2f} s{counters}", flush=True)

    def median_of(cfg: str, n: int, key: str) -> float:
        return statistics.median(x[key] for x in rows if x["config"] == cfg and x["clients"] == n)

    print(f"\n(medians of {a.repeats} run{'s' if a.repeats > 1 else ''})")
    print("| config | " + " | ".join(f"{n} clients" for n in counts) + " |")
    print("|---|" + "---|" * len(counts))
    for cfg in configs:
        cells = [f"{median_of(cfg, n, 'aggregate_tps'):.1f} tok/s "
                 f"({median_of(cfg, n, 'per_request_tps'):.1f}/req, TTFT "
                 f"{median_of(cfg, n, 'ttft_p50_s'):.2f}/{median_of(cfg, n, 'ttft_p95_s'):.2f} s)"
                 for n in counts]
        print(f"| {cfg} | " + " | ".join(cells) + " |")
    print("\nScaling of aggregate tokens/s over " + f"{counts[0]} client(s):")
    for cfg in configs:
        base = median_of(cfg, counts[0], "aggregate_tps")
        print(f"  {cfg:15s} " + "  ".join(f"{n}: {median_of(cfg, n, 'aggregate_tps') / base:.2f}x"
                                          for n in counts))
    if len(configs) > 1 and a.repeats > 1:
        print("\nPaired ratios (same repeat and client count), median over repeats:")
        for cfg in configs[1:]:
            cells = []
            for n in counts:
                ratios = [x["aggregate_tps"] / y["aggregate_tps"] for x in rows for y in rows
                          if x["config"] == configs[0] and y["config"] == cfg
                          and x["clients"] == y["clients"] == n and x["repeat"] == y["repeat"]]
                cells.append(f"{n}: {statistics.median(ratios):.2f}x")
            print(f"  {configs[0]} / {cfg}: " + "  ".join(cells))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"args": vars(a), "rows": rows}, indent=1))
    print(f"\nserver logs: {logdir}")


if __name__ == "__main__":
    main()
