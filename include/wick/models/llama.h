// Llama-family decoders (Llama 2 and 3, Mistral, Qwen2) over wick's public ops: RMS norm, rotary
// positions, grouped-query attention with a KV cache per layer, and a SwiGLU MLP; weights dense in
// the activations' dtype or in any GGUF block format (the product through quant::qmatmul).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wick/dist.h"
#include "wick/graph.h"
#include "wick/io.h"
#include "wick/models/model.h"
#include "wick/nn.h"
#include "wick/quant.h"
#include "wick/tensor.h"

namespace wick::models {

struct LlamaConfig {
  // GGUF's general.architecture: "llama" (Llama, Mistral, Mixtral), "qwen2", "qwen3", "qwen3moe", "phi3",
  // "gemma2" or "gemma3"
  std::string architecture;
  int64_t vocab = 0;
  int64_t dim = 0;     // the residual stream's width
  int64_t hidden = 0;  // the MLP's width (each expert's, in a mixture of experts)
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t context = 0;  // the positions the model was trained for
  double rms_eps = 1e-5;
  double rope_theta = 10000;
  int64_t window = 0;  // sliding-window attention (Mistral); 0: none
  // GGUF's Llama weights have the rows of q and k permuted so that each rotated pair is adjacent
  // (rope_i); Qwen2's and Hugging Face checkpoints' pair i with i + head_dim / 2 (rope).
  bool interleaved_rope = false;
  // Llama 3.1's "llama3" frequency scaling (factor 0: none): pairs whose wavelength passes
  // original_context / low_freq_factor turn `factor` times slower, those under
  // original_context / high_freq_factor keep their rate, and the ones between blend the two.
  struct RopeScaling {
    double factor = 0;
    double low_freq_factor = 1;
    double high_freq_factor = 4;
    int64_t original_context = 8192;
  } rope_scaling;
  // Rope over the first rotary_dim features of each head, pairing i with i + rotary_dim / 2 (or
  // 2i with 2i + 1 where interleaved_rope), the rest passed as they are (Phi-4-mini's
  // partial_rotary_factor); 0: the whole head. The loader reorders the rows of q and k so that the
  // rotated pairs lie where wick's rope pairs features, and the others' rates are 0.
  int64_t rotary_dim = 0;
  // LongRoPE (Phi-3's 128k models, Phi-4-mini) where short_factor is not empty: each pair's rate
  // divided by its short factor at positions before original_context and by its long factor from
  // there on (as transformers' generate turns to the long factors once a sequence passes it), and
  // cos and sin scaled by attention_factor. rotary_dim / 2 factors each.
  struct LongRope {
    std::vector<double> short_factor, long_factor;
    int64_t original_context = 0;
    double attention_factor = 1;
  } long_rope;
  bool tied_embeddings = false;  // the head is the embedding (checkpoints say so in config.json)
  bool qkv_bias = false;         // q, k and v have biases (Qwen2)
  bool qk_norm = false;          // each head of q and of k RMS-normed (weights of head_dim) before rope (Qwen3)
  // A mixture of experts in place of each layer's MLP where experts > 0 (Mixtral, Qwen3-MoE): a
  // router (experts, dim) scores each token, the `experts_used` largest of the scores' softmax pick
  // the experts whose SwiGLU MLPs (of width `hidden` each) run on it, and their outputs are summed,
  // each weighted by its probability (renormalized over the chosen ones to sum 1 where norm_topk).
  int64_t experts = 0;
  int64_t experts_used = 0;
  bool norm_topk = true;
  // Gemma 2 and 3: the embedding's rows times sqrt(dim); every layer's attention output and MLP output
  // RMS-normed (post_attention_norm, post_ffw_norm) before its residual add, as well as the inputs;
  // the MLP's gate through GELU (tanh approximation) instead of SiLU; q k^T times attention_scale
  // (query_pre_attn_scalar^-1/2) instead of head_dim^-1/2; each layer's own window (local layers
  // slide, global ones see every key) and (Gemma 3) the local layers' rope at a base of their own. A
  // checkpoint's norms scale by (1 + weight): norm_offset 1 is added to each at load (GGUF files
  // hold 1 + weight already).
  bool embed_scale = false;
  bool post_norms = false;
  enum class Activation : uint8_t { Silu, GeluTanh } activation = Activation::Silu;
  double attention_scale = 0;          // 0: 1 / sqrt(head_dim)
  std::vector<int64_t> layer_windows;  // each layer's window (0: none) where not empty, else `window` for all
  double rope_local_theta = 0;         // the base of the layers with a window; 0: rope_theta's rates for all
  double norm_offset = 0;
  // "linear" rope scaling (Gemma 3's global layers): each of rope_theta's rates divided by it.
  double rope_linear = 1;
  // Gemma 2's soft-capping: each attention score s (scaled) becomes cap * tanh(s / cap), and each
  // logit likewise with final_softcap; 0: none.
  double attn_softcap = 0, final_softcap = 0;

