#!/usr/bin/env python3
"""Makes models/tiny.gguf, the model `wick generate` runs when given no --model.

It is trained on a text that every Debian machine has (the GPL-3, from base-files):
  - a SentencePiece-style vocabulary of 1024 tokens: <unk>, <s>, </s>, the 256 byte tokens, the
    text's characters, and pieces learned by byte-pair merging within words (a piece's score is
    minus its merge's rank, so that merging by score replays the training's merges);
  - a one-layer Llama whose output is the text's bigram model over those tokens, at rank 256:
    the log-probabilities of the next token (each row centred) factored by SVD, the left factor
    as the embedding and the head fitted by least squares to the embedding after the RMS norm.
    The layer's attention and MLP are random and small: they run (every op of a Llama step does)
    but barely move the logits.
It writes F16 weights, deterministically (fixed seed), with python3-gguf and numpy, and a chat
template (CHAT_TEMPLATE).

usage: make_tiny_model.py TEXT OUT.gguf
  models/tiny.gguf was made, where python3-gguf is (the ROCm chroot has it), by
  scripts/rocm-env run python3 scripts/make_tiny_model.py /usr/share/common-licenses/GPL-3 models/tiny.gguf
"""
import collections
import re
import sys

import gguf
import numpy as np

VOCAB, DIM = 1024, 256
LAYERS, HEADS, KV_HEADS, HIDDEN, CONTEXT = 1, 4, 2, 512, 2048
SPACE = "\u2581"
# A chat format for `wick serve` and `wick generate --chat`: a system text, then "Q: ..." and "A: ..."
# lines (the GPL's bigrams answer nothing; the format is what is tested).
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ message['content'] | trim }}\n"
    '\n'
    "{% elif message['role'] == 'user' %}Q: {{ message['content'] | trim }}\n"
    "{% elif message['role'] == 'assistant' %}A: {{ message['content'] | trim }}{{ eos_token }}\n"
    "{% else %}{{ raise_exception('wick-tiny knows the roles system, user and assistant, not ' + message['role']) }}{% endif %}{% endfor %}{% if add_generation_prompt %}A:{% endif %}")


def chunks(text):
    """`text` as the SentencePiece style sees it (U+2581 first and for every space), cut where
    merges never cross: a run of U+2581 with the word after it, or a newline."""
    return re.findall(f"{SPACE}*[^{SPACE}\n]+|{SPACE}+|\n", SPACE + text.replace(" ", SPACE))


def learn_pieces(text, n_pieces):
    """Byte-pair merges within the chunks of `text`; returns its characters and the merged
    pieces in merge order."""
    words = collections.Counter(chunks(text))
    chars = sorted({c for w in words for c in w})
    seqs = {w: list(w) for w in words}
    merges = []
    while len(merges) < n_pieces - len(chars):
        pairs = collections.Counter()
        for w, n in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[a, b] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(a + b)
        for w in words:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return chars, merges


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    out = sys.argv[2]
    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    chars, merges = learn_pieces(text, VOCAB - len(specials) - len(byte_tokens))
    tokens = specials + byte_tokens + chars + merges
    assert len(tokens) == len(set(tokens)) and len(tokens) <= VOCAB, len(tokens)
    types = ([gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256 +
             [gguf.TokenType.NORMAL] * (len(chars) + len(merges)))
    scores = [0.0] * (len(specials) + len(byte_tokens) + len(chars)) + [-float(r) - 1.0 for r in range(len(merges))]
    n = len(tokens)

    # The training text as tokens, greedily by the merges (as the SentencePiece style encodes it).
    ids = {t: i for i, t in enumerate(tokens)}
    rank = {m: r for r, m in enumerate(merges)}

    def encode_word(word):
        s = list(word)
        while True:
            best = min(((rank.get(a + b, 1 << 30), i) for i, (a, b) in enumerate(zip(s, s[1:]))), default=(1 << 30, 0))
            if best[0] == 1 << 30:
                return [ids[p] for p in s]
            i = best[1]
            s[i:i + 2] = [s[i] + s[i + 1]]

    seq = [1]
    for chunk in chunks(text):
        seq += encode_word(chunk)

    # The bigram model, smoothed, as log-probabilities.
    counts = np.full((n, n), 0.01, dtype=np.float64)
    for a, b in zip(seq, seq[1:]):
        counts[a, b] += 1.0
    counts[:, :len(specials) + len(byte_tokens)] = 1e-6  # never predict <unk>, <s>, </s> or raw bytes
    logp = np.log(counts / counts.sum(axis=1, keepdims=True))

    dim = DIM
    head_dim = dim // HEADS
    rng = np.random.default_rng(2026)
    f16 = np.float16
    centred = logp - logp.mean(axis=1, keepdims=True)  # softmax does not see a row's offset
    # Each context weighted by how often it occurs, so that the frequent ones fit best.
    weight = np.sqrt(np.bincount(seq, minlength=n) + 1.0)[:, None]
    u, s, _ = np.linalg.svd(centred * weight)
    embed = u[:, :dim] * np.sqrt(s[:dim]) / weight
    normed = embed / np.sqrt((embed ** 2).mean(axis=1, keepdims=True) + 1e-5)
    head = np.linalg.lstsq(normed * weight, centred * weight, rcond=None)[0].T  # (next token, dim)
    w = gguf.GGUFWriter(out, "llama")
    w.add_name("wick-tiny (bigrams of the GPL-3)")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(dim)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(HIDDEN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)
    w.add_vocab_size(n)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(True)
    w.add_chat_template(CHAT_TEMPLATE)

    def small(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(f16)

    w.add_tensor("token_embd.weight", (normed * 4).astype(f16))  # rms 4: the layer barely moves it
    for i in range(LAYERS):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(dim, dtype=np.float32))
        w.add_tensor(p + "attn_q.weight", small((HEADS * head_dim, dim), 0.02))
        w.add_tensor(p + "attn_k.weight", small((KV_HEADS * head_dim, dim), 0.02))
        w.add_tensor(p + "attn_v.weight", small((KV_HEADS * head_dim, dim), 0.02))
        w.add_tensor(p + "attn_output.weight", small((dim, HEADS * head_dim), 0.001))
        w.add_tensor(p + "ffn_norm.weight", np.ones(dim, dtype=np.float32))
        w.add_tensor(p + "ffn_gate.weight", small((HIDDEN, dim), 0.02))
        w.add_tensor(p + "ffn_up.weight", small((HIDDEN, dim), 0.02))
        w.add_tensor(p + "ffn_down.weight", small((dim, HIDDEN), 0.001))
    w.add_tensor("output_norm.weight", np.ones(dim, dtype=np.float32))
    w.add_tensor("output.weight", head.astype(f16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{out}: {n} tokens ({len(merges)} learned pieces), {len(seq)} training tokens")


if __name__ == "__main__":
    main()
