// Models behind one interface. A ModelFile is a model's files opened and parsed once: a GGUF file,
// or a Hugging Face checkpoint's directory (config.json, the tokenizer, the safetensors weights).
// Its architecture (GGUF's general.architecture, config.json's model_type) picks the family that
// loads it (models/registry.cpp); generation, the CLI and the bindings see only Model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wick/dist.h"
#include "wick/models/tokenizer.h"
#include "wick/nn.h"
#include "wick/tensor.h"

namespace wick::models {

// Where a model on the CPU keeps the weights it reads from a file. Copy (the default): in wick's own
// memory, on huge pages where the kernel gives them, which the products read faster (on 2 cores of
// an Intel Xeon a Llama 3.2 1B-shaped Q8_0 file decoded 18.4-19.0 tokens/s against 16.8-17.3 from
// the mapping); the file's pages stay in the page cache only until the kernel needs them. Map: used
// in place from the file's mapping, with no copy: the model opens at once and processes share its
// pages. A model on a GPU copies its weights to the device either way.
enum class WeightMemory { Copy, Map };

// The activations' dtype a model runs in on `device` unless told otherwise, for weights made
// rather than read (`bench-model --shape`): bf16 on a GPU (its matrix units' fast type), f32 on
// the CPU. A file's model takes ModelFile::default_dtype, which knows how the file stores them.
DType default_dtype(Device device);

struct LoadOptions {
  Device device = Device::cpu();
  std::optional<DType> dtype;  // the activations' (f32, f16, bf16); the file's default_dtype(device) if none
  dist::Communicator comm;     // with one: this rank's part of the model (tensor parallel)
  WeightMemory memory = WeightMemory::Copy;
};

// Decode steps of one batch, one position at a time, that a model may run faster than forward()
// (a step recorded once and replayed: Llama's DecodeGraph).
class DecodeSteps {
 public:
  virtual ~DecodeSteps() = default;
  // forward(tokens, cache, key_mask, true) for one position: logits (b, 1, vocab), f32, which the
  // next step may overwrite.
  virtual Tensor step(const Tensor& tokens, const Tensor& key_mask = {}) = 0;
  // Why steps run op by op where they were to be replayed; empty otherwise.
  virtual const std::string& recording_error() const = 0;
  // Whether steps are replayed from a recorded graph (false where they run op by op).
  virtual bool recorded() const { return false; }
};

// How a paged cache holds keys and values: in the model's activation dtype, or as Q8_0 rows (nn.h:
// 34 bytes for 32 values, a bit over half of bf16's; head dims that are multiples of 32).
enum class KvType : uint8_t { Model, Q8_0 };
const char* kv_type_name(KvType type);  // "model", "q8_0"
// The KvType of a name kv_type_name gives; false for any other.
bool parse_kv_type(std::string_view name, KvType& type);

// The engine's KV cache: for every layer, the keys and values of `blocks` blocks of `block_size`
// positions, (blocks, block_size, kv_heads, head_dim) each, on the model's device, in its dtype, or
// u8 Q8_0 pools (blocks, block_size, kv_heads, nn::paged_q8_0_row_bytes(head_dim)) (nn::paged_attention
// reads either). Which blocks hold which sequence's positions is KvBlocks's bookkeeping.
struct PagedKvCache {
  int64_t blocks = 0, block_size = 0;
  std::vector<Tensor> keys, values;  // one per layer
  // A block no sequence uses, which recorded decode steps (Model::paged_steps) give the padding
  // rows of a batch to write and read; -1: none.
  int32_t scratch = -1;

  // Copies whole blocks, (source, destination) pairs in order, in every layer: the copies
  // KvBlocks::take_copies lists before a sequence writes into a block it shared.
  void copy_blocks(std::span<const std::pair<int32_t, int32_t>> copies);
};

// One step of the engine over the paged cache: tokens of several sequences, packed (a decode
// step's one token each, prompt chunks many), each with its sequence, position and slot, in host
// memory. The sequences' positions before each token's must be in the cache already (earlier
// steps, or the prefix cache); the step writes its tokens' keys and values at their slots.
struct PagedBatch {
  std::vector<int32_t> tokens;     // (t)
  std::vector<int32_t> seqs;       // (t): each token's row of `tables`
  std::vector<int32_t> positions;  // (t): its position in its sequence
  std::vector<int64_t> slots;      // (t): block * block_size + position % block_size
  std::vector<int32_t> tables;     // (sequences, max_blocks), row-major: each sequence's blocks
  int64_t max_blocks = 0;
  std::vector<int64_t> logits_of;  // indices into tokens whose logits are wanted
};

// The engine's decode steps: one new token for each of the batch's sequences, all their logits
// wanted, which a model may run faster than forward_paged (a step recorded per batch size and
// replayed: Llama's PagedDecodeGraph).
class PagedSteps {
 public:
  virtual ~PagedSteps() = default;
  // forward_paged(batch, cache) for a batch whose token i is sequence i's one new token
  // (seqs[i] = i, logits_of = 0 .. n-1): the logits (n, vocab), f32, which the next step may
  // overwrite. ShapeError for another batch, or more sequences than the steps were made for.
  virtual Tensor step(const PagedBatch& batch) = 0;
  // Why steps run op by op where they were to be replayed; empty otherwise.
  virtual const std::string& recording_error() const = 0;
  // Whether steps are replayed from a recorded graph (false where they run op by op).
  virtual bool recorded() const { return false; }
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const std::string& architecture() const = 0;
  virtual int64_t vocab() const = 0;    // logits per position
  virtual int64_t context() const = 0;  // the positions it was trained for
  virtual int64_t parameters() const = 0;
  // The bytes of the weights a decode step reads (this rank's, where the model is split; for a
  // mixture of experts, one token's: the router and the share of the experts it chooses).
  virtual int64_t weight_bytes() const = 0;
  virtual Device device() const = 0;
  virtual DType dtype() const = 0;
  // The ranks the model is split over (undefined: none).
  virtual const dist::Communicator& communicator() const = 0;
  // The tokenizer of the file the model came from; nullptr for a model made without one.
  const Tokenizer* tokenizer() const { return tokenizer_ ? &*tokenizer_ : nullptr; }