  // From a GGUF file's metadata ("<arch>.embedding_length", ...); FormatError naming the key for a
  // missing or inconsistent value, NotSupportedError for another architecture.
  static LlamaConfig from_gguf(const io::GgufFile& file);
  // From a Hugging Face checkpoint's config.json (model_type "llama", "mistral", "mixtral", "qwen2", "qwen3",
  // "qwen3_moe" or "phi3"; the
  // rope settings as rope_theta and rope_scaling, or transformers 5's rope_parameters); a
  // FormatError naming the file and the key for a missing or inconsistent value.
  static LlamaConfig from_json(const std::string& path);
  // The shapes of released models, for benchmarks: "llama3-8b" (Llama 3 and 3.1 8B), "llama3-70b",
  // "llama3-1b" (Llama 3.2 1B), "llama2-7b", "qwen2-7b", "qwen3-8b", mixtures of experts "mixtral-8x7b"
  // and "qwen3-30b-a3b", "gemma2-9b", and Gemma 3's text models "gemma3-1b", "gemma3-4b" and
  // "gemma3-27b"; an Error listing them for another name.
  static LlamaConfig preset(std::string_view name);
  // A FormatError "llama: <source>: <field>: ..." unless every size is from 1 to 2^40 (at most
  // 2^16 layers), the head size is even, the KV heads divide the heads, experts_used is from 1 to
  // experts (at most 2^16) where there are experts, rms_eps, rope_theta and
  // the rope scaling are finite and positive (every rotation rate too), and the weights number at
  // most 2^62; NotSupportedError for another architecture. from_gguf and from_json end with it, and
  // LlamaModel::random calls it.
  void check(std::string_view source) const;
  // The weights' element count (saturated past 2^62, which check() refuses).
  int64_t parameters() const;
  // The rotation rate of each of the head_dim / 2 pairs: rope_theta^(-2i / rotary_dim), scaled as
  // rope_scaling says, divided by LongRoPE's short factors (its long ones with `long_factors`); 0
  // for the pairs past rotary_dim / 2.
  std::vector<double> inv_freq(bool long_factors = false) const;
  // The local layers' rates (rope_local_theta^(-2i / rotary_dim), unscaled); empty where there is
  // no local base.
  std::vector<double> inv_freq_local() const;
  int64_t rotated() const { return rotary_dim > 0 ? rotary_dim : head_dim; }  // the features rope turns
  // Layer i's sliding window (0: none).
  int64_t window_of(int64_t i) const { return layer_windows.empty() ? window : layer_windows[static_cast<size_t>(i)]; }
  // Whether layer i turns at the local rates.
  bool local_rope(int64_t i) const { return rope_local_theta > 0 && window_of(i) > 0; }
};

// A weight used as y = x W^T (+ bias): dense (out, in) in the activations' dtype, or quantized.
struct Linear {
  Tensor dense;
  quant::QTensor quantized;
  Tensor bias;  // undefined: none

