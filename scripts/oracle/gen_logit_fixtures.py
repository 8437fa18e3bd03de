#!/usr/bin/env python3
"""llama.cpp reference data for a real model -> tests/fixtures/oracle_<name>.json.

Models (--preset): smollm2 (SmolLM2-135M-Instruct Q4_1, the default), gemma3 (Gemma 3 270M
Q4_K_M), qwen2.5-coder-1.5b (Qwen2.5-Coder-1.5B-Instruct Q4_K_M) and qwen2.5-coder-0.5b
(Qwen2.5-Coder-0.5B-Instruct, Q5_0/Q8_0/Q4_K/Q6_K). For 3 prompts (tokenized by llama.cpp, ids
stored): top-20 (id, logit), the L2 norm of the full logit vector and the argmax at 4 positions
(0, 5, last-1, last). Plus 64-token greedy generations (ids and text) from a chat-formatted prompt
and a plain prompt, with the prompt ids that were fed, and at every generated step llama.cpp's gap
between its best and second-best logit (`gaps`; a small gap is a near-tie that another exact
implementation may tip the other way). gemma3 adds a fourth, ~700-token prompt, longer than its
512-token sliding window, so that the local layers' window is checked on real weights; the Qwen
presets add a ChatML chat prompt about code, and generate from a ChatML code request and a plain
code prompt instead (they are coding models).

Usage: python3 scripts/oracle/gen_logit_fixtures.py [--preset NAME] [--model PATH] [--out PATH]
The model defaults to `scripts/fetch-models.sh <smollm2-135m|gemma3-270m|qwen2.5-coder-...>`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

LOGIT_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n",
    "Once upon a time, in a small village at the edge of a dark forest, there lived an old "
    "clockmaker who",
]
CHAT_USER = "What is the boiling point of water at sea level?"
PLAIN_PROMPT = "The three primary colors are"
N_GEN = 64
TOP_K = 20

# Numbered sentences, so that the text does not repeat itself exactly (about 14 tokens each).
LONG_PROMPT = " ".join(f"Sentence {i}: the {w} walked to the {p} and counted {i * 7} stones." for i, (w, p)
                       in enumerate(zip(["farmer", "child", "doctor", "sailor", "painter"] * 10,
                                        ["river", "market", "hill", "harbor", "forest", "bridge"] * 9)))

# Qwen2.5's chat template adds this system message when the conversation has none.
QWEN_CHAT = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
             "assistant.<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
QWEN_CHAT_LOGITS = QWEN_CHAT.format(
    user="Write a C function that reverses a string in place.") + "Here is a C function"
QWEN_GEN = [
    ("chat", QWEN_CHAT.format(user="Write a Python function that checks whether a number is prime.")),
    ("plain", "// Binary search over a sorted array; returns the index of key or -1.\n"
              "int binary_search(const int *a, int n, int key) {\n"),
]


def qwen_preset(fetch: str, file: str, sha256: str) -> dict:
    return {
        "fetch": fetch,
        "file": file,
        "sha256": sha256,
        "out": ROOT / "tests" / "fixtures" / f"oracle_{fetch}.json",
        "n_ctx": 512,
        "chat": QWEN_CHAT,
        "extra_prompts": [QWEN_CHAT_LOGITS],
        "generate": QWEN_GEN,
    }


PRESETS = {
    "smollm2": {
        "fetch": "smollm2-135m",
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "out": ROOT / "tests" / "fixtures" / "oracle_smollm2.json",
        "n_ctx": 512,
        # SmolLM2's chat template (ChatML) without a system message, with the generation prompt.
        "chat": "<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n",
        "extra_prompts": [],
    },
    "gemma3": {
        "fetch": "gemma3-270m",
        "file": "gemma-3-270m-q4_k_m.gguf",
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        "out": ROOT / "tests" / "fixtures" / "oracle_gemma3.json",
        "n_ctx": 1024,
        # Gemma's template: user turn, then the model turn opened (the tokenizer adds <bos>).
        "chat": "<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n",
        "extra_prompts": [LONG_PROMPT],
    },
    "qwen2.5-coder-1.5b": qwen_preset(
        "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    "qwen2.5-coder-0.5b": qwen_preset(
        "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct.gguf",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="smollm2")
    ap.add_argument("--model", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    preset = PRESETS[args.preset]
    if args.out is None:
        args.out = preset["out"]
    if args.model is None:
        out = subprocess.run(["bash", str(ROOT / "scripts" / "fetch-models.sh"), preset["fetch"]],
                             check=True, stdout=subprocess.PIPE, text=True).stdout
        args.model = Path(out.strip().splitlines()[-1])
    if sha256_file(args.model) != preset["sha256"]:
        print(f"error: {args.model} is not the pinned {preset['file']}", file=sys.stderr)
        return 1
    n_ctx = preset["n_ctx"]

    import llama_cpp
    import llama_cpp.llama as llama_mod
    # One token per llama_decode (n_batch 1) and no CPU weight repacking: every logit then comes
    # from ggml's single-row vec_dot kernels, the computation specdec performs for each output
    # element whatever its batch size. llama.cpp's batched/repacked kernels round differently in
    # the last bits, and over 30 layers of Q8-rounded activations that grows to ~0.7 in the
    # logits (scripts/oracle/llama_cpp_self_variation.py), so they are no reproducible reference.
    low = llama_mod.llama_cpp
    default_params = low.llama_model_default_params

    def no_repack():  # llama-cpp-python 0.3.36 has no Llama() argument for use_extra_bufts
        p = default_params()
        p.use_extra_bufts = False
        return p

    low.llama_model_default_params = no_repack
    try:
        llm = llama_cpp.Llama(model_path=str(args.model), n_ctx=n_ctx, n_batch=1, n_ubatch=1,
                              n_threads=2, n_threads_batch=2, logits_all=True, verbose=False,
                              # f32 KV cache and no flash attention: llama.cpp's most exact
                              # configuration (its default f16 KV cache alone moves logits by
                              # up to ~1.4 on SmolLM2), and the one specdec implements.
                              type_k=0, type_v=0, flash_attn=False, seed=0)
    finally:
        low.llama_model_default_params = default_params

    logit_cases = []
    for text in LOGIT_PROMPTS + preset["extra_prompts"]:
        toks = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        llm.eval(toks)
        scores = np.array(llm.scores[:len(toks)], dtype=np.float32)
        n = len(toks)
        positions = sorted({0, min(5, n - 1), n - 2, n - 1})
        pos_data = []
        for p in positions:
            row = scores[p]
            top = np.argsort(-row, kind="stable")[:TOP_K]
            pos_data.append({
                "pos": p,
                "argmax": int(row.argmax()),
                "l2": float(np.linalg.norm(row.astype(np.float64))),
                "top": [[int(i), round(float(row[i]), 5)] for i in top],
            })
        logit_cases.append({"text": text, "tokens": [int(t) for t in toks], "positions": pos_data})

    gen_cases = []
    gen_prompts = preset.get("generate", [("chat", preset["chat"].format(user=CHAT_USER)),
                                          ("plain", PLAIN_PROMPT)])
    for kind, text in gen_prompts:
        toks = llm.tokenize(text.encode(), add_bos=True, special=True)
        llm.reset()
        out_ids = []
        for tok in llm.generate(toks, top_k=1, top_p=1.0, min_p=0.0, temp=0.0,
                                repeat_penalty=1.0, reset=True):
            # Any end-of-generation token ends it, as in specdec (Qwen: <|im_end|>, <|endoftext|>).
            if low.llama_vocab_is_eog(llm._model.vocab, tok):
                break
            out_ids.append(int(tok))
            if len(out_ids) >= N_GEN:
                break
        # Step i's token was chosen from the logits after prompt + out_ids[:i].
        scores = np.array(llm.scores[len(toks) - 1:len(toks) - 1 + len(out_ids)], dtype=np.float32)
        gaps = []
        for i, row in enumerate(scores):
            top2 = np.partition(row, -2)[-2:]
            assert int(row.argmax()) == out_ids[i] or row[out_ids[i]] == top2[1]
            gaps.append(round(float(top2[1] - top2[0]), 4))
        gen_text = llm.detokenize(out_ids).decode("utf-8", errors="replace")
        gen_cases.append({"kind": kind, "prompt": text, "prompt_tokens": [int(t) for t in toks],
                          "n_predict": N_GEN, "stopped_at_eos": len(out_ids) < N_GEN,
                          "tokens": out_ids, "gaps": gaps, "text": gen_text})

    res = {
        "model": preset["file"],
        "model_sha256": preset["sha256"],
        "llama_cpp_python_version": llama_cpp.__version__,
        "settings": {"n_ctx": n_ctx, "n_threads": 2, "kv_cache": "f32 (type_k=type_v=0), flash_attn off", "evaluation": "one token per llama_decode (n_batch=n_ubatch=1), CPU weight repacking off (use_extra_bufts=False)", "add_bos": "llama.cpp default (the GGUF's add_bos_token: false for SmolLM2 and Qwen2.5, true for Gemma 3)",
                     "special": True,
                     "sampling": "greedy (temp 0, top_k 1)"},
        "note": "logits[pos] are the next-token logits after tokens[0..pos]; top is [id, logit]",
        "logits": logit_cases,
        "generate": gen_cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n")
    print(f"{args.out}: {args.out.stat().st_size / 1024:.0f} KiB")
    for g in gen_cases:
        print(f"  {g['kind']}: {g['text']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
