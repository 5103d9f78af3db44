// The Llama-family decoder (include/wick/models/llama.h's LlamaModel): its weights loaded from a
// file or made at random, split over ranks, and the forward pass: RMS norm, rotary positions,
// grouped-query attention over a KV cache per layer, a SwiGLU MLP.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "blocks/weights.h"
#include "wick/models/llama.h"
#include "wick/ops.h"

namespace wick::models {

void LlamaModel::split_over(const dist::Communicator& comm, std::optional<quant::QType> down_format) {
  const LlamaConfig& c = config_;
  heads_ = c.heads;
  kv_heads_ = c.kv_heads;
  if (!comm.defined()) return;
  if (comm.device() != device_)
    throw DeviceError(detail::str_cat("llama: a model on ", device_, " split over a communicator on ", comm.device()));
  comm_ = comm;
  rank_ = comm.rank();
  ranks_ = comm.size();
  const std::pair<const char*, int64_t> counts[] = {
      {"attention heads", c.heads}, {"KV heads", c.kv_heads}, {"MLP width", c.hidden}, {"vocabulary", c.vocab}};
  for (const auto& [what, n] : counts)
    if (n % ranks_ != 0)
      throw NotSupportedError(detail::str_cat("llama: tensor parallel over ", ranks_, " ranks: the ", n, " ", what,
                                              " do not divide in ", ranks_, " equal parts"));
  if (down_format && (c.hidden / ranks_) % quant::block_values(*down_format) != 0)
    throw NotSupportedError(detail::str_cat("llama: tensor parallel over ", ranks_, " ranks: ", c.hidden / ranks_,
                                            " columns of ffn_down per rank are not whole ", *down_format, " blocks"));
  heads_ = c.heads / ranks_;
  kv_heads_ = c.kv_heads / ranks_;
}

LlamaModel LlamaModel::load(const LlamaConfig& c, Weights& w, Device device, DType dtype,
                            const dist::Communicator& comm, WeightMemory memory) {
  w.copy_on_cpu = memory == WeightMemory::Copy;
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw DTypeError(detail::str_cat("llama: activations in ", dtype, " (f32, f16 or bf16)"));
  LlamaModel m;
  m.config_ = c;
  m.device_ = device;
  m.dtype_ = dtype;
  std::optional<quant::QType> down_format;
  if (comm.defined() && c.layers > 0 && w.shape("blk.0.ffn_down.weight") && w.quantized("blk.0.ffn_down.weight"))
    down_format = w.blocks("blk.0.ffn_down.weight", Device::cpu()).qtype();
  m.split_over(comm, down_format);
  const Part whole, rows = m.part(0), cols = m.part(1);
  const bool split = m.ranks_ > 1;
  const bool bias = c.qkv_bias;
  m.embedding_ = w.linear("token_embd", c.vocab, c.dim, false, device, dtype, split ? rows : whole);
  // An RMS norm's weight, the configuration's offset added in f32 (a Gemma checkpoint's 1 + w).
  auto norm = [&](const std::string& name, int64_t n) {
    if (c.norm_offset == 0) return w.dense(name, Shape({n}), device, dtype);
    return w.dense(name, Shape({n}), device, DType::F32).affine(1, c.norm_offset).to_dtype(dtype);
  };
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = detail::str_cat("blk.", i, ".");
    const Part r = split ? rows : whole, k = split ? cols : whole;
    Layer l;
    l.attn_norm = norm(p + "attn_norm.weight", c.dim);
    // Phi-3 stores q, k and v as the rows of one weight (attn_qkv), and gate and up as one: in a
    // GGUF file as ffn_up of twice the MLP's width, in a checkpoint as gate_up_proj.
    if (w.shape(p + "attn_qkv.weight"))
      l.qkv = w.fused(p + "attn_qkv", {c.heads * c.head_dim, c.kv_heads * c.head_dim, c.kv_heads * c.head_dim}, c.dim,
                      device, dtype, r);
    else
      l.qkv = w.group({w.linear(p + "attn_q", c.heads * c.head_dim, c.dim, bias, device, dtype, r, true),
                       w.linear(p + "attn_k", c.kv_heads * c.head_dim, c.dim, bias, device, dtype, r, true),
                       w.linear(p + "attn_v", c.kv_heads * c.head_dim, c.dim, bias, device, dtype, r, true)});
    if (c.qk_norm) {
      l.q_norm = norm(p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = norm(p + "attn_k_norm.weight", c.head_dim);
    }
    l.o = w.linear(p + "attn_output", c.dim, c.heads * c.head_dim, false, device, dtype, k);
    l.ffn_norm = norm(p + "ffn_norm.weight", c.dim);
    if (c.post_norms) {
      l.post_attn_norm = norm(p + "post_attention_norm.weight", c.dim);
      l.post_ffn_norm = norm(p + "post_ffw_norm.weight", c.dim);
    }
    if (c.experts > 0) {
      // Every rank routes every token (the router whole on each), and holds its part of each expert.
      l.router = w.linear(p + "ffn_gate_inp", c.experts, c.dim, false, device, dtype);
      for (int64_t e = 0; e < c.experts; ++e)
        l.experts.push_back(w.expert_mlp(p, e, c.experts, c.hidden, c.dim, device, dtype, r, k));
      stack_experts(l, w.copy_on_cpu);
    } else if (w.shape(p + "ffn_gate_up.weight"))
      l.gate_up = w.fused(p + "ffn_gate_up", {c.hidden, c.hidden}, c.dim, device, dtype, r);
    else if (!w.shape(p + "ffn_gate.weight") && w.shape(p + "ffn_up.weight") == Shape({2 * c.hidden, c.dim}))
      l.gate_up = w.fused(p + "ffn_up", {c.hidden, c.hidden}, c.dim, device, dtype, r);
    else
      l.gate_up = w.group({w.linear(p + "ffn_gate", c.hidden, c.dim, false, device, dtype, r, true),
                           w.linear(p + "ffn_up", c.hidden, c.dim, false, device, dtype, r, true)});
    if (c.experts == 0) l.down = w.linear(p + "ffn_down", c.dim, c.hidden, false, device, dtype, k);
    m.layers_.push_back(std::move(l));
  }
  m.output_norm_ = norm("output_norm.weight", c.dim);
  // Tied embeddings: no head of its own, the embedding serves.
  m.output_ = w.shape("output.weight") ? w.linear("output", c.vocab, c.dim, false, device, dtype, split ? rows : whole)
                                       : m.embedding_;

  // GGUF files carry LongRoPE's factors as tensors (one per rotated pair each).
  if (w.shape("rope_factors_long.weight") || w.shape("rope_factors_short.weight")) {
    LlamaConfig::LongRope& l = m.config_.long_rope;
    for (const auto& [name, to] : {std::pair{"rope_factors_short.weight", &l.short_factor},
                                   std::pair{"rope_factors_long.weight", &l.long_factor}}) {
      const std::vector<float> v =
          w.dense(name, Shape({c.rotated() / 2}), Device::cpu(), DType::F32).to_vector<float>();
      to->assign(v.begin(), v.end());
    }
    if (l.original_context <= 0)
      w.fail("rope_factors_long.weight", "LongRoPE's factors without rope.scaling.original_context_length");
    m.config_.check(w.source());
  }
  m.inv_freq_ = m.config_.inv_freq();
  if (!m.config_.long_rope.short_factor.empty()) m.inv_freq_long_ = m.config_.inv_freq(true);
  m.inv_freq_local_ = m.config_.inv_freq_local();
  // Rope over part of each head, pairing i with i + rotary_dim / 2: q's and k's rows reordered so
  // that those pairs lie at wick's (i, i + head_dim / 2), the features passed as they are between.
  if (c.rotated() < c.head_dim && !c.interleaved_rope)
    for (Layer& l : m.layers_) m.reorder_for_rope(l);
  // GGUF files carry Llama 3.1's scaling as one factor per rotated pair (rope_freqs.weight).
  if (w.shape("rope_freqs.weight")) {
    const std::vector<float> factors =
        w.dense("rope_freqs.weight", Shape({c.head_dim / 2}), Device::cpu(), DType::F32).to_vector<float>();
    for (size_t i = 0; i < factors.size(); ++i) {
      if (!std::isfinite(factors[i]) || factors[i] <= 0)
        w.fail("rope_freqs.weight",
               detail::str_cat("factor ", factors[i], " of pair ", i, " is not finite and positive"));
      m.inv_freq_[i] /= static_cast<double>(factors[i]);
    }
  }
  m.join_qk_norms();
  // Weights read in place from the file's mapping stay as the file lays them out.
  if (w.copy_on_cpu) m.arrange_linears();
  return m;
}

void LlamaModel::join_qk_norms() {
  for (Layer& l : layers_) {
    if (!l.q_norm.defined()) continue;
    const int64_t d = config_.head_dim;
    l.qk_norm = cat(
        {l.q_norm.reshape({1, d}).broadcast_as({heads_, d}), l.k_norm.reshape({1, d}).broadcast_as({kv_heads_, d})}, 0);
  }
}

namespace {

// Rows of l in `order` (i64 on the weight's device): dense rows, whole rows of blocks, the bias's.
Linear rows_in_order(const Linear& l, const Tensor& order) {
  Linear out;
  if (l.dense.defined()) out.dense = l.dense.index_select(order, 0);
  if (l.quantized.defined()) {
    const quant::QTensor q = l.quantized.plain();
    out.quantized = quant::QTensor(q.qtype(), q.rows(), q.cols(), q.bytes().index_select(order, 0));
  }
  if (l.bias.defined()) out.bias = l.bias.index_select(order, 0);
  return out;
}

}  // namespace

void LlamaModel::reorder_for_rope(Layer& l) const {
  const int64_t d = config_.head_dim, h = config_.rotated() / 2, pass = (d - config_.rotated()) / 2;
  // Feature n of a reordered head is feature head[n] of the file's.
  std::vector<int64_t> head(static_cast<size_t>(d));
  for (int64_t i = 0; i < h; ++i) head[static_cast<size_t>(i)] = i, head[static_cast<size_t>(d / 2 + i)] = h + i;
  for (int64_t i = 0; i < pass; ++i)
    head[static_cast<size_t>(h + i)] = 2 * h + i, head[static_cast<size_t>(d / 2 + h + i)] = 2 * h + pass + i;
  // The rows of `heads` heads from row `first` on, reordered, the others in place.
  auto order = [&](int64_t rows, const std::vector<std::pair<int64_t, int64_t>>& spans) {
    std::vector<int64_t> o(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) o[static_cast<size_t>(r)] = r;
    for (const auto& [first, heads] : spans)
      for (int64_t k = 0; k < heads; ++k)
        for (int64_t n = 0; n < d; ++n)
          o[static_cast<size_t>(first + k * d + n)] = first + k * d + head[static_cast<size_t>(n)];
    return o;
  };
  auto reorder = [&](const Linear& w, const std::vector<std::pair<int64_t, int64_t>>& spans) {
    const int64_t rows = w.out_features();
    return rows_in_order(w, Tensor::from_vector(order(rows, spans), {rows}, device_));
  };
  if (l.qkv.weights.size() == 1) {
    l.qkv.weights[0] = reorder(l.qkv.weights[0], {{0, heads_}, {heads_ * d, kv_heads_}});
  } else {
    l.qkv.weights[0] = reorder(l.qkv.weights[0], {{0, heads_}});
    l.qkv.weights[1] = reorder(l.qkv.weights[1], {{0, kv_heads_}});
  }
  const Tensor one = Tensor::from_vector(head, {d}, device_);
  if (l.q_norm.defined()) l.q_norm = l.q_norm.index_select(one, 0);
  if (l.k_norm.defined()) l.k_norm = l.k_norm.index_select(one, 0);
}

void LlamaModel::arrange_linears() {
  const bool tied = output_.quantized.defined() && embedding_.quantized.defined() &&
                    output_.quantized.bytes().storage() == embedding_.quantized.bytes().storage();
  for (Layer& l : layers_) {
    l.qkv = l.qkv.arranged();
    l.o = l.o.arranged();
    if (l.experts.empty()) {
      l.gate_up = l.gate_up.arranged();
      l.down = l.down.arranged();
    }
    if (config_.experts > 0) l.router = l.router.arranged();
    for (Expert& x : l.experts) {
      x.gate_up = x.gate_up.arranged();
      x.down = x.down.arranged();
    }
    // A stack stays one of whole weights where each expert's rows are whole groups of the
    // arrangement.
    if (l.stacked_down.defined() && l.stacked_gate_up.rows() / config_.experts % quant::QTensor::kArrangedRows == 0 &&
        l.stacked_down.rows() / config_.experts % quant::QTensor::kArrangedRows == 0) {
      l.stacked_gate_up = l.stacked_gate_up.arrange();
      l.stacked_down = l.stacked_down.arrange();
    }
  }
  // A tied head is the embedding: arranged once for both (embed() gathers its rows from it).
  output_ = output_.arranged();
  if (tied) embedding_.quantized = output_.quantized;
}

LlamaModel LlamaModel::from_gguf(const io::GgufFile& f, Device device, DType dtype, const dist::Communicator& comm,
                                 WeightMemory memory) {
  GgufWeights weights(f);
  return load(LlamaConfig::from_gguf(f), weights, device, dtype, comm, memory);
}

LlamaModel LlamaModel::open(const std::string& path, Device device, DType dtype, const dist::Communicator& comm,
                            WeightMemory memory) {
  std::error_code ec;  // a path that cannot be looked at is no directory: GgufFile::open names it
  if (std::filesystem::is_directory(path, ec)) return from_checkpoint(path, device, dtype, comm, memory);
  return from_gguf(io::GgufFile::open(path), device, dtype, comm, memory);
}

LlamaModel LlamaModel::from_checkpoint(const std::string& dir, Device device, DType dtype,
                                       const dist::Communicator& comm, WeightMemory memory) {
  return from_checkpoint(LlamaConfig::from_json(dir + "/config.json"), io::SafetensorsCheckpoint::open(dir), device,
                         dtype, comm, memory);
}

LlamaModel LlamaModel::from_checkpoint(const LlamaConfig& config, const io::SafetensorsCheckpoint& checkpoint,
                                       Device device, DType dtype, const dist::Communicator& comm,
                                       WeightMemory memory) {
  CheckpointWeights weights(checkpoint, config.post_norms);
  return load(config, weights, device, dtype, comm, memory);
}

LlamaModel LlamaModel::random(const LlamaConfig& c, Device device, DType dtype, std::optional<quant::QType> weights, uint64_t seed,
                              const dist::Communicator& comm) {
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16)
    throw DTypeError(detail::str_cat("llama: activations in ", dtype, " (f32, f16 or bf16)"));
  c.check("random");
  manual_seed(seed, device);
  manual_seed(seed, Device::cpu());
  LlamaModel m;
  m.config_ = c;
  m.device_ = device;
  m.dtype_ = dtype;
  m.split_over(comm, weights);
  // Every rank draws the whole weight, then keeps its part (dim 0: rows, 1: columns).
  std::map<std::pair<int64_t, int64_t>, quant::QTensor> blocks;  // by (rows, in): drawn once each
  auto linear = [&](int64_t out, int64_t in, bool bias, int dim) {
    Linear l;
    if (weights) {
      // 256 random rows quantized on the CPU, repeated (in every weight of that width): valid
      // blocks at any size, made quickly (a Qwen3-30B-A3B shape has 18,432 expert weights).
      const int64_t rows = std::min<int64_t>(out, 256);
      auto [at, fresh] = blocks.try_emplace({rows, in});
      if (fresh) at->second = quant::quantize(Tensor::rand_normal({rows, in}, 0.0, 0.02), *weights).to_device(device);
      const quant::QTensor& block = at->second;
      std::vector<int64_t> rows_of(static_cast<size_t>(out));
      for (int64_t r = 0; r < out; ++r) rows_of[static_cast<size_t>(r)] = r % rows;
      const Tensor which = Tensor::from_vector(rows_of, {out}, device);
      l.quantized = quant::QTensor(*weights, out, in, block.bytes().index_select(which, 0));
    } else {
      l.dense = Tensor::rand_normal({out, in}, 0.0, 0.02, dtype, device);
    }
    if (bias) l.bias = Tensor::rand_normal({out}, 0.0, 0.02, dtype, device);
    return m.ranks_ > 1 ? l.slice(dim, m.rank_, m.ranks_) : l;
  };
  const bool bias = c.qkv_bias;
  m.embedding_.dense = Tensor::rand_normal({c.vocab, c.dim}, 0.0, 1.0, dtype, device);
  if (m.ranks_ > 1) m.embedding_ = m.embedding_.slice(0, m.rank_, m.ranks_);
  for (int64_t i = 0; i < c.layers; ++i) {
    Layer l;
    l.attn_norm = Tensor::ones({c.dim}, dtype, device);
    l.ffn_norm = Tensor::ones({c.dim}, dtype, device);
    if (c.post_norms) {
      l.post_attn_norm = Tensor::ones({c.dim}, dtype, device);
      l.post_ffn_norm = Tensor::ones({c.dim}, dtype, device);
    }
    if (c.qk_norm) {
      l.q_norm = Tensor::ones({c.head_dim}, dtype, device);
      l.k_norm = Tensor::ones({c.head_dim}, dtype, device);
    }
    l.qkv = LinearGroup::of({linear(c.heads * c.head_dim, c.dim, bias, 0), linear(c.kv_heads * c.head_dim, c.dim, bias, 0),
                             linear(c.kv_heads * c.head_dim, c.dim, bias, 0)});
    l.o = linear(c.dim, c.heads * c.head_dim, false, 1);
    if (c.experts > 0) {
      // The router dense (GGUF files keep it so), N(0, 1): scores far apart, experts chosen apart.
      l.router.dense = Tensor::rand_normal({c.experts, c.dim}, 0.0, 1.0, dtype, device);
      for (int64_t e = 0; e < c.experts; ++e)
        l.experts.push_back({LinearGroup::of({linear(c.hidden, c.dim, false, 0), linear(c.hidden, c.dim, false, 0)}),
                             linear(c.dim, c.hidden, false, 1)});
      stack_experts(l, true);
    } else {
      l.gate_up = LinearGroup::of({linear(c.hidden, c.dim, false, 0), linear(c.hidden, c.dim, false, 0)});
      l.down = linear(c.dim, c.hidden, false, 1);
    }
    m.layers_.push_back(std::move(l));
  }
  m.output_norm_ = Tensor::ones({c.dim}, dtype, device);
  m.output_ = c.tied_embeddings && !weights ? m.embedding_ : linear(c.vocab, c.dim, false, 0);
  m.inv_freq_ = c.inv_freq();
  if (!c.long_rope.short_factor.empty()) m.inv_freq_long_ = c.inv_freq(true);
  m.inv_freq_local_ = c.inv_freq_local();
  m.join_qk_norms();
  m.arrange_linears();
  return m;
}

