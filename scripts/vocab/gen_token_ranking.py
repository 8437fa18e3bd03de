#!/usr/bin/env python3
"""Writes src/engine/token_ranking_data.cpp: the tokens of a GGUF vocabulary ranked by how often
they occur in a local text corpus, for the draft's frequency-ranked output head (FR-Spec,
engine/token_ranking.h).

The corpus is local: the Python 3.11 standard library sources (code, comments and docstrings;
test suites left out), /usr/share/common-licenses and the README files under /usr/share/doc,
plus English prose from four Debian packages when they are installed (`apt-get install
python3.11-doc debian-handbook debian-reference-en fortunes`: the Python documentation, the
Debian Administrator's Handbook and the Debian Reference as text stripped from their HTML, and
the fortune quotations). A code-only corpus ranked too few of the words a chat answer writes:
on 500-token summaries the draft's 32,768-token subset accepted 2-7 points fewer drafts than
the whole head (docs/benchmarks.md). It is tokenized with llama.cpp's tokenizer
(llama-cpp-python, vocab only, or its llama-tokenize program with --llama-tokenize), which the
oracle tests show equal to ours on this vocabulary. Only tokens seen at least --min-count times are listed; the engine ranks the rest
after them by merge order. The ranking only decides which tokens a draft can propose: any
ranking keeps speculative decoding exact.

usage: gen_token_ranking.py MODEL.gguf NAME > src/engine/token_ranking_data.cpp
"""
import argparse
import collections
import glob
import html.parser
import os
import subprocess
import sys
import tempfile

import gguf


def fingerprint(tokens):
    """FNV-1a 64 over every token's bytes, each followed by a NUL (engine/token_ranking.cpp)."""
    h = 0xcbf29ce484222325
    for t in tokens:
        for b in t + b"\0":
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def corpus_files():
    py = sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
    py = [f for f in py if "/test/" not in f and "/tests/" not in f]
    text = sorted(glob.glob("/usr/share/common-licenses/*") + glob.glob("/usr/share/doc/*/README*"))
    prose = sorted(glob.glob("/usr/share/doc/python3.11/html/**/*.html", recursive=True) +
                   glob.glob("/usr/share/doc/debian-handbook/html/en-US/*.html") +
                   glob.glob("/usr/share/debian-reference/*.en.html") +
                   [f for f in glob.glob("/usr/share/games/fortunes/*")
                    if not f.endswith(".dat") and not f.endswith(".u8")])
    return [f for f in py + text + prose if not f.endswith(".gz") and os.path.isfile(f)]


class _TextOfHtml(html.parser.HTMLParser):
    """The text of an HTML page, without scripts, styles and navigation boilerplate's markup."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self._skip = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def file_text(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if path.endswith(".html"):
        p = _TextOfHtml()
        p.feed(data.decode("utf-8", errors="replace"))
        data = "".join(p.parts).encode("utf-8")
    return data


def tokenizer(model, llama_tokenize):
    """A function from bytes to token ids: llama-cpp-python, or the llama-tokenize program."""
    if not llama_tokenize:
        import llama_cpp
        llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
        return lambda data: llm.tokenize(data, add_bos=False, special=False)

    def run(data):
        with tempfile.NamedTemporaryFile(suffix=".txt") as f:
            f.write(data)
            f.flush()
            out = subprocess.run([llama_tokenize, "-m", model, "-f", f.name, "--ids", "--log-disable",
                                  "--no-bos", "--no-parse-special"], check=True, capture_output=True)
        line = out.stdout.decode().strip().splitlines()[-1]
        return [int(t) for t in line.strip("[]").split(",") if t.strip()]
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("name", help="C++ identifier suffix, e.g. qwen2")
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--llama-tokenize", help="llama.cpp's llama-tokenize program (instead of "
                    "llama-cpp-python); files are tokenized in batches joined by blank lines")
    a = ap.parse_args()

    reader = gguf.GGUFReader(a.model)
    field = reader.fields["tokenizer.ggml.tokens"]
    tokens = [bytes(field.parts[i]) for i in field.data]
    fp = fingerprint(tokens)

    tokenize = tokenizer(a.model, a.llama_tokenize)
    counts = collections.Counter()
    n_bytes = 0
    files = corpus_files()
    batch = []
    for i, f in enumerate(files):
        data = file_text(f)
        n_bytes += len(data)
        if not a.llama_tokenize:
            counts.update(tokenize(data))
            continue
        # One program start per ~4 MB, not per file (each loads the vocabulary).
        batch.append(data)
        if sum(map(len, batch)) > (4 << 20) or i + 1 == len(files):
            counts.update(tokenize(b"\n\n".join(batch)))
            batch = []
    # Most frequent first; ties by id (merge order), so the output is reproducible.
    ranked = sorted((t for t, c in counts.items() if c >= a.min_count), key=lambda t: (-counts[t], t))
    total = sum(counts.values())
    print(f"{len(files)} files, {n_bytes} bytes, {total} tokens, {len(counts)} distinct, "
          f"{len(ranked)} ranked", file=sys.stderr)

    out = sys.stdout
    # Kept as written: clang-format would rewrap the tables (8,000 lines of churn).
    out.write("// clang-format off\n")
    out.write("// Generated by scripts/vocab/gen_token_ranking.py; do not edit.\n")
    out.write(f"// {os.path.basename(a.model)}: {len(tokens)} tokens; corpus: {len(files)} files, "
              f"{n_bytes} bytes, {total} tokens, {len(counts)} distinct; the {len(ranked)} seen\n")
    out.write(f"// at least {a.min_count} times, most frequent first.\n")
    out.write('#include "engine/token_ranking.h"\n\nnamespace specdec::token_ranking_data {\n\n')
    out.write(f"extern const uint64_t k_{a.name}_fingerprint = 0x{fp:016x}ull;\n")
    out.write(f"extern const int32_t k_{a.name}_vocab = {len(tokens)};\n")
    out.write(f"extern const int32_t k_{a.name}_ranked[] = {{\n")
    for i in range(0, len(ranked), 12):
        out.write("    " + ", ".join(str(t) for t in ranked[i:i + 12]) + ",\n")
    out.write("};\n")
    out.write(f"extern const int32_t k_{a.name}_ranked_count = {len(ranked)};\n\n")
    out.write("}  // namespace specdec::token_ranking_data\n")


if __name__ == "__main__":
    main()
