"""Reference-layout quantizers for Q4_K, Q5_K and Q6_K in numpy.

gguf-py 0.19 can dequantize the K-quants but not quantize them, so these produce valid blocks in
the ggml byte layout (verified by round-tripping through gguf.quants.dequantize). They use a simple
min/max fit per sub-block, not llama.cpp's error-minimising search: the values differ from what
llama-quantize would produce, but the files are exact, valid K-quant data, which is all the oracle
fixtures need (llama.cpp computes the reference logits from the same bytes).
"""
from __future__ import annotations

import numpy as np

QK_K = 256


def _f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16)


def _pack_scale_min_k4(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """sc, mn: (n, 8) uint8 in [0, 63] -> (n, 12) uint8, the get_scale_min_k4 layout."""
    sc = sc.astype(np.uint8)
    mn = mn.astype(np.uint8)
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((mn[:, 4:8] & 0x0F) << 4)
    return out


def _affine_k(blocks: np.ndarray, nmax: int):
    """Shared part of Q4_K / Q5_K: y = d*sc*q - dmin*m over 8 sub-blocks of 32.

    Returns (d f16 (n,), dmin f16 (n,), sc (n,8), mn (n,8), q (n,8,32) in [0, nmax])."""
    n = blocks.shape[0]
    x = blocks.reshape(n, 8, 32).astype(np.float32)
    lo = np.minimum(x.min(axis=-1), 0.0)  # the offset is subtracted, so it must be >= 0
    hi = x.max(axis=-1)
    scale = (hi - lo) / nmax  # (n, 8)
    minv = -lo
    d = scale.max(axis=-1) / 63.0
    dmin = minv.max(axis=-1) / 63.0
    d16, dmin16 = _f16(d), _f16(dmin)
    d32, dmin32 = d16.astype(np.float32), dmin16.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32[:, None] > 0, np.rint(scale / d32[:, None]), 0)
        mn = np.where(dmin32[:, None] > 0, np.rint(minv / dmin32[:, None]), 0)
    sc = np.clip(sc, 0, 63).astype(np.uint8)
    mn = np.clip(mn, 0, 63).astype(np.uint8)
    eff_d = (d32[:, None] * sc)[:, :, None]
    eff_m = (dmin32[:, None] * mn)[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(eff_d > 0, np.rint((x + eff_m) / eff_d), 0)
    q = np.clip(q, 0, nmax).astype(np.uint8)
    return d16, dmin16, sc, mn, q


def quantize_q4_k(blocks: np.ndarray) -> np.ndarray:
    """blocks: (n, 256) float32 -> (n, 144) uint8."""
    n = blocks.shape[0]
    d, dmin, sc, mn, q = _affine_k(blocks, 15)
    qs = q.reshape(n, 4, 2, 32)  # sub-block 2c -> low nibble, 2c+1 -> high nibble
    qs = (qs[:, :, 0, :] | (qs[:, :, 1, :] << 4)).reshape(n, 128)
    return np.concatenate(
        [d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2),
         _pack_scale_min_k4(sc, mn), qs], axis=1).astype(np.uint8)


def quantize_q5_k(blocks: np.ndarray) -> np.ndarray:
    """blocks: (n, 256) float32 -> (n, 176) uint8."""
    n = blocks.shape[0]
    d, dmin, sc, mn, q = _affine_k(blocks, 31)
    low = q & 0x0F
    high = (q >> 4) & 1  # (n, 8, 32): bit j of qh[l] is the high bit of sub-block j, element l
    qh = np.zeros((n, 32), dtype=np.uint8)
    for j in range(8):
        qh |= (high[:, j, :] << j).astype(np.uint8)
    qs = low.reshape(n, 4, 2, 32)
    qs = (qs[:, :, 0, :] | (qs[:, :, 1, :] << 4)).reshape(n, 128)
    return np.concatenate(
        [d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2),
         _pack_scale_min_k4(sc, mn), qh, qs], axis=1).astype(np.uint8)


def quantize_q6_k(blocks: np.ndarray) -> np.ndarray:
    """blocks: (n, 256) float32 -> (n, 210) uint8. y = d * scales[e//16] * (q - 32)."""
    n = blocks.shape[0]
    x = blocks.reshape(n, 16, 16).astype(np.float32)
    amax_idx = np.abs(x).argmax(axis=-1)
    amax = np.take_along_axis(x, amax_idx[..., None], axis=-1)[..., 0]  # signed
    scale = amax / -32.0  # the largest magnitude maps to q-32 == -32 exactly
    d = np.abs(scale).max(axis=-1) / 127.0
    d16 = _f16(d)
    d32 = d16.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32[:, None] > 0, np.rint(scale / d32[:, None]), 0)
    sc = np.clip(sc, -128, 127).astype(np.int8)
    eff = (d32[:, None] * sc.astype(np.float32))[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(eff != 0, np.rint(x / eff), 0)
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(n, 256)

    ql = np.zeros((n, 128), dtype=np.uint8)
    qh = np.zeros((n, 64), dtype=np.uint8)
    for h in range(2):
        e = q[:, h * 128:(h + 1) * 128]  # e' in [0, 128)
        for t in range(4):  # 32-element rows inside this half
            rows = e[:, t * 32:(t + 1) * 32]
            # ql: byte h*64 + (e' % 64), nibble e' // 64
            off = h * 64 + (t % 2) * 32
            ql[:, off:off + 32] |= ((rows & 0x0F) << (4 * (t // 2))).astype(np.uint8)
            # qh: byte h*32 + l, bits 2t..2t+1
            qh[:, h * 32:(h + 1) * 32] |= (((rows >> 4) & 3) << (2 * t)).astype(np.uint8)
    return np.concatenate([ql, qh, sc.view(np.uint8), d16.view(np.uint8).reshape(n, 2)],
                          axis=1).astype(np.uint8)


QUANTIZERS = {"Q4_K": quantize_q4_k, "Q5_K": quantize_q5_k, "Q6_K": quantize_q6_k}


def quantize(data: np.ndarray, type_name: str) -> np.ndarray:
    """data: (rows, cols) float32 with cols % 256 == 0 -> (rows, cols/256*type_size) uint8."""
    rows, cols = data.shape
    assert cols % QK_K == 0, f"{type_name} needs rows that are a multiple of 256, got {cols}"
    out = QUANTIZERS[type_name](data.reshape(-1, QK_K).astype(np.float32))
    return out.reshape(rows, -1)


if __name__ == "__main__":  # self-check against gguf-py's dequantizers
    import gguf
    rng = np.random.default_rng(0)
    for name in QUANTIZERS:
        x = rng.standard_normal((8, 512)).astype(np.float32)
        x[0] = 0.0
        x[1] = np.abs(x[1])
        x[2] = -np.abs(x[2])
        qt = gguf.GGMLQuantizationType[name]
        b = quantize(x, name)
        assert b.shape[1] == 2 * gguf.GGML_QUANT_SIZES[qt][1], b.shape
        y = gguf.quants.dequantize(b, qt)
        err = np.abs(y - x).max() / np.abs(x).max()
        rel = np.linalg.norm(y - x) / np.linalg.norm(x)
        print(f"{name}: max err {err:.4f} (of max |x|), rel l2 {rel:.4f}")
        assert rel < {"Q4_K": 0.15, "Q5_K": 0.08, "Q6_K": 0.04}[name]
    print("ok")