int64_t LlamaModel::weight_bytes() const {
  int64_t n = output_.bytes() + output_norm_.numel() * dtype_size(output_norm_.dtype());
  for (const Layer& l : layers_) {
    n += (l.attn_norm.numel() + l.ffn_norm.numel()) * dtype_size(l.attn_norm.dtype());
    if (l.post_attn_norm.defined())
      n += (l.post_attn_norm.numel() + l.post_ffn_norm.numel()) * dtype_size(l.post_attn_norm.dtype());
    if (l.q_norm.defined()) n += (l.q_norm.numel() + l.k_norm.numel()) * dtype_size(l.q_norm.dtype());
    n += l.qkv.bytes() + l.o.bytes();
    if (config_.experts == 0) {
      n += l.gate_up.bytes() + l.down.bytes();
    } else {
      // The router, and the share of the experts one token reads.
      int64_t experts = 0;
      for (const Expert& x : l.experts) experts += x.gate_up.bytes() + x.down.bytes();
      if (l.stacked_down.defined()) experts = l.stacked_gate_up.nbytes() + l.stacked_down.nbytes();
      if (l.dense_down.defined())
        experts = (l.dense_gate_up.numel() + l.dense_down.numel()) * dtype_size(l.dense_down.dtype());
      n += l.router.bytes() + experts / config_.experts * config_.experts_used;
    }
  }
  return n;
}

