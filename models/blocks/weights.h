// A model file's tensors under llama.cpp's names (token_embd, blk.N.attn_q, ..., output_norm,
// output): GGUF files as they are, Hugging Face checkpoints with transformers' names translated.
// Private to models/: the decoder (decoder.cpp) loads its weights through these.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "wick/models/llama.h"

namespace wick::models {

// The tensors of a file under the roles of llama.cpp's names ("token_embd", "blk.3.attn_q",
// "output_norm", ...), each without its ".weight"/".bias" suffix.
class LlamaModel::Weights {
 public:
  virtual ~Weights() = default;
  virtual const std::string& source() const = 0;  // the file, in messages
  // The tensor `name` (a role with its suffix): its shape, or nullopt where the file has none.
  virtual std::optional<Shape> shape(const std::string& name) const = 0;
  virtual bool quantized(const std::string& name) const = 0;
  virtual Tensor dense(const std::string& name, Device device) const = 0;
  virtual quant::QTensor blocks(const std::string& name, Device device) const = 0;

  [[noreturn]] void fail(std::string_view name, std::string_view what) const {
    throw io::FormatError(detail::str_cat("llama: ", source(), ": ", name, ": ", what));
  }
  void expect(const std::string& name, const Shape& shape_wanted) const {
    const std::optional<Shape> s = shape(name);
    if (!s) fail(name, "missing");
    if (*s != shape_wanted) fail(name, detail::str_cat("shape ", *s, ", not ", shape_wanted));
  }
  Tensor dense(const std::string& name, const Shape& shape_wanted, Device device, DType dtype) const {
    expect(name, shape_wanted);
    if (quantized(name)) fail(name, "a block-format tensor where a dense one is needed");
    return owned(floats(name, dense(name, device)), dtype);
  }
  // Weights are numbers with fractions: a tensor of integers (or f8, whose scales a file would
  // have to give) is no weight of this model.
  const Tensor& floats(std::string_view name, const Tensor& t) const {
    const DType d = t.dtype();
    if (d != DType::F32 && d != DType::F16 && d != DType::BF16 && d != DType::F64)
      fail(name, detail::str_cat("a tensor of ", d, " (weights are f32, f16, bf16 or f64, or a block format)"));
    return t;
  }
  bool copy_on_cpu = true;  // WeightMemory::Copy; load() sets it
  // t in `dtype`, copied out of the file's mapping where it still lies there on the CPU and the
  // model keeps its own weights (a conversion to another dtype is a copy already).
  Tensor owned(const Tensor& t, DType dtype) const {
    if (t.dtype() != dtype) return t.to_dtype(dtype);
    return copy_on_cpu && t.device().type() == DeviceType::Cpu ? t.copy() : t;
  }
  quant::QTensor owned(const quant::QTensor& q) const {
    if (!copy_on_cpu || q.device().type() != DeviceType::Cpu) return q;
    return quant::QTensor(q.qtype(), q.rows(), q.cols(), q.bytes().copy());
  }
  // The weight `role` (and its bias), or the part of it that `part` names: cut from the file's
  // tensor on the host, so that only that part is copied to the device. In place: not copied out
  // of the file's mapping (group() stacks it into new memory, or copies it).
  Linear linear(const std::string& role, int64_t out, int64_t in, bool bias, Device device, DType dtype, Part part = {},
                bool in_place = false) const {
    const std::string name = role + ".weight";
    expect(name, Shape({out, in}));
    const Device at = part.dim < 0 ? device : Device::cpu();
    Linear l;
    if (quantized(name))
      l.quantized = blocks(name, at);
    else
      l.dense = floats(name, dense(name, at));
    if (bias) l.bias = dense(role + ".bias", Shape({out}), at, dtype);
    return finish(std::move(l), device, dtype, part, in_place);
  }
  // A weight whose rows stack several (Phi-3's q, k and v in attn_qkv; gate and up in one), of
  // `widths` rows each: kept as it lies, one product seen as its parts, or with `part`, each part's
  // share cut out and stacked again.
  LinearGroup fused(const std::string& role, const std::vector<int64_t>& widths, int64_t in, Device device, DType dtype,
                    Part part = {}) const {
    int64_t out = 0;
    for (int64_t w : widths) out += w;
    if (part.dim < 0) {
      LinearGroup g;
      g.widths = widths;
      g.weights = {linear(role, out, in, false, device, dtype)};
      return g;
    }
    const Linear whole = linear(role, out, in, false, Device::cpu(), dtype, {}, true);
    std::vector<Linear> parts;
    int64_t from = 0;
    for (int64_t w : widths) {
      Linear l;
      if (whole.quantized.defined())
        l.quantized = quant::QTensor(whole.quantized.qtype(), w, in, whole.quantized.bytes().narrow(0, from, w));
      else
        l.dense = whole.dense.narrow(0, from, w);
      from += w;
      parts.push_back(finish(std::move(l), device, dtype, part, true));
    }
    return group(std::move(parts));
  }
  // Expert e of the `experts` whose weights the tensor `role` stacks, (experts, out, in) (a GGUF
  // file's blk.N.ffn_gate_exps, ffn_up_exps, ffn_down_exps; or, from older converters, one tensor
  // per expert, blk.N.ffn_gate.E), read in place on the host: a view of its rows. A checkpoint
  // holds each expert's as a tensor of its own.
  virtual Linear expert(const std::string& role, int64_t e, int64_t experts, int64_t out, int64_t in) const {
    const std::string name = role + ".weight";
    // Files of llama.cpp's older converter (many Mixtral ones) hold one tensor per expert:
    // blk.N.ffn_gate.E.weight for blk.N.ffn_gate_exps.
    if (!shape(name) && role.ends_with("_exps")) {
      const std::string one = detail::str_cat(role.substr(0, role.size() - 5), ".", e, ".weight");
      if (shape(one)) {
        expect(one, Shape({out, in}));
        Linear l;
        if (quantized(one))
          l.quantized = blocks(one, Device::cpu());
        else
          l.dense = floats(one, dense(one, Device::cpu()));
        return l;
      }
    }
    expect(name, Shape({experts, out, in}));
    Linear l;
    if (quantized(name)) {
      const quant::QTensor all = blocks(name, Device::cpu());
      l.quantized = quant::QTensor(all.qtype(), out, in, all.bytes().narrow(0, e * out, out));
    } else {
      l.dense = floats(name, dense(name, Device::cpu())).narrow(0, e, 1).reshape({out, in});
    }
    return l;
  }
  // Expert e's MLP of layer prefix `p` ("blk.N."): gate and up (stacked where they can be) cut by
  // `rows`, down by `cols`, on `device` in `dtype` (dense weights), copied out of the file's mapping.
  Expert expert_mlp(const std::string& p, int64_t e, int64_t experts, int64_t hidden, int64_t dim, Device device,
                    DType dtype, Part rows, Part cols) const {
    auto place = [&](Linear l, Part part) {
      if (part.dim >= 0) l = l.slice(part.dim, part.rank, part.size);
      if (l.quantized.defined()) l.quantized = l.quantized.to_device(device);
      if (l.dense.defined()) l.dense = l.dense.to_device(device);
      return l;
    };
    Expert x;
    x.gate_up =
        group({finish(place(expert(p + "ffn_gate_exps", e, experts, hidden, dim), rows), device, dtype, {}, true),
               finish(place(expert(p + "ffn_up_exps", e, experts, hidden, dim), rows), device, dtype, {}, true)});
    x.down = finish(place(expert(p + "ffn_down_exps", e, experts, dim, hidden), cols), device, dtype, {}, false);
    return x;
  }
  // l (read on the host where `part` cuts it) as the model keeps it: its part on `device`, dense
  // weights in `dtype`, copied out of the file's mapping unless `in_place`.
  Linear finish(Linear l, Device device, DType dtype, Part part, bool in_place) const {
    if (part.dim >= 0) {
      l = l.slice(part.dim, part.rank, part.size);
      if (l.quantized.defined()) l.quantized = l.quantized.to_device(device);
      if (l.dense.defined()) l.dense = l.dense.to_device(device);
      if (l.bias.defined()) l.bias = l.bias.to_device(device);
    }
    if (l.dense.defined()) l.dense = in_place ? l.dense.to_dtype(dtype) : owned(l.dense, dtype);
    if (l.quantized.defined() && !in_place) l.quantized = owned(l.quantized);
    return l;
  }
  // Linears read in place, stacked where they can be (into new memory); those left apart are
  // copied out of the file's mapping as linear() copies one.
  LinearGroup group(std::vector<Linear> parts) const {
    LinearGroup g = LinearGroup::of(std::move(parts));
    if (g.weights.size() > 1) {
      for (Linear& l : g.weights) {
        if (l.dense.defined()) l.dense = owned(l.dense, l.dense.dtype());
        if (l.quantized.defined()) l.quantized = owned(l.quantized);
      }
    }
    return g;
  }
};

class LlamaModel::GgufWeights final : public LlamaModel::Weights {
 public:
  explicit GgufWeights(const io::GgufFile& f) : f_(f) {}
  const std::string& source() const override { return f_.name(); }
  std::optional<Shape> shape(const std::string& name) const override {
    const io::GgufTensor* t = f_.find_tensor(name);
    return t == nullptr ? std::nullopt : std::optional<Shape>(t->shape);
  }
  bool quantized(const std::string& name) const override { return f_.find_tensor(name)->qtype.has_value(); }
  Tensor dense(const std::string& name, Device device) const override { return f_.tensor(*f_.find_tensor(name), device); }
  quant::QTensor blocks(const std::string& name, Device device) const override {
    return f_.qtensor(*f_.find_tensor(name), device);
  }

