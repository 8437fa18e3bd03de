#!/usr/bin/env python3
"""How much llama.cpp's own logits move between equivalent evaluations.

Batched prompt evaluation vs one token at a time, and f32 vs default (f16) KV cache. Quantized
activations make a 30-layer model chaotic in the last bits, so this spread is the floor for how
closely any other implementation can be expected to match llama.cpp. The tolerances in
tests/real_model_oracle_test.cpp are set against it.

usage: python3 scripts/oracle/llama_cpp_self_variation.py [MODEL.gguf [PROMPT ...]]
  MODEL defaults to SmolLM2-135M-Instruct (whose ids for the default prompt are fixed below);
  other models tokenize the prompts (default: the SmolLM2 prompt's text and a code prompt).
"""
import os
import sys

import llama_cpp
import numpy as np

MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser(
    os.environ.get("SPECDEC_MODELS", "~/.cache/specdec/models") + "/SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPTS = [[504, 3575, 282, 4649, 314]]  # SmolLM2's "The capital of France is"
if len(sys.argv) > 1:
    texts = sys.argv[2:] or ["The capital of France is",
                             "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"]
    _vocab = llama_cpp.Llama(MODEL, vocab_only=True, verbose=False)
    PROMPTS = [_vocab.tokenize(t.encode(), add_bos=True, special=True) for t in texts]


def logits(tokens, sequential=False, **kw):
    llm = llama_cpp.Llama(MODEL, n_ctx=512, n_threads=2, n_threads_batch=2, logits_all=True,
                          verbose=False, **kw)
    if sequential:
        for t in tokens:
            llm.eval([t])
    else:
        llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)])


for toks in PROMPTS:
    f32 = dict(type_k=0, type_v=0, flash_attn=False)
    batch = logits(toks, **f32)
    seq = logits(toks, sequential=True, **f32)
    default = logits(toks)
    print("tokens", toks)
    print("  max |batched - sequential| per position (f32 KV):", np.abs(batch - seq).max(axis=1))
    print("  max |f32 KV - default KV| per position (batched):", np.abs(batch - default).max(axis=1))