  Tensor operator()(const Tensor& x) const;
  // Part `rank` of `size` equal parts of the weight's rows (dim 0; the bias's too) or columns (dim
  // 1; a block-format weight's in whole blocks), as a weight of its own.
  Linear slice(int dim, int rank, int size) const;
  // The weight's blocks in the arrangement of its device's products (quant::QTensor::arrange).
  Linear arranged() const;
  int64_t out_features() const;
  int64_t in_features() const;
  int64_t bytes() const;  // of the weight and the bias
};

// Linear layers applied to the same input (q, k and v; gate and up). Where their weights share a
// format (all dense, or all of one block format) and all or none have a bias, they are one weight
// of stacked rows, which a decode step reads in one pass (one launch on a GPU); otherwise (a
// Q4_K_M file's q and v differ) each stays its own.
struct LinearGroup {
  std::vector<Linear> weights;  // one stacked weight, or one per layer of the group
  std::vector<int64_t> widths;  // each layer's output features

  // The layers of `linears`, stacked where they can be.
  static LinearGroup of(std::vector<Linear> linears);
  // Each layer's output for x, in order (views of one product where stacked).
  std::vector<Tensor> operator()(const Tensor& x) const;
  LinearGroup arranged() const;  // each weight's Linear::arranged()
  int64_t bytes() const;
};

// Tensor parallelism (Megatron's split): with a communicator of n ranks, each rank holds 1/n of
// the attention heads (q, k and v by rows, o by columns, and its heads' KV cache), 1/n of the MLP's
// width (gate and up by rows, down by columns) and 1/n of the vocabulary (the embedding's and the
// head's rows). A layer's attention and MLP each end in one all_reduce of the partial products;
// the embedding's rows come together by an all_reduce and the logits by an all_gather. Every rank
// runs forward() with the same tokens, at the same time, and gets the whole logits. The heads, the
// KV heads, the MLP width and the vocabulary must divide by n (and a block-format down's columns
// into whole blocks); a NotSupportedError names what does not.
class LlamaModel : public Model {
 public:
  // The model of a GGUF file on `device` with activations in `dtype` (f32, f16 or bf16): dense
  // weights (F32, F16, BF16) become `dtype`, block-format weights stay as the file holds them. A
  // missing tensor or one of the wrong shape is a FormatError naming it. With a defined `comm` (on
  // `device`): this rank's part of the model (above); only that part is copied to the device.
  static LlamaModel from_gguf(const io::GgufFile& file, Device device = Device::cpu(), DType dtype = DType::F32,
                              const dist::Communicator& comm = {}, WeightMemory memory = WeightMemory::Copy);
  // The model of a Hugging Face checkpoint: `dir` holds config.json and the weights
  // (model.safetensors, or shards and model.safetensors.index.json) with transformers' names
  // (model.embed_tokens, model.layers.N.self_attn.q_proj, ..., lm_head); weights of any float
  // dtype become `dtype`. Errors as from_gguf's, naming the checkpoint.
  static LlamaModel from_checkpoint(const std::string& dir, Device device = Device::cpu(), DType dtype = DType::F32,
                                    const dist::Communicator& comm = {}, WeightMemory memory = WeightMemory::Copy);
  // The same from a checkpoint's configuration and weights, read already.
  static LlamaModel from_checkpoint(const LlamaConfig& config, const io::SafetensorsCheckpoint& weights,
                                    Device device = Device::cpu(), DType dtype = DType::F32,
                                    const dist::Communicator& comm = {}, WeightMemory memory = WeightMemory::Copy);
  // from_checkpoint for a directory, from_gguf for a file.
  static LlamaModel open(const std::string& path, Device device = Device::cpu(), DType dtype = DType::F32,
                         const dist::Communicator& comm = {}, WeightMemory memory = WeightMemory::Copy);

  // A model of `config` with random weights on `device`, for benchmarks: dense ones drawn from
  // N(0, 0.02^2) in `dtype`, or, with `weights`, blocks of that format (quantized from a random
  // block of 256 rows, one per width, repeated) for every linear layer but the embedding; a
  // mixture's router dense, N(0, 1).
  // With `comm`: this rank's part of the same model (every rank makes the whole weights from the
  // seed and keeps its part).
  static LlamaModel random(const LlamaConfig& config, Device device = Device::cpu(), DType dtype = DType::F32,
                           std::optional<quant::QType> weights = std::nullopt, uint64_t seed = 0,
                           const dist::Communicator& comm = {});