 private:
  const io::GgufFile& f_;
};

// transformers' names for llama.cpp's. With post_norms (Gemma), a layer's post_attention_layernorm
// is the norm after attention (llama.cpp's post_attention_norm) and pre_feedforward_layernorm the
// MLP's (ffn_norm); in Llama's layout post_attention_layernorm is the MLP's.
class LlamaModel::CheckpointWeights final : public LlamaModel::Weights {
 public:
  CheckpointWeights(const io::SafetensorsCheckpoint& c, bool post_norms) : c_(c), post_norms_(post_norms) {}
  const std::string& source() const override { return c_.name(); }
  std::optional<Shape> shape(const std::string& name) const override {
    const io::SafetensorsTensor* t = c_.find_tensor(translate(name));
    return t == nullptr ? std::nullopt : std::optional<Shape>(t->shape);
  }
  bool quantized(const std::string&) const override { return false; }
  Tensor dense(const std::string& name, Device device) const override { return c_.tensor(translate(name), device); }
  quant::QTensor blocks(const std::string& name, Device) const override { fail(name, "no block formats in safetensors"); }
  // Each expert's weight is a tensor of its own: Qwen3-MoE's mlp.experts.E.gate_proj, up_proj and
  // down_proj, Mixtral's block_sparse_moe.experts.E.w1, w3 and w2.
  Linear expert(const std::string& role, int64_t e, int64_t, int64_t out, int64_t in) const override {
    const size_t end = role.find('.', 4);
    const std::string layer = role.substr(4, end - 4), what = role.substr(end + 1);
    const std::string_view qwen = what == "ffn_gate_exps" ? "gate_proj"
                                  : what == "ffn_up_exps" ? "up_proj"
                                                          : "down_proj";
    const std::string_view mixtral = what == "ffn_gate_exps" ? "w1" : what == "ffn_up_exps" ? "w3" : "w2";
    std::string name = detail::str_cat("model.layers.", layer, ".mlp.experts.", e, ".", qwen, ".weight");
    if (c_.find_tensor(name) == nullptr)
      name = detail::str_cat("model.layers.", layer, ".block_sparse_moe.experts.", e, ".", mixtral, ".weight");
    const io::SafetensorsTensor* t = c_.find_tensor(name);
    if (t == nullptr) fail(name, detail::str_cat("missing (expert ", e, " of ", role, ")"));
    if (t->shape != Shape({out, in})) fail(name, detail::str_cat("shape ", t->shape, ", not ", Shape({out, in})));
    Linear l;
    l.dense = floats(name, c_.tensor(name, Device::cpu()));
    return l;
  }

