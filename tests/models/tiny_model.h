// Tiny random Llama-family models written as GGUF files by GgufWriter, for the model tests: the
// shape, the linear layers' format, a tensor left out.
#pragma once

#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "wick/io.h"
#include "wick/quant.h"

namespace wick::test {

struct Tiny {
  std::string arch = "llama";
  int64_t vocab = 64, dim = 64, hidden = 96, layers = 2, heads = 4, kv_heads = 2, context = 128;
  bool tied = false;
  // A mixture of experts in place of each MLP ("llama": Mixtral's layout; "qwen3moe": Qwen3-MoE's,
  // which names the experts' width apart, and whose dense width is then written as 3 * hidden).
  int64_t experts = 0, experts_used = 0;
  bool expert_tensors = false;        // one tensor per expert (blk.N.ffn_gate.E), as older converters wrote
  // attention.sliding_window and attention.sliding_window_pattern, written where above 0 ("gemma2"
  // and "gemma3": norms after attention and the MLP, no head of its own; Gemma 3's q and k normed per
  // head; Gemma 2's scores and logits soft-capped at 2 and 3).
  int64_t window = 0, pattern = 0;
  std::optional<quant::QType> qtype;  // the linear layers' format; dense otherwise, in `dense`
  DType dense = DType::F32;
  std::string drop;                   // a tensor left out
  std::string ints;                   // a tensor written as i32
};

inline io::GgufWriter tiny_model(const Tiny& m) {
  io::GgufWriter w;
  const std::string a = m.arch + ".";
  w.set("general.architecture", io::GgufValue::string(m.arch));
  w.set(a + "embedding_length", io::GgufValue::u32(static_cast<uint32_t>(m.dim)));
  w.set(a + "feed_forward_length",
        io::GgufValue::u32(static_cast<uint32_t>(m.arch == "qwen3moe" ? 3 * m.hidden : m.hidden)));
  if (m.experts > 0) {
    w.set(a + "expert_count", io::GgufValue::u32(static_cast<uint32_t>(m.experts)));
    w.set(a + "expert_used_count", io::GgufValue::u32(static_cast<uint32_t>(m.experts_used)));
    if (m.arch == "qwen3moe")
      w.set(a + "expert_feed_forward_length", io::GgufValue::u32(static_cast<uint32_t>(m.hidden)));
  }
  w.set(a + "block_count", io::GgufValue::u32(static_cast<uint32_t>(m.layers)));
  w.set(a + "attention.head_count", io::GgufValue::u32(static_cast<uint32_t>(m.heads)));
  w.set(a + "attention.head_count_kv", io::GgufValue::u32(static_cast<uint32_t>(m.kv_heads)));
  w.set(a + "context_length", io::GgufValue::u32(static_cast<uint32_t>(m.context)));
  w.set(a + "attention.layer_norm_rms_epsilon", io::GgufValue::f32(1e-5f));
  w.set(a + "rope.freq_base", io::GgufValue::f32(10000.f));
  w.set(a + "vocab_size", io::GgufValue::u32(static_cast<uint32_t>(m.vocab)));
  if (m.window > 0) w.set(a + "attention.sliding_window", io::GgufValue::u32(static_cast<uint32_t>(m.window)));
  if (m.pattern > 0)
    w.set(a + "attention.sliding_window_pattern", io::GgufValue::u32(static_cast<uint32_t>(m.pattern)));
  const bool gemma = m.arch == "gemma2" || m.arch == "gemma3";
  if (m.arch == "gemma2") {
    w.set(a + "attn_logit_softcapping", io::GgufValue::f32(2.f));  // small: the caps matter
    w.set(a + "final_logit_softcapping", io::GgufValue::f32(3.f));
  }
  std::mt19937 rng(7);
  auto add = [&](const std::string& name, Shape shape, float scale, bool linear) {
    if (name == m.drop) return;
    std::normal_distribution<float> normal(0.f, scale);
    std::vector<float> v(static_cast<size_t>(shape.numel()));
    for (float& x : v) x = normal(rng);
    const Tensor t = Tensor::from_vector(v, shape);
    if (name == m.ints)
      w.add(name, (t * 100.f).to_dtype(DType::I32));
    else if (linear && m.qtype)
      w.add(name, quant::quantize(t.reshape({shape.numel() / shape.back(), shape.back()}), *m.qtype), shape);
    else
      w.add(name, linear ? t.to_dtype(m.dense) : t);
  };
  auto norm = [&](const std::string& name) {
    std::vector<float> v(static_cast<size_t>(m.dim));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 1.f + 0.1f * static_cast<float>(i % 5);
    if (name != m.drop) w.add(name, Tensor::from_vector(v, {m.dim}).to_dtype(name == m.ints ? DType::I32 : DType::F32));
  };
  const int64_t hd = m.dim / m.heads;
  add("token_embd.weight", {m.vocab, m.dim}, 1.f, true);
  for (int64_t i = 0; i < m.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm.weight");
    if (m.arch == "phi3") {  // q, k and v as one weight
      add(p + "attn_qkv.weight", {(m.heads + 2 * m.kv_heads) * hd, m.dim}, 0.15f, true);
    } else {
      add(p + "attn_q.weight", {m.heads * hd, m.dim}, 0.15f, true);
      add(p + "attn_k.weight", {m.kv_heads * hd, m.dim}, 0.15f, true);
      add(p + "attn_v.weight", {m.kv_heads * hd, m.dim}, 0.15f, true);
    }
    if (m.arch == "qwen2") {
      add(p + "attn_q.bias", {m.heads * hd}, 0.1f, false);
      add(p + "attn_k.bias", {m.kv_heads * hd}, 0.1f, false);
      add(p + "attn_v.bias", {m.kv_heads * hd}, 0.1f, false);
    }
    if (m.arch == "qwen3" || m.arch == "qwen3moe" || m.arch == "gemma3") {  // q and k heads RMS-normed before rope
      for (const char* x : {"q", "k"}) {
        std::vector<float> v(static_cast<size_t>(hd));
        for (size_t j = 0; j < v.size(); ++j) v[j] = 0.8f + 0.05f * static_cast<float>((j + (*x == 'k' ? 3 : 0)) % 7);
        w.add(p + "attn_" + x + "_norm.weight", Tensor::from_vector(v, {hd}));
      }
    }
    add(p + "attn_output.weight", {m.dim, m.heads * hd}, 0.15f, true);
    if (gemma) norm(p + "post_attention_norm.weight");
    norm(p + "ffn_norm.weight");
    if (m.experts > 0) {  // the router (dense, as llama.cpp keeps it), then the experts stacked
      add(p + "ffn_gate_inp.weight", {m.experts, m.dim}, 0.3f, false);
      const std::tuple<const char*, int64_t, int64_t, float> parts[] = {{"ffn_gate", m.hidden, m.dim, 0.15f},
                                                                        {"ffn_up", m.hidden, m.dim, 0.15f},
                                                                        {"ffn_down", m.dim, m.hidden, 0.12f}};
      for (const auto& [part, rows, cols, scale] : parts) {
        if (!m.expert_tensors) {
          add(p + part + "_exps.weight", {m.experts, rows, cols}, scale, true);
          continue;
        }
        // The same draws as the stacked tensor's, expert by expert.
        std::normal_distribution<float> normal(0.f, scale);
        std::vector<float> v(static_cast<size_t>(m.experts * rows * cols));
        for (float& x : v) x = normal(rng);
        for (int64_t e = 0; e < m.experts; ++e) {
          const Tensor t = Tensor::from_vector(
              std::vector<float>(v.begin() + e * rows * cols, v.begin() + (e + 1) * rows * cols), {rows, cols});
          const std::string name = p + part + "." + std::to_string(e) + ".weight";
          if (m.qtype)
            w.add(name, quant::quantize(t, *m.qtype));
          else
            w.add(name, t.to_dtype(m.dense));
        }
      }
      continue;
    }
    if (m.arch == "phi3") {  // gate and up as one weight, gate's rows first
      add(p + "ffn_up.weight", {2 * m.hidden, m.dim}, 0.15f, true);
    } else {
      add(p + "ffn_gate.weight", {m.hidden, m.dim}, 0.15f, true);
      add(p + "ffn_up.weight", {m.hidden, m.dim}, 0.15f, true);
    }
    add(p + "ffn_down.weight", {m.dim, m.hidden}, 0.12f, true);
    if (gemma) norm(p + "post_ffw_norm.weight");
  }
  norm("output_norm.weight");
  if (!m.tied && !gemma) add("output.weight", {m.vocab, m.dim}, 0.15f, true);
  return w;
}

}  // namespace wick::test
