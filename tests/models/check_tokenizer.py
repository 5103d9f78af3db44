#!/usr/bin/env python3
"""wick's token ids against llama.cpp's llama-tokenize on real vocabularies.

Each vocabulary (a Hugging Face tokenizer.json with its tokenizer_config.json) is written as a
vocab-only GGUF file with gguf.GGUFWriter, as llama.cpp's converter lays one out: the tokens, their
types (control for special added tokens, user-defined for the other added tokens, byte for <0xXX>),
the merges, the pre-tokenizer name, BOS/EOS. SentencePiece-style vocabularies (Llama 2) get the
score -(rank of the merge that makes the token), so that merging by score is merging by rank.
Then every text of the corpus is tokenized by `llama-tokenize` from that file and by `wick tokenize`
from the same file and from the tokenizer.json itself, with and without parsing special tokens,
and the ids must be equal.

usage: check_tokenizer.py WICK OUT_DIR NAME=DIR[:KIND:PRE] ...
  (DIR holds tokenizer.json and tokenizer_config.json; KIND is llama or gpt2, PRE the
   tokenizer.ggml.pre name)
"""
import concurrent.futures
import json
import os
import subprocess
import sys

import gguf

CORPUS = [
    "Hello, world!",
    "",
    " ",
    "  leading and trailing spaces  ",
    "a  b   c    d",
    "tabs\tand\t\ttabs",
    "line one\nline two\n\nline four\r\nwindows\r\n",
    "\n\n\n",
    "def f(x):\n    return x ** 2  # square\n\nif __name__ == '__main__':\n\tprint(f(3))\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "1234567890 3.14159 1,000,000 2024-11-25 0x7fff",
    "I'm sure they'll say it's fine, WE'LL see; don't you think? 'quoted'",
    "Ünïcödé àccents: café, naïve, façade, Zürich; decomposed: cafe\u0301",
    "中文：你好，世界！这是一个测试。",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 문장입니다.",
    "Русский текст: съешь же ещё этих мягких французских булок.",
    "العربية: مرحبا بالعالم",
    "हिन्दी पाठ",
    "Ελληνικά γράμματα",
    "emoji: 👋🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🤖",
    "mixed 123abc ABC123 a1b2c3 ...!!! ???",
    "<s>inside</s> text",
    "<|begin_of_text|>Hi<|eot_id|>",
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
    "<think>reasoning</think> answer",
    "<|fim_prefix|>def f():<|fim_suffix|>\n    return 1<|fim_middle|>",
    "<|repo_name|>wick<|file_sep|>src/main.cpp",
    "a" * 300,
    "🙂" * 20,
    "   \n  \n\t\n",
    "The quick brown fox jumps over the lazy dog. " * 5,
]


# The shape of the (weightless) model a vocab-only file describes.
TINY = dict(context=2048, dim=64, layers=1, hidden=128, heads=4, kv_heads=4)