  const LlamaConfig& config() const { return config_; }
  const std::string& architecture() const override { return config_.architecture; }
  int64_t vocab() const override { return config_.vocab; }
  int64_t context() const override { return config_.context; }
  int64_t parameters() const override { return config_.parameters(); }
  // The bytes of the weights a decode step reads (every layer's and the head's; one embedding row
  // is left out): this rank's, where the model is split.
  int64_t weight_bytes() const override;
  Device device() const override { return device_; }
  // The ranks the model is split over (undefined: none).
  const dist::Communicator& communicator() const override { return comm_; }
  DType dtype() const override { return dtype_; }

  // One KV cache per layer for `batch` sequences of up to `capacity` positions each (of this
  // rank's KV heads).
  std::vector<nn::KvCache> make_cache(int64_t batch, int64_t capacity) const override;
  // The logits (b, t, vocab), f32, of tokens (b, t) (i64 or u32) placed after the positions the
  // caches hold; each cache grows by t. key_mask, where defined, is (b, t_kv) f32 (t_kv: the
  // positions held after this call), added to every score of that sequence's queries: 0 for a key
  // it sees, -inf for one it does not (the padding of a shorter prompt in a batch). ShapeError
  // where the caches are not this model's or would pass their capacity, or the mask's shape is
  // not (b, t_kv); IndexError for a token outside the vocabulary. last_only: the logits of the last
  // position alone, (b, 1, vocab), which spares the head's product over a prompt.
  Tensor forward(const Tensor& tokens, std::vector<nn::KvCache>& cache, const Tensor& key_mask = {},
                 bool last_only = false) const override;
  PagedKvCache make_paged_cache(int64_t blocks, int64_t block_size, KvType type) const override;
  int64_t paged_block_bytes(int64_t block_size, KvType type) const override;
  Tensor forward_paged(const PagedBatch& batch, PagedKvCache& cache) const override;
  // PagedDecodeGraph on a GPU where the model has no experts (whose router's choices are read on the
  // host), a split model's collectives recorded with the rest; nullptr (forward_paged) otherwise.
  std::unique_ptr<PagedSteps> paged_steps(PagedKvCache& cache, int64_t max_batch) const override;
  // DecodeGraph on a GPU where the model has no experts (split or not); forward() one position at a
  // time otherwise.
  std::unique_ptr<DecodeSteps> decode_steps(std::vector<nn::KvCache>& cache) const override;

  // forward_paged reads a prompt chunk of at least this many tokens of one sequence through the
  // fused attention kernel over its keys gathered from the pool (which shares each tile of keys
  // among the chunk's queries), shorter ones and decode tokens through nn::paged_attention.
  static constexpr int64_t kChunkAttention = 16;

