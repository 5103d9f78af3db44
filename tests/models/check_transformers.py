#!/usr/bin/env python3
"""wick's model runner against transformers, on checkpoints that transformers writes.

For LlamaForCausalLM (plain, and with Llama 3.1's "llama3" rope scaling), MistralForCausalLM (a
sliding window shorter than the sequence), Qwen2ForCausalLM (q/k/v biases, tied embeddings),
Qwen3ForCausalLM (q and k RMS-normed per head, a head size other than width / heads),
Phi3ForCausalLM (q, k and v as one weight, gate and up as one, a sliding window of 16; again with
rope over half of each head; as Phi-4-mini, rope over 3/4 of each head with LongRoPE's long
factors; and with LongRoPE's short factors and its default attention factor),
Qwen3MoeForCausalLM (8 experts of their own width, 2 per token, their weights renormalized, and
again without: norm_topk_prob false), MixtralForCausalLM (4 experts, 2 per token) and
Gemma3ForCausalLM (a local and a global layer with their own rope, linear scaling, a window of 8,
query_pre_attn_scalar; again with six layers in the default pattern, an untied head; the norms,
which scale by 1 + weight, random) and Gemma2ForCausalLM (soft-capped scores and logits),
each with random weights (seeded, initializer_range 0.2 so that the logits are far from ties) saved
by save_pretrained as safetensors, and a random prompt of 24 tokens:
  - the logits of the prompt from transformers and from wick (tests/models/model_logits, reading
    the checkpoint directory) must agree within 2e-4 of the largest logit, in f32;
  - greedy decoding of 64 tokens must give the same ids.
Both run on the CPU and, where CUDA is present, on the GPU (transformers there too). Needs torch,
transformers and safetensors (the GPU machine has them).

usage: check_transformers.py MODEL_LOGITS OUT_DIR
"""
import os
import subprocess
import sys

import torch
from safetensors.numpy import load_file, save_file
from transformers import (Gemma2Config, Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, MixtralConfig, MixtralForCausalLM, Phi3Config, Phi3ForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig,
                          Qwen3MoeForCausalLM)

PROMPT, GREEDY, TOLERANCE = 24, 64, 2e-4
BASE = dict(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
            num_key_value_heads=2, max_position_embeddings=512, rms_norm_eps=1e-5, initializer_range=0.2,
            bos_token_id=None, eos_token_id=None, pad_token_id=None)