def vocab_writer(name, src, kind, pre, out, shape=TINY, arch="llama", extra=(), rope_dims=None):
    """A GGUFWriter for `out` holding the metadata of a model of `shape` (general.architecture
    `arch`: "llama", or another that llama.cpp reads with the same keys, "qwen3") and the
    vocabulary of tokenizer.json in `src`, with the control tokens `extra` after it (and rope over
    `rope_dims` features of each head where given, else all); the caller adds
    tensors, if any, and writes it (write_gguf)."""
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    cfg = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    model = tok["model"]
    added = {t["id"]: t for t in tok["added_tokens"]}
    n = max(list(model["vocab"].values()) + list(added)) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for text, i in model["vocab"].items():
        tokens[i] = text
        types[i] = gguf.TokenType.NORMAL
        if kind == "llama" and len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
            types[i] = gguf.TokenType.BYTE
    for i, t in added.items():
        tokens[i] = t["content"]
        types[i] = gguf.TokenType.CONTROL if t["special"] else gguf.TokenType.USER_DEFINED
        if kind == "llama" and t["content"] == "<unk>":
            types[i] = gguf.TokenType.UNKNOWN
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    for text in extra:
        tokens.append(text)
        types.append(gguf.TokenType.CONTROL)
    n = len(tokens)
    w = gguf.GGUFWriter(out, arch)
    w.add_name(name)
    w.add_context_length(shape["context"])
    w.add_embedding_length(shape["dim"])
    w.add_block_count(shape["layers"])
    w.add_feed_forward_length(shape["hidden"])
    w.add_head_count(shape["heads"])
    w.add_head_count_kv(shape["kv_heads"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(rope_dims or shape["dim"] // shape["heads"])
    w.add_vocab_size(n)
    w.add_tokenizer_model(kind)
    if kind == "gpt2":
        w.add_tokenizer_pre(pre)
        w.add_token_merges(merges)
    else:
        rank = {m.replace(" ", "", 1): r for r, m in enumerate(merges)}
        w.add_token_scores([-float(rank[t]) - 1.0 if t in rank else 0.0 for t in tokens])
        # A space before the text where the normalizer prepends one (Llama 2's), none where it
        # does not (Gemma's), as llama.cpp's converter writes it.
        norm = tok.get("normalizer") or {}
        steps = norm.get("normalizers", [norm]) if norm.get("type") == "Sequence" else [norm]
        w.add_add_space_prefix(any(step.get("type") == "Prepend" for step in steps))
    w.add_token_list(tokens)
    w.add_token_types(types)

    def token_id(entry):
        text = entry["content"] if isinstance(entry, dict) else entry
        ids = [i for i, t in enumerate(tokens) if t == text]
        return ids[0] if ids else None

    bos = token_id(cfg.get("bos_token")) if cfg.get("bos_token") else None
    eos = token_id(cfg.get("eos_token")) if cfg.get("eos_token") else None
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if kind == "llama":
        w.add_unk_token_id(token_id("<unk>"))
    add_bos = cfg.get("add_bos_token")
    w.add_add_bos_token(bool(add_bos) if add_bos is not None else bos is not None)
    return w, n


def write_gguf(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def vocab_gguf(name, src, kind, pre, out):
    write_gguf(vocab_writer(name, src, kind, pre, out)[0])


def id_lines(output):
    """Every list of ids the output prints, in order."""
    return [[int(x) for x in l.strip()[1:-1].split(",") if x.strip()] for l in output.splitlines() if l.startswith("[")]


def ids_from(argv):
    lines = id_lines(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
    if not lines:
        raise RuntimeError("no id list from: " + " ".join(argv))
    return lines[-1]


def ids_of_each(argv, count):
    """One `wick tokenize` of several --file: each file's ids."""
    result = subprocess.run(argv, capture_output=True, text=True, check=True)
    lines = id_lines(result.stdout)
    if len(lines) != count:
        raise RuntimeError(f"{len(lines)} id lists for {count} files from: " + result.stdout[-500:])
    return lines


def main():
    wick, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    # llama-tokenize takes one text a process; wick reads a vocabulary once for every text of the
    # corpus (one process per vocabulary, source and parse_special: reading a 262k-token
    # tokenizer.json takes longer than tokenizing the corpus). As many processes run at a time as
    # there are cores (WICK_CHECK_JOBS), and the results are compared in the corpus's order.
    jobs = int(os.environ.get("WICK_CHECK_JOBS", "0")) or os.cpu_count() or 1
    runs = []  # (vocabulary, text index, text, parse_special, llama-tokenize's argv)
    ours = {}  # (vocabulary, parse_special) -> [(source, wick's argv over every text)]
    for spec in sys.argv[3:]:
        name, rest = spec.split("=", 1)
        src, kind, pre = (rest.split(":") + ["", ""])[:3]
        path = os.path.join(out, name + ".gguf")
        vocab_gguf(name, src, kind or "gpt2", pre, path)
        files = []
        for i, text in enumerate(CORPUS):
            tf = os.path.join(out, f"{name}-{i}.txt")
            with open(tf, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            files += ["--file", tf]
            for special in (False, True):
                llama = ["llama-tokenize", "-m", path, "-f", tf, "--ids", "--log-disable"]
                if not special:
                    llama.append("--no-parse-special")
                runs.append((name, i, text, special, llama))
        for special in (False, True):
            parse = ["--parse-special"] if special else []
            # wick reads the GGUF file, and the tokenizer.json it was made from.
            ours[(name, special)] = [(source, [wick, "tokenize", "--model", model] + parse + files)
                                     for source, model in (("gguf", path), ("json", src))]
    total = failed = 0
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        theirs = [(name, i, text, special, pool.submit(ids_from, llama)) for name, i, text, special, llama in runs]
        wicks = {key: [(source, pool.submit(ids_of_each, argv, len(CORPUS))) for source, argv in argvs]
                 for key, argvs in ours.items()}
        for name, i, text, special, want in theirs:
            want = want.result()
            for source, got in wicks[(name, special)]:
                got = got.result()[i]
                total += 1
                if got != want:
                    failed += 1
                    print(f"{name} ({source}): text {i} {text[:40]!r} (parse_special={special}):\n"
                          f"  llama.cpp {want[:24]}\n  wick      {got[:24]}")
    print(f"tokenizer check: {total} tokenizations, {total - failed} equal, {failed} differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
