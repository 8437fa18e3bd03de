#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer_<model>.json: expected llama.cpp token ids for a fixed set of
strings, produced with llama-cpp-python (the oracle for src/tokenizer).

usage: gen_tokenizer_fixtures.py [--models-dir DIR] [--out-dir DIR] [NAME ...]
  NAME: smollm2, gemma3 and/or qwen2.5-coder (default: those present in the models dir).
  Models dir default: ${SPECDEC_MODELS:-~/.cache/specdec/models} (see scripts/fetch-models.sh).

Each case records the text, the flags (add_special -> llama's add_bos, parse_special -> special),
the ids, and for every id that occurs the bytes llama_token_to_piece gives without special
rendering (hex), so token_bytes() can be checked too.

qwen2.5-coder (the Qwen2.5-Coder 0.5B's vocabulary, which the 1.5B shares; pre-tokenizer
`qwen2`) gets the common texts plus QWEN_TEXTS, ~270 strings in all. Some of those are not valid
UTF-8: such a case has `text_hex` (the bytes) and `text` is only their lossy rendering. Its cases
also carry `detok_hex`, llama.cpp's llama_detokenize of the ids (special tokens not rendered), so
that decode(encode(s)) can be held to llama.cpp's round trip, wherever that gives s back or not.
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
    "qwen2.5-coder": "qwen2.5-coder-0.5b-instruct.gguf",
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



def random_texts(n=30, seed=1234, extra=()):
    """Seeded random mixtures of the pieces that stress pre-tokenizers and merging."""
    import random
    rng = random.Random(seed)
    pool = (list("abcXYZ019 '.,!?-_\n\t") + ["  ", "   ", "\n\n", " \n", "'s", "'LL", "123456",
            "é", "e\u0301", "日本", "中文", "😀", "👍🏽", "🇫🇷", "مرحبا", "Привет", "\u00a0", "\u3000",
            "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<start_of_turn>", "<end_of_turn>",
            "<bos>", "</s>", "<s>", "<|im_", "<unused3>", "[multimodal]", "\r\n", "$%^&*()", "://"]
            + list(extra))
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 25))) for _ in range(n)]


COMMON_TEXTS = TEXTS + random_texts()
TEXTS = COMMON_TEXTS