 private:
  friend class DecodeGraph;
  friend class PagedDecodeGraph;
  struct Expert {
    LinearGroup gate_up;
    Linear down;
  };
  struct Layer {
    Tensor attn_norm, ffn_norm;
    Tensor post_attn_norm, post_ffn_norm;  // (dim) where LlamaConfig::post_norms, else undefined
    Tensor q_norm, k_norm;  // (head_dim) where LlamaConfig::qk_norm, else undefined
    // (heads + kv_heads, head_dim) of this rank: q_norm for each query head, then k_norm for each
    // key head, so that one rms_norm call norms q and k where one product gives them side by side.
    Tensor qk_norm;
    LinearGroup qkv, gate_up;
    Linear o, down;
    // A mixture of experts (LlamaConfig::experts) in place of gate_up and down: the router
    // (experts, dim) and each expert's MLP.
    Linear router;
    std::vector<Expert> experts;
    // The experts stacked for quant::qmatmul_grouped, in place of `experts` (then empty), where
    // every expert's gate and up are one weight of one block format and every down one of one
    // format (on the CPU, weights copied from the file): gate_up (experts * 2 * width, dim), each
    // expert's gate rows then its up rows; down (experts * dim, width). A decode step then waits for
    // no host on a GPU, and takes one parallel region per product on the CPU (stack_experts).
    quant::QTensor stacked_gate_up, stacked_down;
    // The same of dense experts on a GPU (nn::matmul_grouped), in the activations' dtype.
    Tensor dense_gate_up, dense_down;
  };
  // A file's tensors under llama.cpp's names, and its two kinds (models/llama.cpp).
  class Weights;
  class GgufWeights;
  class CheckpointWeights;
  // Which part of a weight a rank keeps: all (dim -1), or 1/size of its rows (0) or columns (1).
  struct Part {
    int dim = -1;
    int rank = 0;
    int size = 1;
  };
  static LlamaModel load(const LlamaConfig& config, Weights& weights, Device device, DType dtype,
                         const dist::Communicator& comm, WeightMemory memory);
  // Sets the communicator and the counts of this rank's heads; NotSupportedError for a split that
  // does not divide.
  void split_over(const dist::Communicator& comm, std::optional<quant::QType> down_format);
  // Rope over part of each head (LlamaConfig::rotary_dim) over halves: l's q and k rows (and norms)
  // reordered so that the pairs (i, i + rotary_dim / 2) lie at (i, i + head_dim / 2).
  void reorder_for_rope(Layer& l) const;
  // Each layer's qk_norm, from its q_norm and k_norm as they finally are.
  void join_qk_norms();
  // Every linear layer's blocks in the arrangement of the device's products (a copy each), but the
  // embedding's, whose rows are gathered by token (and so a head tied to it).
  void arrange_linears();
  Part part(int dim) const { return {dim, rank_, ranks_}; }
  // Layer l's mixture of experts over x (..., dim) (blocks/moe.cpp): nn::moe_route's choices, each
  // chosen expert's MLP over its tokens, gathered (stacked experts: quant::qmatmul_grouped or
  // nn::matmul_grouped, with no wait for the host; else each expert's own product, the groups read
  // on the host), and nn::moe_combine's weighted sums; the experts no token chose are not read.
  // This rank's partial sums where the model is split.
  Tensor mixture(const Layer& l, const Tensor& x) const;
  // l's experts as stacked_gate_up and stacked_down, or dense_gate_up and dense_down, where they
  // can be (Layer); else as they are. `copy`: their blocks may be copied (on a GPU always; on the
  // CPU unless read in place from the file's mapping, which a stack would copy).
  static void stack_experts(Layer& l, bool copy);
  // Whether a decode step waits for no host: no experts, or every layer's stacked.
  bool steps_recordable() const;
  // The whole of a rank's partial sums, or x where the model is not split.
  Tensor reduce(const Tensor& x) const;
  Tensor embed(const Tensor& tokens) const;
  // An IndexError naming `op` and the token for an id outside the vocabulary (read on the host).
  void check_tokens(const Tensor& tokens, std::string_view op) const;
  // The rope tables of some positions: cos and sin (n, head_dim / 2) at the model's rates, and at
  // the local layers' own where it has them (LlamaConfig::rope_local_theta).
  struct Rope {
    Tensor cos, sin;
    Tensor local_cos, local_sin;          // undefined: every layer turns at the same rates
    Rope select(const Tensor& at) const;  // each table's rows `at` (i64 on the model's device)
    const Tensor& cos_of(bool local) const { return local ? local_cos : cos; }
    const Tensor& sin_of(bool local) const { return local ? local_sin : sin; }
  };
  // The tables of positions from..from + t - 1.
  Rope rope_tables(int64_t from, int64_t t) const;
  // The tables of positions p (each in `positions`), rates_at(p) each.
  Rope rope_tables(const std::vector<int32_t>& positions) const;
  // nn::scaled_dot_product_attention's options for layer i's decode or prompt step.
  nn::AttentionOptions attention_options(int64_t i) const;
  // Layer i's attention of its new queries q (b, heads, t, head_dim) over the keys and values
  // of the positions they see, k and v (b, kv_heads, t, head_dim) the new ones (rope not yet
  // applied to q and k): stores k and v where the step keeps them and returns (b, heads, t,
  // head_dim).
  using Attend = std::function<Tensor(size_t i, const Tensor& q, const Tensor& k, const Tensor& v)>;
  // The layers and the head over embedded tokens x (b, t, dim): the logits (b, t, vocab), f32, of
  // every position, the last alone when `last_only`, or those of `rows` (i64 indices along t).
  Tensor run(Tensor x, const Attend& attend, bool last_only, const Tensor& rows = {}) const;
  // A run of a step's tokens that is one sequence's prompt chunk: tokens [begin, begin + n) at
  // positions first .. first + n - 1, whose attention reads the sequence's keys gathered from the
  // pool (keys: the slots of positions 0 .. first + n - 1, i64 on the device) through the fused
  // attention kernel, which shares each tile of keys among the chunk's queries.
  struct ChunkRun {
    int64_t begin, n, first;
    Tensor keys;
  };
  // The runs of a step that take that way: chunks of at least kChunkAttention tokens, on every
  // device, except in batch-invariant mode (where every token takes paged_attention, whatever the
  // chunk it came in, so that its result does not depend on how the engine split its prompt).
  std::vector<ChunkRun> chunk_runs(const PagedBatch& batch, const PagedKvCache& cache) const;
  // forward_paged over inputs on the model's device: tokens and slots (t) i64, tables (s,
  // max_blocks), seqs and positions (t) i32, the rope tables of the positions; the
  // logits (t or rows, vocab), f32, of the tokens `rows` (i64) names where defined. Tokens of
  // `runs` take the fused attention kernel, the rest paged_attention. Nothing is read on the host.
  Tensor run_paged(const Tensor& tokens, const Rope& rope, const Tensor& slots, const Tensor& tables,
                   const Tensor& seqs, const Tensor& positions, PagedKvCache& cache, const Tensor& rows,
                   const std::vector<ChunkRun>& runs = {}) const;

