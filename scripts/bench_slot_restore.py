#!/usr/bin/env python3
"""What a restored slot saves: a long shared document read once, saved with
POST /slots/0?action=save, and restored (into the same server, and into one started later)
before each question, against reading it cold every time.

`specdec serve` on the pair (one slot, --slot-save-path in a temporary directory). Each repeat
asks --questions questions about the document (greedy, --tokens tokens, /completion), each
twice: cold (the slot erased first, so the whole prompt is read) and restored (erased, then the
saved document restored). Reported: the prompt phase (timings.prompt_ms, the server's own
clock), the restore action's time (timings.restore_ms), the wall time to the whole answer, their
medians, and whether each restored answer is the cold one (it must be: the entries are the same
bits). Last, a second server restores the file and answers the first question.

    scripts/bench_slot_restore.py [--target FILE] [--draft FILE] [--threads 2] [--repeats 3]
        [--questions 3] [--tokens 16] [--doc-chars 6000] [--port 8093]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from bench_common import ROOT, add_pair_server_args, die, post_json, wait_healthy  # noqa: E402

QUESTIONS = ["\n\nQuestion: what does the first command do?\nAnswer:",
             "\n\nQuestion: which models are the default pair?\nAnswer:",
             "\n\nQuestion: how is speculative decoding kept lossless?\nAnswer:",
             "\n\nQuestion: what does --color show?\nAnswer:"]


def start(args, save_dir):
    cmd = [args.cli, "serve", "-m", args.target, "-md", args.draft, "-t", str(args.threads),
           "-c", "4096", "--parallel", "1", "--port", str(args.port), "--slot-save-path",
           save_dir]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{args.port}"
    if not wait_healthy(base, proc, "specdec serve", timeout_s=150):
        proc.terminate()
        die("the server did not come up")
    return proc, base


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)


def ask(base, prompt, tokens):
    t0 = time.monotonic()
    doc = post_json(base, "/completion", {"prompt": prompt, "n_predict": tokens,
                                          "temperature": 0, "id_slot": 0, "cache_prompt": True})
    return doc, (time.monotonic() - t0) * 1e3


def action(base, name, **body):
    return post_json(base, f"/slots/0?action={name}", body)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_pair_server_args(ap, 8093)
    ap.add_argument("--questions", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--doc-chars", type=int, default=6000)
    args = ap.parse_args()
    document = "Read this document.\n\n" + (ROOT / "README.md").read_text()[:args.doc_chars]
    questions = QUESTIONS[:args.questions]
    cold, warm, restore_ms, cold_wall, warm_wall = [], [], [], [], []
    same = True
    with tempfile.TemporaryDirectory() as save_dir:
        proc, base = start(args, save_dir)
        try:
            # The document alone, read once and saved.
            action(base, "erase")
            first, _ = ask(base, document, 1)
            saved = action(base, "save", filename="doc.bin")
            print(f"document: {first['tokens_evaluated']} tokens, saved {saved['n_saved']} "
                  f"(draft rows {saved['n_saved_draft']}), {saved['n_written'] / 2**20:.1f} MiB "
                  f"in {saved['timings']['save_ms']:.0f} ms")
            answers = {}
            for r in range(args.repeats):
                for q in questions:
                    action(base, "erase")
                    doc, wall = ask(base, document + q, args.tokens)
                    cold.append(doc["timings"]["prompt_ms"])
                    cold_wall.append(wall)
                    action(base, "erase")
                    restored = action(base, "restore", filename="doc.bin")
                    restore_ms.append(restored["timings"]["restore_ms"])
                    doc2, wall2 = ask(base, document + q, args.tokens)
                    warm.append(doc2["timings"]["prompt_ms"])
                    warm_wall.append(wall2 + restored["timings"]["restore_ms"])
                    same &= doc2["content"] == doc["content"]
                    answers[q] = doc["content"]
                    print(f"repeat {r} {q.strip()[:40]!r}: cold prompt {cold[-1]:.0f} ms, "
                          f"restored {restore_ms[-1]:.0f} + {warm[-1]:.0f} ms "
                          f"(cached {doc2['tokens_cached']}), same answer: "
                          f"{doc2['content'] == doc['content']}")
        finally:
            stop(proc)
        # A server started later: the file is all it needs.
        proc, base = start(args, save_dir)
        try:
            restored = action(base, "restore", filename="doc.bin")
            doc3, _ = ask(base, document + questions[0], args.tokens)
            later_same = doc3["content"] == answers[questions[0]]
            print(f"a later server: restored in {restored['timings']['restore_ms']:.0f} ms, "
                  f"prompt {doc3['timings']['prompt_ms']:.0f} ms, same answer: {later_same}")
            same &= later_same
        finally:
            stop(proc)
    med = statistics.median
    print(f"\nmedians over {len(cold)} questions: prompt phase cold {med(cold):.0f} ms, restored "
          f"{med(restore_ms):.0f} ms restore + {med(warm):.0f} ms ({med(cold) / (med(warm) + med(restore_ms)):.1f}x); "
          f"whole answer {med(cold_wall):.0f} vs {med(warm_wall):.0f} ms; "
          f"answers identical: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