// ---- forward ------------------------------------------------------------------------------------

std::vector<nn::KvCache> LlamaModel::make_cache(int64_t batch, int64_t capacity) const {
  std::vector<nn::KvCache> cache;
  for (int64_t i = 0; i < config_.layers; ++i) cache.emplace_back(batch, kv_heads_, capacity, config_.head_dim, dtype_, device_);
  return cache;
}

LlamaModel::Rope LlamaModel::rope_tables(int64_t from, int64_t t) const {
  std::vector<int32_t> positions(static_cast<size_t>(t));
  for (int64_t p = 0; p < t; ++p) positions[static_cast<size_t>(p)] = static_cast<int32_t>(from + p);
  return rope_tables(positions);
}

LlamaModel::Rope LlamaModel::rope_tables(const std::vector<int32_t>& positions) const {
  const auto half = static_cast<int64_t>(inv_freq_.size()), n = static_cast<int64_t>(positions.size());
  const double scale = config_.long_rope.attention_factor;
  // cos and sin of each position at `rates` (rates_at(p) where null); LongRoPE's factor scales the
  // rotated pairs alone, the others pass as they are.
  auto tables = [&](const std::vector<double>* rates, double factor) -> std::pair<Tensor, Tensor> {
    std::vector<float> c(static_cast<size_t>(n * half)), s(c.size());
    for (int64_t p = 0; p < n; ++p) {
      const int64_t at = positions[static_cast<size_t>(p)];
      const std::vector<double>& r = rates != nullptr ? *rates : rates_at(at);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(at) * r[static_cast<size_t>(i)];
        const double k = i < config_.rotated() / 2 ? factor : 1.0;
        c[static_cast<size_t>(p * half + i)] = static_cast<float>(k * std::cos(angle));
        s[static_cast<size_t>(p * half + i)] = static_cast<float>(k * std::sin(angle));
      }
    }
    return {Tensor::from_vector(c, {n, half}, device_).to_dtype(dtype_),
            Tensor::from_vector(s, {n, half}, device_).to_dtype(dtype_)};
  };
  Rope out;
  std::tie(out.cos, out.sin) = tables(nullptr, scale);
  if (!inv_freq_local_.empty()) std::tie(out.local_cos, out.local_sin) = tables(&inv_freq_local_, 1.0);
  return out;
}

