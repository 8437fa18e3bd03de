#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer_<model>.json: expected llama.cpp token ids for a fixed set of
strings, produced with llama-cpp-python (the oracle for src/tokenizer).

usage: gen_tokenizer_fixtures.py [--models-dir DIR] [--out-dir DIR] [NAME ...]
  NAME: smollm2 and/or gemma3 (default: both that are present in the models dir).
  Models dir default: ${SPECDEC_MODELS:-~/.cache/specdec/models} (see scripts/fetch-models.sh).

Each case records the text, the flags (add_special -> llama's add_bos, parse_special -> special),
the ids, and for every id that occurs the bytes llama_token_to_piece gives without special
rendering (hex), so token_bytes() can be checked too.
"""
import argparse
import ctypes
import hashlib
import json
import os
import sys
from pathlib import Path

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

# Diverse inputs: code, emoji, scripts, whitespace runs, numbers, contractions, special tokens.
TEXTS = [
    "",
    "Hello, world!",
    "hello world",
    " leading space",
    "trailing space ",
    "   three leading spaces",
    "multiple   spaces   between   words",
    "tabs\tand\ttabs\t\t",
    "line one\nline two\n\nline four\n",
    "\n\n\n",
    "  \n  \n",
    "1234567",
    "3.14159 and 2,718,281 and 0x1F",
    "In 2024, 10000 people paid $1,234.56 each.",
    "I'm sure you're right, they've said we'll go; it's John's and he'd know.",
    "DON'T SHOUT, I'LL LEAVE",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "<html><body class=\"x\">&nbsp;</body></html>",
    "SELECT * FROM users WHERE id = 42;",
    "The quick brown fox jumps over the lazy dog.",
    "Emoji: 😀🎉👍🏽 family: 👨‍👩‍👧‍👦 flag: 🇫🇷",
    "日本語のテキストです。東京は大きい。",
    "中文测试：你好，世界！",
    "한국어 문장입니다.",
    "Здравствуй, мир! Привет.",
    "مرحبا بالعالم، كيف حالك؟",
    "שלום עולם",
    "हिन्दी में एक वाक्य।",
    "Ελληνικά γράμματα αβγ",
    "café naïve résumé",
    "cafe\u0301 combining e\u0301 and a\u0308",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    "math: ∑ x² ≤ ∞, α→β",
    "mixed\u00a0nbsp\u2003em\u3000ideographic",
    "a\u0085b next-line",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>text after eot",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos>text<eos>",
    "<unk> and <pad> and <s></s>",
    "!!!???...,,,;;;",
    "a-b_c.d/e\\f|g~h`i",
    "UPPER lower MiXeD CamelCaseWords snake_case_words",
]



def random_texts(n=30, seed=1234):
    """Seeded random mixtures of the pieces that stress pre-tokenizers and merging."""
    import random
    rng = random.Random(seed)
    pool = (list("abcXYZ019 '.,!?-_\n\t") + ["  ", "   ", "\n\n", " \n", "'s", "'LL", "123456",
            "é", "e\u0301", "日本", "中文", "😀", "👍🏽", "🇫🇷", "مرحبا", "Привет", "\u00a0", "\u3000",
            "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>",
            "<bos>", "</s>", "<s>", "<|im_", "<unused3>", "[multimodal]", "\r\n", "$%^&*()", "://"])
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 25))) for _ in range(n)]


TEXTS += random_texts()

# (add_special, parse_special) combinations recorded per text.
FLAGS = [(False, False), (True, True), (False, True)]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def piece(llama_cpp, vocab, tok):
    buf = ctypes.create_string_buffer(512)
    n = llama_cpp.llama_token_to_piece(vocab, tok, buf, len(buf), 0, False)
    if n < 0:
        raise RuntimeError(f"token {tok}: piece longer than {len(buf)} bytes")
    return buf.raw[:n]


def generate(name, path, out_dir):
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    cases = []
    pieces = {}
    for text in TEXTS:
        for add_special, parse_special in FLAGS:
            ids = llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=parse_special)
            for t in ids:
                if t not in pieces:
                    pieces[t] = piece(llama_cpp, vocab, t).hex()
            cases.append({"text": text, "add_special": add_special,
                          "parse_special": parse_special, "ids": ids})
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    doc = {
        "model": path.name,
        "n_vocab": n_vocab,
        "bos": llama_cpp.llama_vocab_bos(vocab),
        "eos": llama_cpp.llama_vocab_eos(vocab),
        "eot": llama_cpp.llama_vocab_eot(vocab),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "eog": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)],
        "sha256": sha256(path),
        "generator": f"llama-cpp-python {llama_cpp.__version__}",
        "cases": cases,
        "pieces_hex": {str(k): v for k, v in sorted(pieces.items())},
    }
    out = out_dir / f"tokenizer_{name}.json"
    out.write_text(json.dumps(doc, ensure_ascii=True, indent=1) + "\n")
    print(f"{out}: {len(cases)} cases", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    default_models = os.environ.get("SPECDEC_MODELS", str(Path.home() / ".cache/specdec/models"))
    ap.add_argument("--models-dir", default=default_models)
    ap.add_argument("--out-dir", default=str(Path(__file__).resolve().parents[2] / "tests/fixtures"))
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    names = args.names or [n for n in MODELS if (Path(args.models_dir) / MODELS[n]).exists()]
    if not names:
        sys.exit(f"no models found in {args.models_dir}; run scripts/fetch-models.sh first")
    for name in names:
        path = Path(args.models_dir) / MODELS[name]
        if not path.exists():
            sys.exit(f"{path} not found; run scripts/fetch-models.sh first")
        generate(name, path, Path(args.out_dir))


if __name__ == "__main__":
    main()