 private:
  // The checkpoint's name of one of llama.cpp's: the first of transformers' that the checkpoint
  // holds (Qwen3-MoE's router is mlp.gate, Mixtral's block_sparse_moe.gate), else the first.
  std::string translate(const std::string& name) const {
    static const std::pair<std::string_view, std::string_view> kLayer[] = {{"attn_norm", "input_layernorm"},
                                                                           {"attn_q", "self_attn.q_proj"},
                                                                           {"attn_k", "self_attn.k_proj"},
                                                                           {"attn_v", "self_attn.v_proj"},
                                                                           {"attn_output", "self_attn.o_proj"},
                                                                           {"attn_q_norm", "self_attn.q_norm"},
                                                                           {"attn_k_norm", "self_attn.k_norm"},
                                                                           {"ffn_norm", "post_attention_layernorm"},
                                                                           {"ffn_gate", "mlp.gate_proj"},
                                                                           {"ffn_up", "mlp.up_proj"},
                                                                           {"ffn_down", "mlp.down_proj"},
                                                                           {"attn_qkv", "self_attn.qkv_proj"},
                                                                           {"ffn_gate_up", "mlp.gate_up_proj"},
                                                                           {"ffn_gate_inp", "mlp.gate"},
                                                                           {"ffn_gate_inp", "block_sparse_moe.gate"}};
    static const std::pair<std::string_view, std::string_view> kGemmaNorms[] = {
        {"ffn_norm", "pre_feedforward_layernorm"},
        {"post_attention_norm", "post_attention_layernorm"},
        {"post_ffw_norm", "post_feedforward_layernorm"}};
    static const std::pair<std::string_view, std::string_view> kTop[] = {
        {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
    const size_t dot = name.rfind('.');
    const std::string_view role = std::string_view(name).substr(0, dot), suffix = std::string_view(name).substr(dot);
    if (role.starts_with("blk.")) {
      const size_t end = role.find('.', 4);
      const std::string_view layer = role.substr(4, end - 4), what = role.substr(end + 1);
      if (post_norms_)
        for (const auto& [ours, theirs] : kGemmaNorms)
          if (what == ours) return detail::str_cat("model.layers.", layer, ".", theirs, suffix);
      std::string first;
      for (const auto& [ours, theirs] : kLayer) {
        if (what != ours) continue;
        std::string candidate = detail::str_cat("model.layers.", layer, ".", theirs, suffix);
        if (c_.find_tensor(candidate) != nullptr) return candidate;
        if (first.empty()) first = std::move(candidate);
      }
      if (!first.empty()) return first;
    }
    for (const auto& [ours, theirs] : kTop)
      if (role == ours) return detail::str_cat(theirs, suffix);
    return name;
  }

  const io::SafetensorsCheckpoint& c_;
  bool post_norms_;
};

}  // namespace wick::models