LlamaModel::Rope LlamaModel::Rope::select(const Tensor& at) const {
  Rope out{cos.index_select(at, 0), sin.index_select(at, 0), {}, {}};
  if (local_cos.defined()) out.local_cos = local_cos.index_select(at, 0), out.local_sin = local_sin.index_select(at, 0);
  return out;
}

nn::AttentionOptions LlamaModel::attention_options(int64_t i) const {
  nn::AttentionOptions o;
  o.causal = true;
  o.window = config_.window_of(i);
  if (config_.attention_scale > 0) o.scale = config_.attention_scale;
  o.softcap = config_.attn_softcap;
  return o;
}

Tensor LlamaModel::reduce(const Tensor& x) const {
  if (ranks_ == 1) return x;
  Tensor y = x.contiguous();  // x is a product of this step's own: reduced where it lies
  comm_.all_reduce_(y);
  return y;
}

void LlamaModel::check_tokens(const Tensor& tokens, std::string_view op) const {
  if (tokens.dtype() != DType::I64 && tokens.dtype() != DType::U32 && tokens.dtype() != DType::I32)
    throw DTypeError(detail::str_cat("llama: ", op, ": token ids of ", tokens.dtype(), " (i64, u32 or i32)"));
  if (tokens.numel() == 0) return;
  const std::vector<int64_t> ids =
      tokens.to_device(Device::cpu()).to_dtype(DType::I64).reshape({tokens.numel()}).to_vector<int64_t>();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= config_.vocab)
      throw IndexError(detail::str_cat("llama: ", op, ": token ", ids[i], " (at ", i, " of tokens ", tokens.shape(),
                                       ") is outside the vocabulary of ", config_.vocab));
}