  // One KV cache per layer for `batch` sequences of up to `capacity` positions each.
  virtual std::vector<nn::KvCache> make_cache(int64_t batch, int64_t capacity) const = 0;
  // The logits (b, t, vocab), f32, of tokens (b, t) (i64, u32 or i32) placed after the positions
  // the caches hold; each cache grows by t. key_mask, where defined, is (b, t_kv) f32, added to
  // every score of that sequence's queries (0: seen, -inf: hidden). last_only: the logits of the
  // last position alone, (b, 1, vocab). IndexError for a token outside the vocabulary.
  virtual Tensor forward(const Tensor& tokens, std::vector<nn::KvCache>& cache, const Tensor& key_mask = {},
                         bool last_only = false) const = 0;
  // Decode steps writing into `cache` (which must outlive them): the model's fastest way, or
  // forward() one position at a time.
  virtual std::unique_ptr<DecodeSteps> decode_steps(std::vector<nn::KvCache>& cache) const;

  // The paged cache: pools of `blocks` blocks of `block_size` positions for every layer (this
  // rank's KV heads) holding keys and values as `type` says, and the bytes one block takes over
  // every layer (to size a pool from a budget). ShapeError for a Q8_0 cache of a head dim that is
  // not a multiple of 32.
  virtual PagedKvCache make_paged_cache(int64_t blocks, int64_t block_size, KvType type) const = 0;
  virtual int64_t paged_block_bytes(int64_t block_size, KvType type) const = 0;
  // The logits (n, vocab), f32, of the tokens batch.logits_of names, their keys and values written
  // into `cache` at their slots. ShapeError for a batch whose vectors disagree in length or a cache
  // not this model's; IndexError for a token outside the vocabulary, and as nn::paged_attention
  // for sequences, positions and blocks out of range.
  virtual Tensor forward_paged(const PagedBatch& batch, PagedKvCache& cache) const = 0;
  // Decode steps of up to max_batch sequences writing into `cache` (which must outlive them): the
  // model's fastest way, or nullptr where that is forward_paged.
  virtual std::unique_ptr<PagedSteps> paged_steps(PagedKvCache& cache, int64_t max_batch) const;

  void set_tokenizer(std::optional<Tokenizer> tokenizer) { tokenizer_ = std::move(tokenizer); }

 private:
  std::optional<Tokenizer> tokenizer_;
};

// A model's files, opened and parsed once; copies share them.
class ModelFile {
 public:
  // A GGUF file, or a directory holding config.json and a checkpoint's weights. Errors as the
  // readers' (io.h), naming the path; NotSupportedError for an architecture wick does not run
  // (the message lists those it does).
  static ModelFile open(const std::string& path);

  const std::string& path() const;
  const std::string& architecture() const;
  // Whether the files hold a tokenizer (GGUF's tokenizer.ggml.*, a checkpoint's tokenizer.json),
  // and the tokenizer, parsed on first use and kept (a FormatError where there is none).
  bool has_tokenizer() const;
  const Tokenizer& tokenizer() const;
  // The dtype the file's dense weights are stored in (f32, f16 or bf16; by bytes, where they mix),
  // or nullopt where block formats hold most of its bytes. For a checkpoint, config.json's
  // torch_dtype (nullopt where it names none).
  std::optional<DType> stored_dtype() const;
  // The activations' dtype the model runs in on `device` unless LoadOptions::dtype says otherwise:
  // bf16 on a GPU; on the CPU, f16 or bf16 for a file that stores its weights so (its products read
  // them as stored, and never widened at load), else f32 (block formats' CPU kernels take f32 rows).
  DType default_dtype(Device device) const;
  // The model on options.device (this rank's part with options.comm), with the file's tokenizer
  // where it has one.
  std::shared_ptr<const Model> load(const LoadOptions& options = {}) const;

  struct Source;  // the parsed files (models/registry.cpp)
  const Source& source() const { return *source_; }

 private:
  std::shared_ptr<Source> source_;
};

// The architectures ModelFile::open knows, as files name them ("llama", "mistral", "qwen2", "qwen3", "phi3").
std::vector<std::string> architectures();

}  // namespace wick::models