# What a code model's byte-level BPE (pre-tokenizer qwen2: single digits, letters with one
# leading non-letter, punctuation runs with trailing newlines, whitespace runs) must get right.
# bytes entries are deliberately not valid UTF-8.
QWEN_TEXTS = [
    # code: indentation with spaces and tabs, trailing spaces, CRLF
    "def f(x):\n\tif x:\n\t\treturn 1\n\treturn 0\n",
    "class A:\n    def __init__(self):\n        self.x = 1\n\n    def m(self):  \n        pass\n",
    "    indented four\n        indented eight\n            twelve\n",
    "int main() {\n    printf(\"%d\\n\", 42);\n    return 0;\n}\n",
    "#include <stdio.h>\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
    "fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u8> = vec![1, 2, 3];\n    Ok(())\n}",
    "const f = async (x) => { await fetch(`/api/${x}`); };",
    "if (a && b || !c) { x <<= 2; y >>= 3; z **= 4; }",
    "    # comment with trailing spaces   \n",
    "\t\t\tdeep tabs\n\t\n",
    "x = [i**2 for i in range(10) if i % 2 == 0]",
    "SELECT a.id, COUNT(*) AS n FROM a JOIN b ON a.id = b.a_id GROUP BY a.id;",
    "<div class=\"container\">\n  <p>Hello</p>\n</div>",
    "{\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}",
    "$ git commit -m \"fix: handle edge case\" && git push origin main",
    "template <typename T>\nstd::vector<T> f(const std::vector<T>& v);",
    "    return self._cache.get(key, None)\r\n",
    "a\r\nb\r\n\r\nc",
    "\"\"\"Docstring.\n\n    Args:\n        x: int\n    \"\"\"",
    "// TODO(user): fix this\n/* block\n * comment */",
    "@decorator\ndef g(*args, **kwargs): ...",
    "matrix[i][j] += a[i][k] * b[k][j];",
    "print(f\"{name!r:>10} = {value:.3f}\")",
    "x=1;y=2;z=x+y",
    "\tmixed \t tabs  and   spaces \t\n",
    "end of line spaces   \nnext",
    "}\n\n\n}\n",
    "):\n",
    "    }\n  }\n}",
    "\n\t\t\n\t",
    # digits: runs of many lengths, separators, other scripts' digits
    "0", "12", "123", "1234", "12345", "123456789", "1234567890123", "98765432109876543210",
    " 1234567890", "a1b22c333d4444e55555", "v1.2.3-rc4", "3.14159265358979323846", "-42 +7",
    "+1-555-0100", "1,000,000.00", "2024-01-15T10:30:00Z", "0b1010 0o777 0xDEADBEEF 1e-10",
    "6.022e23 1_000_000", "٠١٢٣٤٥٦٧٨٩", "१२३ ๑๒๓", "²³¹ superscripts", "Ⅻ and ⅷ", "½ ¼ ¾",
    "x1 y22 z333", "ID: 00042", "1st 2nd 3rd 4th",
    # CJK
    "Python是一种广泛使用的编程语言。", "def 函数(参数):\n    返回 = 参数 + 1", "東京タワーは333メートルです",
    "中文，标点。符号！“引号”", "ひらがな カタカナ 漢字", "한글 자모 ㄱㄴㄷ", "𠀀𠀁𠀂 extension B",
    "全角スペース\u3000あり", "注释：这是一个测试\n",
    # emoji
    "😀", "👍🏽👍🏿", "👨‍💻 coding", "❤️ ♥ ★", "🇺🇸🇯🇵", "🤖🚀✨", "emoji😀between😀words",
    "1️⃣ 2️⃣ #️⃣", "🏳️‍🌈", " 🙂 spaced 🙃 ",
    # contractions, lower and upper case and mixed
    "it's", "don't", "we're", "I've", "I'm", "you'll", "he'd", "IT'S", "DON'T", "WE'RE",
    "I'VE", "I'M", "YOU'LL", "HE'D", "It'S don'T We'Re I'Ve", "'s at the start", "''", "'",
    "rock 'n' roll", "O'Neil's", "the '90s", "'sup", "can’t won’t", "'S'T'RE'VE'M'LL'D",
    "x's y'all", "'ll've", "John'S BOOK'S", " 's", "\n'd",
    # whitespace runs: trailing spaces, newline mixes, other whitespace
    " ", "  ", "    ", "\t", " \t ", "a  ", "a\n", "a \n", "a  \n\n", "\n \n", " \n\n ",
    "\r\n\r\n", "\n\n\n\n\n\n\n\n", "word\n    \n    word", "   \n", " \t\n\r\x0b\x0c",
    "\u00a0\u00a0", "\u2028 \u2029", "trailing\t", "x \u3000y", "a \n b \n\n c", "end\n\n",
    # special tokens inside text
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "text<|endoftext|>more",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|im_start|> space after", " <|im_end|> spaces around ", "<|im_end|><|im_start|>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n    return 1<|fim_middle|>",
    "<|repo_name|>proj\n<|file_sep|>a.py\nprint(1)", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
    "<|im_start", "<|im_start|", "<|IM_START|>", "<<|im_end|>>", "<|vision_start|><|image_pad|><|vision_end|>",
    "<|box_start|>(1,2)<|box_end|>", "\n<|im_end|>\n", "<|endoftext|><|endoftext|>", "a<|im_end|>b",
    # invalid UTF-8
    b"\xff", b"abc\xffdef", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82x", b"\xf0\x9f\x98",
    b"\x80\x80", b"\xed\xa0\x80", b"\xc0\xaf", b" \xfe\xfe ", b"caf\xe9", b"\xef\xbb\xbfBOM",
    b"ok \xf0\x9f\x98 ok", b"\xc3\xa9\xc3", b"<|im_start|>\xff<|im_end|>", b"a\x00b",
    # mixed scripts
    "Hello世界Привет", "naïve日本café", "abcАБВ", "ΑΒΓabc", "x=αβγ;y=δ", "Straße STRASSE",
    "İstanbul ıi", "ﬁ ligature", "ǅ titlecase", "ภาษาไทย", "עבריתEnglish", "ქართული Հայերեն",
    "Zalgo: Z̸̢a̵l̶g̷o̴", "Tiếng Việt", "日本語English混在text",
    # letters and digits newer than Unicode 14 (what Debian 12's PCRE2 knows): CJK Extensions I
    # and H, Nag Mundari letters and digits, Kawi digits, Kaktovik numerals
    "\U0002EBF0<k\U0002EBF1 ext I", "x\U00031350y\U00031351", "\U0001E4D0\U0001E4F0\U0001E4F1 1",
    "\U00011F50\U00011F51 kawi", "a\U0001D2C0b'\U0001D2C1", "'s\U0002EBF0's",
    # punctuation runs
    "...", "!!!", "?!?!", "---", "===", "***", "###", "//", "<<>>", "{{}}", "()[]{}", ":::",
    "—–-", "…", "«»“”‘’", "、。！？", "!!!\n\n", "...\n", "~~~~~~~~", "____init____", "-->",
    "<!-- -->", "#!/usr/bin/env python3", "&&||", "@@ -1,3 +1,4 @@", ".\n\n\n", ";\r\n",
    # URLs and paths
    "https://github.com/ggml-org/llama.cpp/blob/master/README.md",
    "http://example.com:8080/path?q=1&r=two#frag", "mailto:user@example.com",
    "ftp://files.example.org/pub/", "www.example.co.uk", "file:///home/user/.bashrc",
    "https://例子.测试/路径", "See https://x.y/z.", "user@host:~/src$ ls -la",
    "C:\\Users\\me\\file.txt",
    # long words and runs
    "supercalifragilisticexpialidocious", "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "antidisestablishmentarianism", "Donaudampfschifffahrtsgesellschaftskapitän",
    "thisIsAVeryLongCamelCaseIdentifierNameForTesting", "THIS_IS_A_CONSTANT_NAME_THAT_IS_LONG",
    "a" * 100, "ab" * 60, "😀" * 20, "日" * 50, " " * 50, "\n" * 40, "0" * 64, "abc123" * 20,
    "=" * 80, "\t" * 30,
]