Tensor LlamaModel::embed(const Tensor& tokens) const {
  // i64's and u32's maxima are the gathers' skip sentinel, which would give a token of zeros:
  // every id past the vocabulary becomes `vocab`, which the gather refuses (IndexError).
  Tensor ids = tokens.reshape({tokens.numel()}).to_dtype(DType::I64).minimum(config_.vocab);
  Tensor mine;  // split: 1 where this rank holds the token's row, else 0
  if (ranks_ > 1) {
    const int64_t rows = embedding_.out_features();
    const Tensor local = ids.to_dtype(DType::I64).sub(rows * rank_);
    mine = (local.ge(0) * local.lt(rows)).to_dtype(dtype_).unsqueeze(1);
    ids = local.clamp(0, rows - 1);
  }
  Tensor x;
  if (!embedding_.quantized.defined()) {
    x = embedding_.dense.index_select(ids, 0);
  } else {
    // The rows' blocks, gathered (from an arranged head too, where the embedding is tied), then
    // dequantized: only the rows the tokens use.
    x = quant::dequantize(embedding_.quantized.index_select(ids), dtype_);
  }
  if (ranks_ > 1) x = reduce(x * mine);
  // Gemma's embedding is scaled by sqrt(dim) (in f32, as llama.cpp; transformers rounds the factor
  // to the activations' dtype first).
  return config_.embed_scale ? x.affine(std::sqrt(static_cast<double>(config_.dim)), 0) : x;
}

