#!/usr/bin/env python3
"""Tiny random-weight GGUF models + llama.cpp reference logits, for tests without downloads.

Writes tests/fixtures/oracle_tiny/<arch>_<type>.gguf (deterministic: fixed seeds) and, when
llama-cpp-python is importable, tests/fixtures/oracle_tiny/<arch>_<type>.json with llama.cpp's
logits for a fixed token sequence at every position (full vocab).

Architectures: `llama` (NORM RoPE, separate output.weight) and `qwen2` (NEOX RoPE, q/k/v biases,
output tied to token_embd). Types: F32 F16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 (small config, n_embd 64) and
Q4_K Q5_K Q6_K (K configs, n_embd 256 because K-quant rows must be multiples of 256). Tensors
whose rows are not a multiple of the block size (llama K config: attn_output and ffn_down, 64 wide;
qwen2 K config: ffn_down) fall back to Q8_0 like llama-quantize does. The llama K config has
n_head * head_dim (64) != n_embd (256), set through attention.key_length/value_length, like gemma3;
llama.cpp's qwen2 loader does not allow that, so its K config uses head_dim 64.
See "tensor_types" in each JSON for the type of every tensor.
Norm weights and biases are always F32. llama gets every type; qwen2 gets F32 Q8_0 Q4_0 Q4_1 Q5_0
Q5_1 Q4_K (ARCH_TYPES).

`qwen3` (Qwen3's dense block: qwen2's without biases, with per-head Q/K RMSNorm before NEOX RoPE,
heads wider than n_embd / n_head like Qwen3-0.6B's, output tied to token_embd) gets F32 Q8_0 Q4_K.

`gemma3` (NEOX RoPE, sqrt(n_embd)-scaled embeddings, per-head Q/K norms, post-attention and
post-FFN norms, GELU-gated FFN, Q scaled by 1/sqrt(head_dim), output tied to token_embd) has 7
layers so that llama.cpp's fixed pattern (layer i is local unless i % 6 == 5) gives local layers on
both sides of a global one, a sliding window of 4 (so over the 20 oracle tokens most keys fall out
of the window of the local layers) and head_dim * n_head != n_embd like the real 270M model. It
gets F32 Q8_0 Q5_0 and `gemma3_mixed`, the 270M Q4_K_M file's per-tensor mix (Q5_0 q/k/gate/up,
Q8_0 v, Q4_K attn_output, Q6_K ffn_down, Q8_0 token_embd; n_embd 256 for the K-quants), which
covers its Q4_K and Q6_K without two more 3 MB files.

Usage: python3 scripts/oracle/gen_tiny_fixtures.py [--models-only] [--out DIR] [--only NAME...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import gguf

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kquants  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "oracle_tiny"

SMALL_TYPES = ["F32", "F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"]
K_TYPES = ["Q4_K", "Q5_K", "Q6_K"]
ARCHS = ["llama", "qwen2", "gemma3", "qwen3"]
# qwen2 only needs a few types to cover NEOX RoPE, biases and tied output (keeps the set < 3 MB)
ARCH_TYPES = {"llama": SMALL_TYPES + K_TYPES,
              "qwen2": ["F32", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K"],
              "gemma3": ["F32", "Q8_0", "Q5_0", "MIXED"],
              "qwen3": ["F32", "Q8_0", "Q4_K"]}
# gemma3_mixed: the per-tensor types of gemma-3-270m-q4_k_m.gguf (by tensor name suffix)
GEMMA3_MIXED = {"attn_q.weight": "Q5_0", "attn_k.weight": "Q5_0", "attn_v.weight": "Q8_0",
                "attn_output.weight": "Q4_K", "ffn_gate.weight": "Q5_0", "ffn_up.weight": "Q5_0",
                "ffn_down.weight": "Q6_K", "token_embd.weight": "Q8_0"}
GEMMA3_SLIDING_WINDOW = 4

# general.file_type values (llama_ftype)
FTYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9,
         "Q4_K": 15, "Q5_K": 17, "Q6_K": 18, "MIXED": 15}  # Q4_K_M, Q5_K_M, Q6_K

# Fixed token sequence fed to llama.cpp (ids in the tiny vocab, see build_vocab()).
ORACLE_TOKENS = [256, 72, 101, 108, 108, 111, 258, 119, 111, 114, 108, 100, 33, 10, 259, 257,
                 32, 200, 3, 255]
TOKENIZE_TEXT = "Hello the world in\n<|im_start|>bytes: \u00e9\u4e2d!"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable unicode mapping."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def build_vocab():
    """256 byte tokens (id == byte value), 3 merged tokens, 3 control tokens: 262 in all."""
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    types = [gguf.TokenType.NORMAL] * 256
    merges = ["\u0120 t", "h e", "i n"]  # "Ġ t" -> "Ġt", "h e" -> "he", "i n" -> "in"
    tokens += ["\u0120t", "he", "in"]  # ids 256, 257, 258
    types += [gguf.TokenType.NORMAL] * 3
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # 259, 260, 261
    tokens += specials
    types += [gguf.TokenType.CONTROL] * 3
    return tokens, types, merges


CONFIGS = {
    # n_embd, n_head, n_head_kv, head_dim, n_ff, n_layer
    "small": dict(n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=64, n_layer=2),
    # llama: head_dim * n_head (64) != n_embd (256), like gemma3; exercises attention.key_length
    "k": dict(n_embd=256, n_head=4, n_head_kv=2, head_dim=16, n_ff=64, n_layer=2),
    # llama.cpp's qwen2 loader requires n_head * head_dim == n_embd
    "k_qwen2": dict(n_embd=256, n_head=4, n_head_kv=1, head_dim=64, n_ff=64, n_layer=2),
    # gemma3: one KV head and a wide head like the 270M model (small: q_dim 128 != n_embd 64);
    # 7 layers (see the top)
    "small_gemma3": dict(n_embd=64, n_head=4, n_head_kv=1, head_dim=32, n_ff=64, n_layer=7),
    "k_gemma3": dict(n_embd=256, n_head=2, n_head_kv=1, head_dim=128, n_ff=256, n_layer=7),
    # qwen3: heads wider than n_embd / n_head, as in Qwen3-0.6B (16 x 128 over 1024)
    "small_qwen3": dict(n_embd=64, n_head=4, n_head_kv=2, head_dim=32, n_ff=64, n_layer=2),
    "k_qwen3": dict(n_embd=256, n_head=4, n_head_kv=2, head_dim=128, n_ff=256, n_layer=2),
}


def make_weights(arch: str, cfg: dict, n_vocab: int, seed: int) -> dict[str, np.ndarray]:
    """numpy arrays in (out_features, in_features) layout; gguf reverses to ggml's ne order."""
    rng = np.random.default_rng(seed)
    E, H, KV, D, F, L = (cfg[k] for k in ("n_embd", "n_head", "n_head_kv", "head_dim", "n_ff",
                                          "n_layer"))

    def mat(out_f, in_f, gain=1.0):
        return (rng.standard_normal((out_f, in_f)) * gain / np.sqrt(in_f)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    # A tied output makes logits ~ e_tok . e_tok, so a large embedding would just echo the input
    # token; keep it small relative to what the layers add. (gemma3 multiplies it by sqrt(E).)
    emb_std = {"llama": 1.0, "qwen2": 2.0 / np.sqrt(E), "gemma3": 1.0 / np.sqrt(E),
               "qwen3": 2.0 / np.sqrt(E)}[arch]
    w = {"token_embd.weight": (emb_std * rng.standard_normal((n_vocab, E))).astype(np.float32)}
    for i in range(L):
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = norm(E)
        w[p + "attn_q.weight"] = mat(H * D, E)
        w[p + "attn_k.weight"] = mat(KV * D, E)
        w[p + "attn_v.weight"] = mat(KV * D, E)
        w[p + "attn_output.weight"] = mat(E, H * D)
        if arch in ("gemma3", "qwen3"):  # (gemma3: Gemma's "1 +" folded in by the converter)
            w[p + "attn_q_norm.weight"] = norm(D)
            w[p + "attn_k_norm.weight"] = norm(D)
        if arch == "gemma3":
            w[p + "post_attention_norm.weight"] = norm(E)
            w[p + "post_ffw_norm.weight"] = norm(E)
        if arch == "qwen2":
            w[p + "attn_q.bias"] = (0.5 * rng.standard_normal(H * D)).astype(np.float32)
            w[p + "attn_k.bias"] = (0.5 * rng.standard_normal(KV * D)).astype(np.float32)
            w[p + "attn_v.bias"] = (0.5 * rng.standard_normal(KV * D)).astype(np.float32)
        w[p + "ffn_norm.weight"] = norm(E)
        w[p + "ffn_gate.weight"] = mat(F, E)
        w[p + "ffn_up.weight"] = mat(F, E)
        w[p + "ffn_down.weight"] = mat(E, F)
    w["output_norm.weight"] = norm(E)
    if arch == "llama":  # the others tie output to token_embd (llama.cpp duplicates it)
        w["output.weight"] = mat(n_vocab, E, 4.0)
    return w


def encode(arr: np.ndarray, type_name: str, name: str = ""):
    """Returns (data, raw_dtype or None, actual type name) for one 2-D weight."""
    if arr.ndim == 1:
        return arr, None, "F32"
    if type_name == "MIXED":
        type_name = GEMMA3_MIXED[name.split(".", 2)[-1] if name.startswith("blk.") else name]
    cols = arr.shape[1]
    if type_name == "F32":
        return arr, None, "F32"
    if type_name == "F16":
        return arr.astype(np.float16), None, "F16"
    qt = gguf.GGMLQuantizationType[type_name]
    block = gguf.GGML_QUANT_SIZES[qt][0]
    if cols % block != 0:  # llama-quantize's fallback for rows a K-quant cannot hold
        type_name = "Q8_0"
        qt = gguf.GGMLQuantizationType.Q8_0
    if type_name in kquants.QUANTIZERS:
        data = kquants.quantize(arr, type_name)
    else:
        data = gguf.quants.quantize(arr, qt)
    return data, qt, type_name


def write_model(arch: str, type_name: str, out_dir: Path) -> tuple[Path, dict]:
    if arch == "gemma3":
        cfg = CONFIGS["k_gemma3" if type_name in K_TYPES + ["MIXED"] else "small_gemma3"]
    elif arch == "qwen3":
        cfg = CONFIGS["k_qwen3" if type_name in K_TYPES else "small_qwen3"]
    elif type_name in K_TYPES:
        cfg = CONFIGS["k_qwen2" if arch == "qwen2" else "k"]
    else:
        cfg = CONFIGS["small"]
    tokens, types, merges = build_vocab()
    n_vocab = len(tokens)
    seed = 1000 * ARCHS.index(arch) + (SMALL_TYPES + K_TYPES + ["MIXED"]).index(type_name)
    weights = make_weights(arch, cfg, n_vocab, seed)

    path = out_dir / f"{arch}_{type_name.lower()}.gguf"
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_name(f"specdec tiny {arch} {type_name}")
    wr.add_context_length(128)
    wr.add_embedding_length(cfg["n_embd"])
    wr.add_block_count(cfg["n_layer"])
    wr.add_feed_forward_length(cfg["n_ff"])
    wr.add_head_count(cfg["n_head"])
    wr.add_head_count_kv(cfg["n_head_kv"])
    wr.add_key_length(cfg["head_dim"])
    wr.add_value_length(cfg["head_dim"])
    wr.add_rope_dimension_count(cfg["head_dim"])
    wr.add_rope_freq_base(10000.0 if arch == "llama" else 1000000.0)
    wr.add_layer_norm_rms_eps(1e-5 if arch == "llama" else 1e-6)
    if arch == "gemma3":
        wr.add_sliding_window(GEMMA3_SLIDING_WINDOW)
    wr.add_vocab_size(n_vocab)
    wr.add_file_type(FTYPE[type_name])
    wr.add_quantization_version(gguf.GGML_QUANT_VERSION)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("qwen2" if arch in ("qwen2", "qwen3") else "smollm")
    wr.add_token_list(tokens)
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    wr.add_bos_token_id(259)
    wr.add_eos_token_id(261 if arch in ("qwen2", "qwen3") else 259)
    wr.add_add_bos_token(False)

    tensor_types = {}
    for name, arr in weights.items():
        data, raw, actual = encode(arr, type_name, name)
        tensor_types[name] = actual
        if raw is None:
            wr.add_tensor(name, data)
        else:
            wr.add_tensor(name, data, raw_dtype=raw)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    info = {"arch": arch, "type": type_name, "config": cfg, "n_vocab": n_vocab,
            "tensor_types": tensor_types}
    return path, info


def reference_logits(path: Path, tokens: list[int]) -> np.ndarray:
    """float64 numpy forward pass over the dequantized weights of `path` (all positions)."""
    r = gguf.GGUFReader(str(path))
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.")}
    arch = f["general.architecture"]
    E, L = f[f"{arch}.embedding_length"], f[f"{arch}.block_count"]
    H, KV = f[f"{arch}.attention.head_count"], f[f"{arch}.attention.head_count_kv"]
    D = f.get(f"{arch}.attention.key_length", E // H)
    base, eps = f[f"{arch}.rope.freq_base"], f[f"{arch}.attention.layer_norm_rms_epsilon"]
    W = {}
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        W[t.name] = np.asarray(a, dtype=np.float64).reshape([int(n) for n in reversed(t.shape)])
    T = len(tokens)

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    gemma = arch == "gemma3"
    window = f.get(f"{arch}.attention.sliding_window", 0) if gemma else 0
    pos = np.arange(T, dtype=np.float64)

    def angles(b):
        inv = b ** (-np.arange(0, D, 2, dtype=np.float64) / D)  # (D/2,)
        ang = pos[:, None] * inv[None, :]
        return np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]  # (T, 1, D/2)

    def rope(x, cs):  # x: (T, heads, D)
        cos, sin = cs
        if arch in ("qwen2", "gemma3", "qwen3"):  # NEOX: rotate (i, i + D/2)
            a, b = x[..., :D // 2], x[..., D // 2:]
            return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
        a, b = x[..., 0::2], x[..., 1::2]  # NORM: rotate (2i, 2i+1)
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, a * sin + b * cos
        return out

    x = W["token_embd.weight"][tokens]
    if gemma:
        x = x * np.sqrt(E)
    causal = np.triu(np.full((T, T), -np.inf), 1)
    # gemma3 (llama.cpp): layer i is local unless i % 6 == 5; a local layer's query at p sees keys
    # at p - window < p0 <= p and rotates with base 10000
    local_mask = causal + (np.tril(np.full((T, T), -np.inf), -window) if window else 0.0)
    rope_global, rope_local = angles(base), angles(10000.0)
    for i in range(L):
        p = f"blk.{i}."
        local = bool(window) and i % 6 < 5
        cs = rope_local if local else rope_global
        h = rms(x, W[p + "attn_norm.weight"])
        q, k, v = (h @ W[p + f"attn_{n}.weight"].T + W.get(p + f"attn_{n}.bias", 0.0)
                   for n in "qkv")
        q, k, v = q.reshape(T, H, D), k.reshape(T, KV, D), v.reshape(T, KV, D)
        if gemma or arch == "qwen3":  # per-head Q/K RMSNorm before RoPE
            q, k = rms(q, W[p + "attn_q_norm.weight"]), rms(k, W[p + "attn_k_norm.weight"])
        q, k = rope(q, cs), rope(k, cs)
        g = H // KV
        att = np.einsum("thd,shd->hts", q, np.repeat(k, g, axis=1)) / np.sqrt(D)
        att = att + (local_mask if local else causal)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", att, np.repeat(v, g, axis=1)).reshape(T, H * D)
        o = o @ W[p + "attn_output.weight"].T
        x = x + (rms(o, W[p + "post_attention_norm.weight"]) if gemma else o)
        h = rms(x, W[p + "ffn_norm.weight"])
        gate = h @ W[p + "ffn_gate.weight"].T
        if gemma:  # GELU, tanh approximation
            act = 0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate ** 3)))
        else:
            act = gate / (1 + np.exp(-gate))
        ff = (act * (h @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
        x = x + (rms(ff, W[p + "post_ffw_norm.weight"]) if gemma else ff)
    out_w = W.get("output.weight", W["token_embd.weight"])
    return rms(x, W["output_norm.weight"]) @ out_w.T


def llama_cpp_logits(path: Path, sequential: bool):
    """llama.cpp's logits for ORACLE_TOKENS (all positions) and the Llama object.

    sequential=True is the oracle: one token per llama_decode and no CPU weight repacking, so every
    logit comes from ggml's single-row vec_dot kernels (ggml_vec_dot_<type>_q8_*), the kernels
    specdec reproduces for each output element whatever the batch size. Batched evaluation
    (sequential=False, llama.cpp's defaults) runs other kernels for K-quant matmuls (batched and
    repacked GEMM/GEMV) whose float results differ in the last bit or two; on these tiny random
    models such a difference can move an activation across a Q8 rounding boundary, and the flip
    grows through the layers to ~0.15 in the logits (llama_q5_k, qwen2_q4_k), so batched logits
    are not a reproducible reference. Their distance from the sequential ones is recorded instead.
    """
    import llama_cpp
    import llama_cpp.llama as llama_mod
    low = llama_mod.llama_cpp  # the ctypes module Llama() takes its default params from
    default_params = low.llama_model_default_params

    def no_repack():  # llama-cpp-python 0.3.36 has no Llama() argument for use_extra_bufts
        p = default_params()
        p.use_extra_bufts = False
        return p

    if sequential:
        low.llama_model_default_params = no_repack
    try:
        n_batch = 1 if sequential else 128
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=128, n_batch=n_batch, n_ubatch=n_batch,
                              n_threads=2, logits_all=True, verbose=False,
                              # f32 KV cache and no flash attention: llama.cpp's most exact
                              # configuration (its default f16 KV cache alone moves logits by
                              # up to ~1.4 on SmolLM2), and the one specdec implements.
                              type_k=0, type_v=0, flash_attn=False, seed=0)
    finally:
        low.llama_model_default_params = default_params
    llm.reset()
    llm.eval(ORACLE_TOKENS)  # with n_batch 1, one llama_decode per token
    return np.array(llm.scores[:len(ORACLE_TOKENS)], dtype=np.float32), llm


def oracle(path: Path, info: dict) -> dict:
    import llama_cpp
    batched, llm = llama_cpp_logits(path, sequential=False)
    del llm
    scores, llm = llama_cpp_logits(path, sequential=True)
    n_vocab = llm.n_vocab()
    assert n_vocab == info["n_vocab"], (n_vocab, info["n_vocab"])
    tok = llm.tokenize(TOKENIZE_TEXT.encode(), add_bos=False, special=True)
    ref = reference_logits(path, ORACLE_TOKENS)
    diff = np.abs(ref - scores.astype(np.float64))
    res = {
        "model": path.name,
        **info,
        "llama_cpp_python_version": llama_cpp.__version__,
        "tokens": ORACLE_TOKENS,
        # logits[i] = next-token logits after tokens[0..i], all n_vocab entries, evaluated one
        # token at a time with ggml's vec_dot kernels (see llama_cpp_logits)
        "logits": [[float(f"{v:.6g}") for v in row] for row in scores],
        "argmax": [int(i) for i in scores.argmax(axis=1)],
        # Exact float64 forward pass (reference_logits) over the dequantized weights, same layout
        # as "logits". llama.cpp matches it to ~3e-6 for F32 weights; for F16 and quantized
        # weights llama.cpp rounds the activations (to F16 / Q8_0 / Q8_K) before each matmul, so it
        # is ~1e-2 (F16) to ~0.25 (quantized) away. An engine that keeps activations in f32 should
        # match ref_logits tightly; one that quantizes activations like llama.cpp, "logits".
        "ref_logits": [[float(f"{v:.6g}") for v in row] for row in ref],
        "f64_reference": {"max_abs_diff": float(diff.max()),
                          "mean_abs_diff": float(diff.mean()),
                          "max_abs_logit": float(np.abs(ref).max()),
                          "argmax_agree": int((ref.argmax(1) == scores.argmax(1)).sum())},
        # How far llama.cpp's own batched evaluation (one llama_decode, default kernels) lands
        # from "logits": its run-to-run spread across equivalent evaluations.
        "llama_cpp_batched": {"max_abs_diff": float(np.abs(batched - scores).max())},
        "tokenize": {"text": TOKENIZE_TEXT, "special": True, "add_bos": False,
                     "ids": [int(t) for t in tok]},
    }
    del llm
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--models-only", action="store_true", help="do not run llama.cpp")
    ap.add_argument("--only", nargs="*", help="e.g. llama_q4_k qwen2_f32")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for arch in ARCHS:
        for t in ARCH_TYPES[arch]:
            name = f"{arch}_{t.lower()}"
            if args.only and name not in args.only:
                continue
            path, info = write_model(arch, t, args.out)
            msg = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: " \
                  f"{path.stat().st_size / 1024:.0f} KiB"
            if not args.models_only:
                res = oracle(path, info)
                jpath = path.with_suffix(".json")
                jpath.write_text(json.dumps(res, separators=(",", ":")) + "\n")
                fr = res["f64_reference"]
                msg += (f", oracle {jpath.stat().st_size / 1024:.0f} KiB, argmax {res['argmax'][:5]}.."
                        f" vs f64: max|d| {fr['max_abs_diff']:.2e} (|logit| <= "
                        f"{fr['max_abs_logit']:.1f}), argmax agree {fr['argmax_agree']}/"
                        f"{len(res['tokens'])}")
            print(msg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