CASES = [
    ("llama", LlamaConfig, LlamaForCausalLM, dict(rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    ("llama3.1", LlamaConfig, LlamaForCausalLM,
     dict(rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=8.0, low_freq_factor=1.0,
                               high_freq_factor=4.0, original_max_position_embeddings=64))),
    ("mistral", MistralConfig, MistralForCausalLM,
     dict(sliding_window=16, rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    ("qwen2", Qwen2Config, Qwen2ForCausalLM,
     dict(tie_word_embeddings=True, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    ("qwen3", Qwen3Config, Qwen3ForCausalLM,
     dict(head_dim=64, tie_word_embeddings=False, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    ("phi3", Phi3Config, Phi3ForCausalLM,
     dict(sliding_window=16, rope_parameters=dict(rope_type="default", rope_theta=10000.0))),
    ("phi3-partial", Phi3Config, Phi3ForCausalLM,
     dict(rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5))),
    # transformers turns to the long factors for every position of a forward pass longer than
    # original_max_position_embeddings, and its generate drops the cache where a sequence first
    # passes it (the token there then sees only itself); wick turns each position past it. Two runs
    # that both agree on: the long factors from position 1 on (position 0's rotation is 0 either
    # way), and the short ones with the default attention factor within 256 positions.
    ("phi4-longrope", Phi3Config, Phi3ForCausalLM,
     dict(original_max_position_embeddings=1,
          rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, partial_rotary_factor=0.75,
                               original_max_position_embeddings=1, factor=8.0, attention_factor=1.2,
                               short_factor=[1.0 + 0.05 * i for i in range(12)],
                               long_factor=[1.0 + 0.6 * i for i in range(12)]))),
    ("phi3-longrope", Phi3Config, Phi3ForCausalLM,
     dict(original_max_position_embeddings=256,
          rope_parameters=dict(rope_type="longrope", rope_theta=10000.0, original_max_position_embeddings=256,
                               short_factor=[1.0 + 0.1 * i for i in range(16)],
                               long_factor=[2.0 + 0.6 * i for i in range(16)]))),
    ("qwen3_moe", Qwen3MoeConfig, Qwen3MoeForCausalLM,
     dict(head_dim=64, moe_intermediate_size=128, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
          rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    ("qwen3_moe-softmax", Qwen3MoeConfig, Qwen3MoeForCausalLM,
     dict(moe_intermediate_size=128, num_experts=8, num_experts_per_tok=3, norm_topk_prob=False,
          rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    ("mixtral", MixtralConfig, MixtralForCausalLM,
     dict(num_local_experts=4, num_experts_per_tok=2, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    # Gemma 3: a local layer (a window of 8, its own rope base) and a global one (linear scaling),
    # q k^T scaled by query_pre_attn_scalar 24 (not the head size), the norms (1 + weight) random.
    ("gemma3", Gemma3TextConfig, Gemma3ForCausalLM,
     dict(head_dim=32, query_pre_attn_scalar=24, sliding_window=8, rms_norm_eps=1e-6,
          layer_types=["sliding_attention", "full_attention"],
          rope_parameters={"full_attention": dict(rope_type="linear", rope_theta=1000000.0, factor=4.0),
                           "sliding_attention": dict(rope_type="default", rope_theta=10000.0)},
          _random_norms=True)),
    # Gemma 2: local and global layers in turn, soft-capped scores and logits (caps small enough to
    # matter), query_pre_attn_scalar; eager attention, the implementation that caps.
    ("gemma2", Gemma2Config, Gemma2ForCausalLM,
     dict(head_dim=32, query_pre_attn_scalar=24, sliding_window=8, attn_logit_softcapping=5.0,
          final_logit_softcapping=8.0, rms_norm_eps=1e-6, attn_implementation="eager", _random_norms=True)),
    # Six layers in transformers' default pattern (five local, one global), an untied head.
    ("gemma3-six", Gemma3TextConfig, Gemma3ForCausalLM,
     dict(num_hidden_layers=6, head_dim=64, num_attention_heads=4, num_key_value_heads=1, sliding_window=16,
          tie_word_embeddings=False, _random_norms=True)),
]


def transformers_run(model, ids, device):
    model = model.to(device)
    x = ids.to(device)
    with torch.no_grad():
        logits = model(x).logits.float().cpu().numpy()
        out = model.generate(x, max_new_tokens=GREEDY, do_sample=False, pad_token_id=0)
    return logits, out[0, PROMPT:].cpu().numpy()


def wick_run(tool, path, tokens_file, out_dir, device):
    out = os.path.join(out_dir, f"wick-{device.replace(':', '')}.safetensors")
    subprocess.run([tool, path, tokens_file, out, device, "f32"], check=True)
    r = load_file(out)
    return r["logits"], r["greedy"]


def main():
    tool, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    devices = ["cpu"] + (["cuda:0"] if torch.cuda.is_available() else [])
    runs = failed = 0
    for name, config_cls, model_cls, extra in CASES:
        torch.manual_seed(0)
        extra = dict(extra)
        random_norms = extra.pop("_random_norms", False)
        config = config_cls(**{**BASE, **extra})
        model = model_cls(config).float().eval()
        if random_norms:  # Gemma's norms start at 0 (a scale of 1 + 0): made to matter
            with torch.no_grad():
                for key, p in model.named_parameters():
                    if "norm" in key:
                        p.normal_(0.0, 0.5)
        path = os.path.join(out, name)
        model.save_pretrained(path)
        ids = torch.randint(0, BASE["vocab_size"], (1, PROMPT), generator=torch.Generator().manual_seed(1))
        tokens_file = os.path.join(path, "prompt.safetensors")
        save_file({"tokens": ids.numpy()}, tokens_file, metadata={"greedy": str(GREEDY)})
        for device in devices:
            want_logits, want_ids = transformers_run(model, ids, device)
            got_logits, got_ids = wick_run(tool, path, tokens_file, out, device)
            diff = float(abs(got_logits - want_logits).max()) / float(abs(want_logits).max())
            same = int((got_ids == want_ids).sum()) if got_ids.shape == want_ids.shape else 0
            ok = diff <= TOLERANCE and same == GREEDY
            runs += 1
            failed += not ok
            print(f"{name:17s} {device:7s} logits max difference {diff:.2e} of the largest (tolerance {TOLERANCE:.0e}); "
                  f"greedy: {same}/{GREEDY} ids equal  {'ok' if ok else 'DIFFER'}")
            if same != GREEDY:
                print(f"  transformers {want_ids.tolist()}\n  wick         {got_ids.tolist()}")
        model.to("cpu")
    print(f"transformers check (transformers {__import__('transformers').__version__}): "
          f"{runs} runs, {runs - failed} agree, {failed} differ ({', '.join(name for name, *_ in CASES)})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