Tensor LlamaModel::forward(const Tensor& tokens, std::vector<nn::KvCache>& cache, const Tensor& key_mask,
                           bool last_only) const {
  const LlamaConfig& c = config_;
  if (tokens.rank() != 2) throw ShapeError(detail::str_cat("llama: forward: tokens of shape ", tokens.shape(), ", not (batch, t)"));
  if (static_cast<int64_t>(cache.size()) != c.layers)
    throw ShapeError(detail::str_cat("llama: forward: ", cache.size(), " caches for ", c.layers, " layers"));
  const int64_t b = tokens.shape()[0], t = tokens.shape()[1];
  const int64_t from = cache[0].size();
  // Ids on the host are checked here; on a device, embed() turns an unknown one into an IndexError
  // of the gather at the next sync. A split model checks on the host either way: its ranks' gathers
  // would each read an unknown token as another rank's.
  if (tokens.device().is_cpu() || ranks_ > 1) check_tokens(tokens, "forward");
  for (const nn::KvCache& layer : cache)
    if (layer.size() != from) throw ShapeError("llama: forward: the caches do not hold one number of positions");
  if (t > cache[0].capacity() - from)
    throw ShapeError(detail::str_cat("llama: forward: cannot add ", t, " positions to caches holding ", from,
                                     " of their capacity ", cache[0].capacity()));
  const Tensor ids = tokens.to_device(device_);
  Tensor x = embed(ids).reshape({b, t, c.dim});
  const Rope rope = rope_tables(from, t);
  Tensor mask;
  if (key_mask.defined()) {
    const int64_t t_kv = from + t;
    if (key_mask.shape() != Shape({b, t_kv}))
      throw ShapeError(detail::str_cat("llama: forward: key mask of shape ", key_mask.shape(), ", not ", Shape({b, t_kv})));
    mask = key_mask.to_device(device_).to_dtype(dtype_).reshape({b, 1, 1, t_kv});
  }
  // A step of one position (a split model's decoding) goes through rope_write_attention (one
  // kernel on a GPU); longer ones turn q and k, then append: a strided copy into the cache.
  const Tensor at = t == 1 ? Tensor::from_vector(std::vector<int64_t>{from}, {1}, device_) : Tensor();
  Tensor logits = run(
      x,
      [&](size_t i, const Tensor& q, const Tensor& k, const Tensor& v) {
        nn::AttentionOptions attention = attention_options(static_cast<int64_t>(i));
        attention.mask = mask;
        const bool local = c.local_rope(static_cast<int64_t>(i));
        const Tensor &cos = rope.cos_of(local), &sin = rope.sin_of(local);
        if (at.defined())
          return cache[i].rope_write_attention(q, k, v, cos, sin, c.interleaved_rope, at, from + 1, attention);
        auto turn = [&](const Tensor& y) {
          return c.interleaved_rope ? nn::rope_i(y, cos, sin) : nn::rope(y, cos, sin);
        };
        auto [keys, values] = cache[i].append(turn(k), v);
        return nn::scaled_dot_product_attention(turn(q), keys, values, attention);
      },
      last_only);
  if (at.defined())
    for (nn::KvCache& layer : cache) layer.set_size(from + 1);
  return logits;
}

Tensor LlamaModel::run(Tensor x, const Attend& attend, bool last_only, const Tensor& rows) const {
  const LlamaConfig& c = config_;
  const int64_t b = x.shape()[0], t = x.shape()[1];
  // (b, t, heads * head_dim) -> (b, heads, t, head_dim), each head RMS-normed first where the
  // family norms q and k (Qwen3).
  auto heads = [&](const Tensor& y, int64_t n, const Tensor& norm = Tensor()) {
    const Tensor h = y.reshape({b, t, n, c.head_dim});
    return (norm.defined() ? nn::rms_norm(h, norm, c.rms_eps) : h).transpose(1, 2);
  };
  // Each residual add is fused with the norm after it: the feed-forward's, the next layer's
  // attention's, and after the last layer the output's.
  Tensor normed = nn::rms_norm(x, layers_.front().attn_norm, c.rms_eps);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    Tensor q, k, v;
    if (l.qkv.weights.size() == 1) {
      // One product of stacked q, k and v, seen as the three; q's and k's heads, side by side,
      // normed in one call where the family norms them.
      const Tensor y = l.qkv.weights.front()(normed);
      if (l.qk_norm.defined()) {
        const Tensor qk = nn::rms_norm(
            y.narrow(-1, 0, (heads_ + kv_heads_) * c.head_dim).reshape({b, t, heads_ + kv_heads_, c.head_dim}),
            l.qk_norm, c.rms_eps);
        q = qk.narrow(2, 0, heads_).transpose(1, 2);
        k = qk.narrow(2, heads_, kv_heads_).transpose(1, 2);
      } else {
        q = heads(y.narrow(-1, 0, heads_ * c.head_dim), heads_, l.q_norm);
        k = heads(y.narrow(-1, heads_ * c.head_dim, kv_heads_ * c.head_dim), kv_heads_, l.k_norm);
      }
      v = heads(y.narrow(-1, (heads_ + kv_heads_) * c.head_dim, kv_heads_ * c.head_dim), kv_heads_);
    } else {
      const std::vector<Tensor> qkv = l.qkv(normed);
      q = heads(qkv[0], heads_, l.q_norm);
      k = heads(qkv[1], kv_heads_, l.k_norm);
      v = heads(qkv[2], kv_heads_);
    }
    const Tensor a = attend(i, q, k, v);
    // Gemma norms each output before its residual add too (after the ranks' sums).
    auto post = [&](const Tensor& y, const Tensor& norm) {
      return norm.defined() ? nn::rms_norm(y, norm, c.rms_eps) : y;
    };
    nn::AddRmsNorm added = nn::add_rms_norm(
        x, post(reduce(l.o(a.transpose(1, 2).contiguous().reshape({b, t, heads_ * c.head_dim}))), l.post_attn_norm),
        l.ffn_norm, c.rms_eps);
    Tensor y;
    if (c.experts == 0) {
      const std::vector<Tensor> gate_up = l.gate_up(added.normed);
      const Tensor h = c.activation == LlamaConfig::Activation::GeluTanh ? gate_up[0].gelu() * gate_up[1]
                                                                         : nn::silu_mul(gate_up[0], gate_up[1]);
      y = post(reduce(l.down(h)), l.post_ffn_norm);
    } else {
      y = reduce(mixture(l, added.normed));
    }
    x = std::move(added.sum);
    const bool last = i + 1 == layers_.size();
    if (last && last_only) {
      x = x.narrow(1, t - 1, 1);
      y = y.narrow(1, t - 1, 1);
    } else if (last && rows.defined()) {
      x = x.index_select(rows, 1);
      y = y.index_select(rows, 1);
    }
    added = nn::add_rms_norm(x, y, last ? output_norm_ : layers_[i + 1].attn_norm, c.rms_eps);
    x = std::move(added.sum);
    normed = std::move(added.normed);
  }
  const Tensor logits = (ranks_ > 1 ? comm_.all_gather(output_(normed), 2) : output_(normed)).to_dtype(DType::F32);
  // Gemma 2 caps the logits: cap * tanh(logit / cap).
  const double cap = c.final_softcap;
  return cap > 0 ? logits.mul(1 / cap).tanh().mul(cap) : logits;
}