  LlamaConfig config_;
  dist::Communicator comm_;
  int rank_ = 0, ranks_ = 1;
  int64_t heads_ = 0, kv_heads_ = 0;  // this rank's
  Device device_ = Device::cpu();
  DType dtype_ = DType::F32;
  Linear embedding_;  // (vocab, dim): its rows are the token embeddings
  std::vector<Layer> layers_;
  Tensor output_norm_;
  Linear output_;
  std::vector<double> inv_freq_;  // the rotation rate of each pair, every scaling applied
  std::vector<double> inv_freq_long_;  // LongRoPE's from original_context on; empty: none
  std::vector<double> inv_freq_local_;  // the local layers' (Gemma 3); empty: none
  // The rates of position p, and the scale of its cos and sin (LongRoPE's attention factor).
  const std::vector<double>& rates_at(int64_t p) const {
    return !inv_freq_long_.empty() && p >= config_.long_rope.original_context ? inv_freq_long_ : inv_freq_;
  }
};

// Decode steps of one batch, a position at a time, each replayed from a recorded wick::Graph: on a
// GPU the host launches a whole step at once instead of each of its ops (about 15 per layer), and
// the step reads its token ids and position from device memory. A step gives forward()'s logits
// within float rounding: it attends over the cache in spans of kSpan positions, the positions not
// yet written hidden by a mask, and records a step anew when the next position starts a span (the
// first step of a span runs normally, then is recorded). On the CPU the same code runs (a replay
// runs the step's ops again). A model split over ranks records its collectives with the rest (NCCL
// and RCCL calls are captured into the graph), so each rank steps its own DecodeGraph, every rank
// at once, as they call forward(); TensorParallelModel::decode_steps does that.
class DecodeGraph : public DecodeSteps {
 public:
  static constexpr int64_t kSpan = 256;