QWEN_SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|fim_prefix|>", "<tool_call>",
                 "    ", "\t\t", "def ", "()", "9876", "'S", "'re", "\r\n\r\n"]

MODEL_TEXTS = {
    "qwen2.5-coder": COMMON_TEXTS + QWEN_TEXTS + random_texts(40, seed=2025, extra=QWEN_SPECIALS),
}
# Fixtures that record llama.cpp's detokenization of every case (see the module docstring).
RECORD_DETOK = {"qwen2.5-coder"}

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


def detokenize(llama_cpp, vocab, ids):
    """llama_detokenize: no special tokens removed or rendered (control tokens give no text)."""
    arr = (llama_cpp.llama_token * max(1, len(ids)))(*ids)
    size = 64 + 16 * len(ids)
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, False)
    if n < 0:
        raise RuntimeError(f"detokenize: needs {-n} bytes")
    return buf.raw[:n]


def generate(name, path, out_dir):
    import llama_cpp
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    cases = []
    pieces = {}
    for text in MODEL_TEXTS.get(name, TEXTS):
        raw = text if isinstance(text, bytes) else text.encode("utf-8")
        for add_special, parse_special in FLAGS:
            ids = llm.tokenize(raw, add_bos=add_special, special=parse_special)
            for t in ids:
                if t not in pieces:
                    pieces[t] = piece(llama_cpp, vocab, t).hex()
            case = {"text": raw.decode("utf-8", errors="replace"), "add_special": add_special,
                    "parse_special": parse_special, "ids": ids}
            if isinstance(text, bytes):
                case["text_hex"] = raw.hex()
            if name in RECORD_DETOK:
                case["detok_hex"] = detokenize(llama_cpp, vocab, ids).hex()
            cases.append(case)
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