// ---- the paged cache -----------------------------------------------------------------------------

namespace {

// A pool's rows: head_dim values of the model's dtype, or their Q8_0 bytes.
int64_t kv_row_bytes(int64_t head_dim, DType dtype, KvType type) {
  return type == KvType::Q8_0 ? nn::paged_q8_0_row_bytes(head_dim) : head_dim * dtype_size(dtype);
}

}  // namespace

PagedKvCache LlamaModel::make_paged_cache(int64_t blocks, int64_t block_size, KvType type) const {
  if (blocks < 1 || block_size < 1)
    throw ShapeError(detail::str_cat("llama: make_paged_cache: ", blocks, " blocks of ", block_size,
                                     " positions (at least 1 of at least 1)"));
  if (type == KvType::Q8_0 && config_.head_dim % 32 != 0)
    throw ShapeError(
        detail::str_cat("llama: make_paged_cache: a Q8_0 cache needs a head dim that is a multiple of 32, ",
                        "this model's is ", config_.head_dim));
  PagedKvCache cache;
  cache.blocks = blocks;
  cache.block_size = block_size;
  const bool q8 = type == KvType::Q8_0;
  const Shape pool = {blocks, block_size, kv_heads_,
                      q8 ? nn::paged_q8_0_row_bytes(config_.head_dim) : config_.head_dim};
  for (int64_t i = 0; i < config_.layers; ++i) {
    cache.keys.push_back(Tensor::zeros(pool, q8 ? DType::U8 : dtype_, device_));
    cache.values.push_back(Tensor::zeros(pool, q8 ? DType::U8 : dtype_, device_));
  }
  return cache;
}

int64_t LlamaModel::paged_block_bytes(int64_t block_size, KvType type) const {
  return 2 * config_.layers * block_size * kv_heads_ * kv_row_bytes(config_.head_dim, dtype_, type);
}

Tensor LlamaModel::forward_paged(const PagedBatch& batch, PagedKvCache& cache) const {
  const LlamaConfig& c = config_;
  const auto t = static_cast<int64_t>(batch.tokens.size());
  if (batch.seqs.size() != batch.tokens.size() || batch.positions.size() != batch.tokens.size() ||
      batch.slots.size() != batch.tokens.size())
    throw ShapeError(detail::str_cat("llama: forward_paged: ", t, " tokens with ", batch.seqs.size(), " sequences, ",
                                     batch.positions.size(), " positions and ", batch.slots.size(), " slots"));
  if (batch.max_blocks < 1 || batch.tables.empty() || batch.tables.size() % static_cast<size_t>(batch.max_blocks) != 0)
    throw ShapeError(detail::str_cat("llama: forward_paged: block tables of ", batch.tables.size(),
                                     " entries are no whole rows of ", batch.max_blocks));
  if (static_cast<int64_t>(cache.keys.size()) != c.layers || static_cast<int64_t>(cache.values.size()) != c.layers)
    throw ShapeError(detail::str_cat("llama: forward_paged: a cache of ", cache.keys.size(), " layers for ", c.layers));
  for (int64_t i : batch.logits_of)
    if (i < 0 || i >= t) throw IndexError(detail::str_cat("llama: forward_paged: logits of token ", i, " of ", t));
  const Tensor tokens = Tensor::from_vector(batch.tokens, {t});
  check_tokens(tokens, "forward_paged");
  if (t == 0) return Tensor::zeros({0, c.vocab}, DType::F32, device_);
  const auto sequences = static_cast<int64_t>(batch.tables.size()) / batch.max_blocks;
  return run_paged(tokens.to_device(device_).to_dtype(DType::I64), rope_tables(batch.positions),
                   Tensor::from_vector(batch.slots, {t}, device_),
                   Tensor::from_vector(batch.tables, {sequences, batch.max_blocks}, device_),
                   Tensor::from_vector(batch.seqs, {t}, device_), Tensor::from_vector(batch.positions, {t}, device_),
                   cache, Tensor::from_vector(batch.logits_of, {static_cast<int64_t>(batch.logits_of.size())}, device_),
                   chunk_runs(batch, cache));
}

std::vector<LlamaModel::ChunkRun> LlamaModel::chunk_runs(const PagedBatch& batch, const PagedKvCache& cache) const {
  std::vector<ChunkRun> runs;
  if (batch_invariant()) return runs;
  const auto t = static_cast<int64_t>(batch.tokens.size());
  const auto sequences = static_cast<int64_t>(batch.tables.size()) / batch.max_blocks;
  const int64_t bs = cache.block_size;
  const auto at = [](int64_t j) { return static_cast<size_t>(j); };
  for (int64_t i = 0; i < t;) {
    int64_t j = i + 1;
    while (j < t && batch.seqs[at(j)] == batch.seqs[at(i)] && batch.positions[at(j)] == batch.positions[at(j - 1)] + 1)
      ++j;
    const int64_t first = batch.positions[at(i)], n = j - i, row = batch.seqs[at(i)];
    // Indices out of range are left to paged_attention, which names them.
    const bool valid = row >= 0 && row < sequences && first >= 0 && first + n <= batch.max_blocks * bs;
    if (n >= kChunkAttention && valid) {
      // The slots of positions 0 .. the chunk's last, through the sequence's table.
      std::vector<int64_t> slots(static_cast<size_t>(first + n));
      bool blocks_valid = true;
      for (int64_t p = 0; p < first + n; ++p) {
        const int32_t b = batch.tables[at(row * batch.max_blocks + p / bs)];
        blocks_valid = blocks_valid && b >= 0 && b < cache.blocks;
        slots[at(p)] = int64_t{b} * bs + p % bs;
      }
      if (blocks_valid) runs.push_back({i, n, first, Tensor::from_vector(slots, {first + n}, device_)});
    }
    i = j;
  }
  return runs;
}