  // Steps of `model` that write into `cache` (its make_cache, holding any number of positions);
  // both must outlive the DecodeGraph, and the cache's tensors must not be replaced.
  DecodeGraph(const LlamaModel& model, std::vector<nn::KvCache>& cache);
  DecodeGraph(const DecodeGraph&) = delete;  // a recording refers to this object
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  // forward(tokens, cache, key_mask, true) for one position: the logits (b, 1, vocab), f32, of
  // tokens (b, 1) (i64 or u32, on any device) at the position after those the caches hold, and every
  // cache grows by one. The logits are a tensor the next step overwrites (clone() to keep them).
  // Errors as forward's; a ShapeError for a cache that is full or not the one given.
  Tensor step(const Tensor& tokens, const Tensor& key_mask = {}) override;
  // Empty while steps are recorded and replayed. Where recording raised an Error (a backend whose
  // graphs cannot hold some op), its message: the steps then run op by op, with the same results.
  const std::string& recording_error() const override { return recording_error_; }
  bool recorded() const override;

 private:
  // The recorded step: attention over positions [0, length).
  void run_step(int64_t length);

  const LlamaModel& model_;
  std::vector<nn::KvCache>& cache_;
  int64_t batch_ = 0, capacity_ = 0;
  Tensor inputs_;  // (batch + 1) i64: the token ids, then the position
  // By window (0: none, and each layer's own): (batch, capacity), the model's dtype, 0 for a key a
  // sequence sees, -inf else.
  std::map<int64_t, Tensor> masks_;
  LlamaModel::Rope rope_;  // the rope tables of every position up to the capacity
  Tensor logits_;     // (batch, 1, vocab) f32
  Graph graph_;
  int64_t length_ = 0;  // the span the graph attends over
  std::string recording_error_;
};

// The engine's decode steps (Model::paged_steps), each replayed from a wick::Graph recorded for
// its size: a batch of 1, 2, 4, ... sequences up to the largest (a batch run at the next size up,
// its extra rows writing and reading the cache's scratch block) and block tables 1, 2, 4, ...
// blocks wide up to the model's context (so that attention splits its keys for the lengths at
// hand, not for the whole context). The step's inputs (tokens, positions, slots, sequences and
// block tables) reach the device in one copy, and the rope tables of every position lie there
// already, so that a step costs the host one copy and one launch. On the CPU the same code runs (a
// replay runs the step's ops again). The first step of each size runs normally, then is recorded. A
// split model's collectives are recorded with the rest (TensorParallelModel::paged_steps steps every
// rank's at once).
class PagedDecodeGraph : public PagedSteps {
 public:
  // Steps of `model` for up to max_batch sequences writing into `cache`, which must have a scratch
  // block; both must outlive the PagedDecodeGraph. ShapeError otherwise.
  PagedDecodeGraph(const LlamaModel& model, PagedKvCache& cache, int64_t max_batch);
  PagedDecodeGraph(const PagedDecodeGraph&) = delete;  // a recording refers to this object
  PagedDecodeGraph& operator=(const PagedDecodeGraph&) = delete;

  Tensor step(const PagedBatch& batch) override;
  const std::string& recording_error() const override { return recording_error_; }
  bool recorded() const override { return recording_error_.empty(); }

 private:
  struct Size {
    int64_t batch = 0, width = 0;
    Tensor inputs;  // i64: tokens, positions, slots, sequences (batch each), tables (batch, width)
    Tensor logits;  // (batch, vocab) f32
    Graph graph;
  };
  // The step's ops over size k's inputs, its logits written into k.logits.
  void run(Size& k);

  const LlamaModel& model_;
  PagedKvCache& cache_;
  int64_t max_batch_ = 0;
  int64_t max_blocks_ = 0;                             // the widest table row: the blocks of the model's context
  LlamaModel::Rope rope_;                              // the rope tables of every position of the context
  std::map<std::pair<int64_t, int64_t>, Size> sizes_;  // by (batch, width); a recording refers to its Size
  std::string recording_error_;
};

}  // namespace wick::models