Tensor LlamaModel::run_paged(const Tensor& tokens, const Rope& rope, const Tensor& slots, const Tensor& tables,
                             const Tensor& seqs, const Tensor& positions, PagedKvCache& cache, const Tensor& rows,
                             const std::vector<ChunkRun>& runs) const {
  const LlamaConfig& c = config_;
  const int64_t t = tokens.numel();
  // Tokens [begin, end) through paged_attention.
  auto paged = [&](size_t i, const Tensor& q, int64_t begin, int64_t end) {
    const nn::AttentionOptions a = attention_options(static_cast<int64_t>(i));
    nn::PagedAttentionOptions options;
    options.window = a.window;
    options.scale = a.scale;
    options.softcap = a.softcap;
    return nn::paged_attention(q.narrow(0, begin, end - begin), cache.keys[i], cache.values[i], tables,
                               seqs.narrow(0, begin, end - begin), positions.narrow(0, begin, end - begin), options);
  };
  // A chunk's queries (n, heads, head_dim) over its sequence's keys gathered from the pool (Q8_0
  // rows dequantized), causal: the fused attention kernel.
  auto chunk = [&](size_t i, const Tensor& q, const ChunkRun& r) {
    const int64_t n = r.first + r.n;
    auto gather = [&](const Tensor& pool) {
      const Tensor got = pool.reshape({pool.dim(0) * pool.dim(1), pool.dim(2), pool.dim(3)}).index_select(r.keys, 0);
      if (pool.dtype() != DType::U8) return got.permute({1, 0, 2}).unsqueeze(0);
      const DType wide = dtype_ == DType::F64 ? DType::F32 : dtype_;
      const Tensor x = quant::dequantize(quant::QTensor(quant::QType::Q8_0, n * kv_heads_, c.head_dim, got), wide);
      return x.to_dtype(dtype_).reshape({n, kv_heads_, c.head_dim}).permute({1, 0, 2}).unsqueeze(0);
    };
    nn::AttentionOptions o = attention_options(static_cast<int64_t>(i));
    o.library = false;  // the chunk's shapes change every step: no plan per shape
    // causal: query j of the chunk sits at position r.first + j, the last r.n of n
    const Tensor qr = q.narrow(0, r.begin, r.n).transpose(0, 1).unsqueeze(0);
    return nn::scaled_dot_product_attention(qr, gather(cache.keys[i]), gather(cache.values[i]), o)
        .squeeze(0)
        .transpose(0, 1);
  };
  // q, k, v arrive as (1, heads, t, head_dim): the pool and the kernels take (t, heads, head_dim).
  const Tensor logits = run(
      embed(tokens).reshape({1, t, c.dim}),
      [&](size_t i, const Tensor& q, const Tensor& k, const Tensor& v) {
        auto tokens_of = [](const Tensor& x) { return x.squeeze(0).transpose(0, 1); };
        const bool local = c.local_rope(static_cast<int64_t>(i));
        const Tensor qt = nn::paged_rope_write(cache.keys[i], cache.values[i], tokens_of(q), tokens_of(k), tokens_of(v),
                                               rope.cos_of(local), rope.sin_of(local), c.interleaved_rope, slots);
        if (runs.empty()) return paged(i, qt, 0, t).transpose(0, 1).unsqueeze(0);
        std::vector<Tensor> parts;  // the tokens' results in order
        int64_t done = 0;
        for (const ChunkRun& r : runs) {
          if (r.begin > done) parts.push_back(paged(i, qt, done, r.begin));
          parts.push_back(chunk(i, qt, r));
          done = r.begin + r.n;
        }
        if (done < t) parts.push_back(paged(i, qt, done, t));
        return (parts.size() == 1 ? parts[0] : cat(parts, 0)).transpose(0, 1).unsqueeze(0);
      },
      false, rows);
  return logits.squeeze(0);
}

void PagedKvCache::copy_blocks(std::span<const std::pair<int32_t, int32_t>> copies) {
  if (copies.empty()) return;
  std::vector<int64_t> from, to;
  for (const auto& [a, b] : copies) {
    if (a < 0 || a >= blocks || b < 0 || b >= blocks)
      throw IndexError(detail::str_cat("PagedKvCache::copy_blocks: block ", a < 0 || a >= blocks ? a : b,
                                       " is outside the pool of ", blocks));
    from.push_back(a);
    to.push_back(b);
  }
  const auto n = static_cast<int64_t>(copies.size());
  for (std::vector<Tensor>* pools : {&keys, &values})
    for (Tensor& pool : *pools) {
      const Tensor src = Tensor::from_vector(from, {n}, pool.device());
      const Tensor dst = Tensor::from_vector(to, {n}, pool.device());
      const Tensor rows = pool.index_select(src, 0);
      pool.scatter_set(dst.reshape({n, 1, 1, 1}).broadcast_as(rows.shape()), rows, 0);
    }
}

}  // namespace wick::models
