// cuDNN's fused attention (flash attention forward, inference: no statistics output) through
// cuDNN's graph API, as the one operation graph cuDNN's fused SDPA engines recognise:
//   S = q k^T (f32) * scale; causal: S = (row + t_kv - t_q >= col) ? S : -inf;
//   P = exp(S - max S) / sum exp(S - max S), rounded to the input dtype; out = P v.
// k enters as its transposed view (b, h_kv, d, t_kv), by strides; GQA is k and v with fewer heads.
// The softmax also computes its log-sum-exp statistics into a virtual tensor, as cuDNN's pattern
// for inference has them. The scale and the mask's constants are by-value tensors given at each
// run, so one plan serves every scale. Each (device, dtype, shapes, strides, alignment, causal)
// key builds its graph once and keeps, for the process, the first engine configuration of cuDNN's
// heuristics (mode A, then fallback) that makes a plan; a key cuDNN refuses is remembered as
// declined and wick's own kernels serve it. Runtime-compiled engines are not left out, unlike
// convolutions (dnn_cuda.cu): fused attention has no other engine, and the compilation is paid once
// per key. WICK_ATTENTION_LOG=1 prints one line per key to stderr: the engine or why none.
#include <cudnn.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/dnn_graph_cuda.h"
#include "gpu/gpu_backend.h"
#include "gpu/nn/attention.cuh"

namespace wick::gpu::nn {

namespace {

using cudnn::Desc;
using cudnn::kOk;
using Dims = std::array<int64_t, 4>;

bool log_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("WICK_ATTENTION_LOG");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

[[gnu::format(printf, 1, 2)]] void attention_log(const char* format, ...) {
  if (!log_enabled()) return;
  // One write per line, so that lines of several threads do not interleave.
  char line[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  std::fprintf(stderr, "wick attention: %s\n", line);
}

// The attributes this file sets, by name, for the log.
const char* attribute_name(int attribute) {
#define WICK_ATTRIBUTE(name) \
  { name, #name }
  static constexpr struct {
    int value;
    const char* name;
  } kNames[] = {
      WICK_ATTRIBUTE(CUDNN_ATTR_TENSOR_DATA_TYPE),
      WICK_ATTRIBUTE(CUDNN_ATTR_TENSOR_DIMENSIONS),
      WICK_ATTRIBUTE(CUDNN_ATTR_TENSOR_STRIDES),
      WICK_ATTRIBUTE(CUDNN_ATTR_TENSOR_UNIQUE_ID),
      WICK_ATTRIBUTE(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT),
      WICK_ATTRIBUTE(CUDNN_ATTR_TENSOR_IS_VIRTUAL),
      WICK_ATTRIBUTE(CUDNN_ATTR_TENSOR_IS_BY_VALUE),
      WICK_ATTRIBUTE(CUDNN_ATTR_POINTWISE_MODE),
      WICK_ATTRIBUTE(CUDNN_ATTR_POINTWISE_MATH_PREC),
      WICK_ATTRIBUTE(CUDNN_ATTR_POINTWISE_AXIS),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_POINTWISE_XDESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_POINTWISE_BDESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_POINTWISE_TDESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_POINTWISE_YDESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2),
      WICK_ATTRIBUTE(CUDNN_ATTR_REDUCTION_COMP_TYPE),
      WICK_ATTRIBUTE(CUDNN_ATTR_REDUCTION_OPERATOR),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_REDUCTION_DESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_REDUCTION_XDESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_REDUCTION_YDESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_MATMUL_COMP_TYPE),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_MATMUL_ADESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_MATMUL_BDESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_MATMUL_CDESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATION_MATMUL_DESC),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATIONGRAPH_OPS),
      WICK_ATTRIBUTE(CUDNN_ATTR_OPERATIONGRAPH_HANDLE),
  };
#undef WICK_ATTRIBUTE
  for (const auto& n : kNames)
    if (n.value == attribute) return n.name;
  return "an attribute";
}

// The problem as cuDNN sees it: q (b, h, t_q, d), k and v (b, h_kv, t_kv, d), strides in elements
// with every size-1 dim given the stride a packed layout of the dims inside it would have (cuDNN
// reads memory order from strides alone, and such views then share a key).
struct Problem {
  DType dt;
  int64_t b, h, h_kv, t_q, t_kv, d;
  Dims q_stride, k_stride, v_stride;
  bool causal;
};

Dims normalised_strides(const Dims& dims, const int64_t* stride) {
  Dims s{};
  for (int i = 3; i >= 0; --i) s[i] = dims[i] != 1 ? stride[i] : i == 3 ? 1 : s[i + 1] * dims[i + 1];
  return s;
}

// Element offset of the last element of a view, plus one.
int64_t extent(const Dims& dims, const Dims& strides) {
  int64_t e = 1;
  for (int i = 0; i < 4; ++i) e += (dims[i] - 1) * strides[i];
  return e;
}

std::string dims_string(const Dims& v) { return detail::str_cat("[", v[0], ", ", v[1], ", ", v[2], ", ", v[3], "]"); }

std::string describe(const AttentionGeom& g, DType dt, const Problem& p) {
  return detail::str_cat(dt, " q ", dims_string({p.b, p.h, p.t_q, p.d}), " strides ", dims_string(p.q_stride), ", k ",
                         dims_string({p.b, p.h_kv, p.t_kv, p.d}), " strides ", dims_string(p.k_stride), ", v strides ",
                         dims_string(p.v_stride), p.causal ? ", causal" : "", g.mask ? ", with a mask" : "",
                         g.window > 0 ? ", with a window" : "");
}

// Why wick does not offer the call to cuDNN, or null: what cuDNN's fused engines serve safely.
const char* unsupported(const AttentionGeom& g, DType dt, const Problem& p) {
  if (dt != DType::F16 && dt != DType::BF16) return "the dtype is not f16 or bf16";
  if (g.mask) return "an explicit mask";
  if (g.window > 0) return "a sliding window";
  if (p.b <= 0 || p.h <= 0 || p.h_kv <= 0 || p.t_q <= 0 || p.t_kv <= 0 || p.d <= 0) return "an empty dim";
  if (p.h % p.h_kv != 0) return "query heads not a multiple of key heads";
  if (p.d % 8 != 0 || p.d > 256) return "the head dim is not a multiple of 8 up to 256";
  // Bottom-right causal: a query row before the first key would see none.
  if (p.causal && p.t_q > p.t_kv) return "causal with more queries than keys";
  const Dims q_dims{p.b, p.h, p.t_q, p.d}, kv_dims{p.b, p.h_kv, p.t_kv, p.d};
  const Dims* dims[3] = {&q_dims, &kv_dims, &kv_dims};
  const Dims* strides[3] = {&p.q_stride, &p.k_stride, &p.v_stride};
  for (int t = 0; t < 3; ++t) {
    if ((*strides[t])[3] != 1) return "features not contiguous";
    // Rows are read as 16-byte packs: every other stride a positive multiple of 8 elements.
    for (int i = 0; i < 3; ++i) {
      const int64_t s = (*strides[t])[i];
      if ((*dims[t])[i] > 1 && (s <= 0 || s % 8 != 0)) return "a stride that is not a positive multiple of 16 bytes";
    }
    if (extent(*dims[t], *strides[t]) > std::numeric_limits<int32_t>::max()) return "a tensor of 2^31 elements or more";
  }
  if (p.b * p.h * p.t_q * p.d > std::numeric_limits<int32_t>::max()) return "an output of 2^31 elements or more";
  for (const void* ptr : {g.q, g.k, g.v, static_cast<const void*>(g.out)})
    if (cudnn::alignment_of(ptr) < 16) return "a tensor not 16-byte aligned";
  return nullptr;
}

// The data tensors' and the by-value scalars' ids; virtual tensors take ids from kVirtualUid on.
enum Uid : int64_t { kUidQ = 1, kUidK, kUidV, kUidO, kUidScale, kUidNegInf, kUidSeqKv, kUidSeqQ, kVirtualUid = 100 };

// Builds an operation graph into `parts`, finalising each descriptor as it comes. The first one
// cuDNN refuses is named in refused(); descriptors made after it may fail too and are not named.
class Builder {
 public:
  explicit Builder(std::deque<Desc>& parts) : parts_(parts) {}

  const std::string& refused() const { return refused_; }

  Desc& tensor(const char* name, int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
               bool is_virtual = false, bool by_value = false) {
    const int64_t alignment = 16;
    const bool yes = true;
    Desc& t = parts_.emplace_back(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
    if (is_virtual) t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &yes);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &yes);
    ready(t, "tensor", name);
    return t;
  }
  Desc& intermediate(const char* name, cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return tensor(name, next_uid_++, type, dims, strides, true);
  }
  // A scalar given by value (a host pointer in the variant pack), broadcast over 4-d tensors.
  Desc& scalar(const char* name, int64_t uid, cudnnDataType_t type) {
    return tensor(name, uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }

  // y = mode(x[, b[, t]]), computed in `math`; axis: GEN_INDEX's dim.
  void pointwise(const char* name, cudnnPointwiseMode_t mode, cudnnDataType_t math, const Desc& x, const Desc* b,
                 const Desc* t, const Desc& y, int64_t axis = -1) {
    Desc& pw = parts_.emplace_back(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &math);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    ready(pw, "pointwise descriptor", name);
    const float one = 1;
    Desc& op = parts_.emplace_back(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw).set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &one)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &one);
    add_op(op, name);
  }

  // y = reduction of x over the dims where y has size 1, in f32.
  void reduction(const char* name, cudnnReduceTensorOp_t reduce, const Desc& x, const Desc& y) {
    const cudnnDataType_t math = CUDNN_DATA_FLOAT;
    Desc& r = parts_.emplace_back(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    r.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &math)
        .set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &reduce);
    ready(r, "reduction descriptor", name);
    Desc& op = parts_.emplace_back(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    add_op(op, name);
  }

  // c = a b over the last two dims, batched over the first two (b's heads broadcast), in f32.
  void matmul(const char* name, const Desc& a, const Desc& b, const Desc& c) {
    const cudnnDataType_t math = CUDNN_DATA_FLOAT;
    Desc& m = parts_.emplace_back(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    m.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &math);
    ready(m, "matmul descriptor", name);
    Desc& op = parts_.emplace_back(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
    add_op(op, name);
  }

  // The operation graph of every operation so far, last in parts; false when cuDNN refuses it.
  bool graph(cudnnHandle_t handle) {
    Desc& graph = parts_.emplace_back(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops_.data(),
             static_cast<int64_t>(ops_.size()))
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
    ready(graph, "operation graph", "of attention");
    return refused_.empty();
  }

 private:
  void add_op(Desc& op, const char* name) {
    ready(op, "operation", name);
    ops_.push_back(op.get());
  }

  void ready(Desc& d, const char* kind, const char* name) {
    const cudnnStatus_t s = d.finalize();
    if (s == kOk || !refused_.empty()) return;
    if (d.failed_attribute() >= 0)
      refused_ =
          detail::str_cat("cuDNN refused the ", kind, " '", name, "': setting ", attribute_name(d.failed_attribute()),
                          " (", d.failed_attribute(), ") failed: ", cudnnGetErrorString(s));
    else
      refused_ = detail::str_cat("cuDNN refused the ", kind, " '", name, "' at finalize: ", cudnnGetErrorString(s));
  }

  std::deque<Desc>& parts_;  // a deque: references to its elements stay valid as it grows
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::string refused_;
  int64_t next_uid_ = kVirtualUid;
};

// The descriptors of one key's graph and its plan, kept for the process (a plan refers to the
// descriptors it was made from). No plan: cuDNN declined the key.
struct Fused {
  std::deque<Desc> parts;
  std::unique_ptr<Desc> plan;
  int64_t workspace = 0;
  bool bottom_right = false;     // the graph takes t_kv and t_q as by-value scalars
  std::atomic<bool> ran{false};  // the plan has run once
};

// Builds the attention graph for p into f; false (and why) when cuDNN refuses a part of it.
bool build_graph(Fused& f, const Problem& p, cudnnHandle_t handle, std::string* why) {
  Builder g(f.parts);
  const cudnnDataType_t io = cudnn::data_type(p.dt), f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32,
                        boolean = CUDNN_DATA_BOOLEAN;
  const Dims out_dims{p.b, p.h, p.t_q, p.d}, out_strides{p.h * p.t_q * p.d, p.t_q * p.d, p.d, 1};
  // k as (b, h_kv, d, t_kv): its last two dims and strides swapped.
  const Dims kt_dims{p.b, p.h_kv, p.d, p.t_kv}, kt_strides{p.k_stride[0], p.k_stride[1], p.k_stride[3], p.k_stride[2]};
  const Dims s_dims{p.b, p.h, p.t_q, p.t_kv}, s_strides{p.h * p.t_q * p.t_kv, p.t_q * p.t_kv, p.t_kv, 1};
  const Dims row_dims{p.b, p.h, p.t_q, 1}, row_strides{p.h * p.t_q, p.t_q, 1, 1};

  const Desc& q = g.tensor("q", kUidQ, io, {p.b, p.h, p.t_q, p.d}, p.q_stride);
  const Desc& kt = g.tensor("k transposed", kUidK, io, kt_dims, kt_strides);
  const Desc& v = g.tensor("v", kUidV, io, {p.b, p.h_kv, p.t_kv, p.d}, p.v_stride);
  const Desc& o = g.tensor("out", kUidO, io, out_dims, out_strides);
  const Desc& scale = g.scalar("scale", kUidScale, f32);

  const Desc& s = g.intermediate("q k^T", f32, s_dims, s_strides);
  g.matmul("q k^T", q, kt, s);
  const Desc& scaled = g.intermediate("scaled scores", f32, s_dims, s_strides);
  g.pointwise("scale", CUDNN_POINTWISE_MUL, f32, s, &scale, nullptr, scaled);
  const Desc* scores = &scaled;
  if (p.causal) {
    // Keep key col for query row when row + (t_kv - t_q) >= col: wick's bottom-right alignment.
    const Desc& row = g.intermediate("row index", i32, s_dims, s_strides);
    g.pointwise("row index", CUDNN_POINTWISE_GEN_INDEX, f32, scaled, nullptr, nullptr, row, 2);
    const Desc& col = g.intermediate("column index", i32, s_dims, s_strides);
    g.pointwise("column index", CUDNN_POINTWISE_GEN_INDEX, f32, scaled, nullptr, nullptr, col, 3);
    const Desc* diagonal = &row;
    f.bottom_right = p.t_q != p.t_kv;
    if (f.bottom_right) {
      const Desc& seq_kv = g.scalar("t_kv", kUidSeqKv, i32);
      const Desc& seq_q = g.scalar("t_q", kUidSeqQ, i32);
      const Desc& plus_kv = g.intermediate("row + t_kv", i32, s_dims, s_strides);
      g.pointwise("row + t_kv", CUDNN_POINTWISE_ADD, i32, row, &seq_kv, nullptr, plus_kv);
      const Desc& shifted = g.intermediate("row + t_kv - t_q", i32, s_dims, s_strides);
      g.pointwise("row + t_kv - t_q", CUDNN_POINTWISE_SUB, i32, plus_kv, &seq_q, nullptr, shifted);
      diagonal = &shifted;
    }
    const Desc& keep = g.intermediate("causal mask", boolean, s_dims, s_strides);
    g.pointwise("row >= column", CUDNN_POINTWISE_CMP_GE, boolean, *diagonal, &col, nullptr, keep);
    const Desc& neg_inf = g.scalar("-inf", kUidNegInf, f32);
    const Desc& masked = g.intermediate("masked scores", f32, s_dims, s_strides);
    g.pointwise("causal select", CUDNN_POINTWISE_BINARY_SELECT, f32, scaled, &neg_inf, &keep, masked);
    scores = &masked;
  }

  const Desc& max = g.intermediate("row max", f32, row_dims, row_strides);
  g.reduction("row max", CUDNN_REDUCE_TENSOR_MAX, *scores, max);
  const Desc& centred = g.intermediate("scores - max", f32, s_dims, s_strides);
  g.pointwise("scores - max", CUDNN_POINTWISE_SUB, f32, *scores, &max, nullptr, centred);
  const Desc& e = g.intermediate("exp", f32, s_dims, s_strides);
  g.pointwise("exp", CUDNN_POINTWISE_EXP, f32, centred, nullptr, nullptr, e);
  const Desc& sum = g.intermediate("row sum", f32, row_dims, row_strides);
  g.reduction("row sum", CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const Desc& log_sum = g.intermediate("log sum", f32, row_dims, row_strides);
  g.pointwise("log sum", CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, log_sum);
  const Desc& stats = g.intermediate("statistics", f32, row_dims, row_strides);
  g.pointwise("max + log sum", CUDNN_POINTWISE_ADD, f32, max, &log_sum, nullptr, stats);
  // The probabilities enter the second product in the input dtype, as the fused engines take them.
  const Desc& probs = g.intermediate("probabilities", io, s_dims, s_strides);
  g.pointwise("exp / sum", CUDNN_POINTWISE_DIV, f32, e, &sum, nullptr, probs);
  g.matmul("probabilities v", probs, v, o);

  if (!g.graph(handle)) {
    *why = g.refused();
    return false;
  }
  return true;
}

// Takes the first engine configuration the heuristics propose (mode A, then fallback) that makes
// a plan. Returns whether one did, and in `log` which engine or why none.
bool choose_plan(Fused& f, cudnnHandle_t handle, std::string* log) {
  const Desc& graph = f.parts.back();
  std::string error_a, error_fallback;
  std::vector<Desc> configs = cudnn::engine_configs(graph, CUDNN_HEUR_MODE_A, &error_a);
  for (Desc& d : cudnn::engine_configs(graph, CUDNN_HEUR_MODE_FALLBACK, &error_fallback))
    configs.push_back(std::move(d));
  std::string tried;
  for (Desc& config : configs) {
    const cudnn::EngineInfo engine = cudnn::read_engine(config);
    std::unique_ptr<Desc> plan = cudnn::make_plan(handle, config);
    int64_t workspace = 0;
    cudnnStatus_t s = plan->finalize();
    if (s == kOk) s = cudnn::workspace_size(*plan, &workspace);
    if (s != kOk) {
      tried += detail::str_cat(tried.empty() ? "" : "; ", "engine ", engine.index, ": ", cudnnGetErrorString(s));
      continue;
    }
    std::string notes;
    for (const cudnnBackendNumericalNote_t n : engine.numerical) notes += detail::str_cat(" ", static_cast<int>(n));
    *log = detail::str_cat("cuDNN engine ", engine.index, " serves it (workspace ", workspace, " B, numerical notes [",
                           notes, " ]",
                           engine.has(CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) ? ", compiled at run time" : "", ")");
    f.parts.push_back(std::move(config));  // the plan refers to it
    f.plan = std::move(plan);
    f.workspace = workspace;
    return true;
  }
  if (!configs.empty()) {
    *log = detail::str_cat("no engine configuration makes a plan (", tried, ")");
  } else {
    *log = "the heuristics propose no engine configuration";
    for (const std::string* e : {&error_a, &error_fallback})
      if (!e->empty()) *log += detail::str_cat("; ", *e);
  }
  return false;
}

}  // namespace

bool launch_attention_cudnn(const AttentionGeom& g, DType dt, GpuBackend& backend) {
  Problem p{dt, g.batch, g.heads, g.kv_heads, g.t_q, g.t_kv, g.d, {}, {}, {}, g.causal};
  p.q_stride = normalised_strides({p.b, p.h, p.t_q, p.d}, g.q_stride);
  p.k_stride = normalised_strides({p.b, p.h_kv, p.t_kv, p.d}, g.k_stride);
  p.v_stride = normalised_strides({p.b, p.h_kv, p.t_kv, p.d}, g.v_stride);

  // The cache key: everything the decision and the plan depend on (not the scale: a by-value
  // tensor, given at each run).
  std::vector<int64_t> key{backend.device().index(),
                           static_cast<int64_t>(dt),
                           p.b,
                           p.h,
                           p.h_kv,
                           p.t_q,
                           p.t_kv,
                           p.d,
                           p.causal,
                           g.mask != nullptr,
                           g.window > 0};
  for (const Dims* s : {&p.q_stride, &p.k_stride, &p.v_stride}) key.insert(key.end(), s->begin(), s->end());
  for (const void* ptr : {g.q, g.k, g.v, static_cast<const void*>(g.out)}) key.push_back(cudnn::alignment_of(ptr));

  static std::mutex mutex;
  static std::map<std::vector<int64_t>, std::shared_ptr<Fused>> cache;
  std::shared_ptr<Fused> fused;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) fused = it->second;
  }
  if (!fused) {
    fused = std::make_shared<Fused>();
    std::string log;
    if (const char* reason = unsupported(g, dt, p)) {
      log = reason;
    } else {
      // Without a cuDNN that starts on this device, wick's own kernels serve every key.
      cudnnHandle_t handle = nullptr;
      try {
        handle = cudnn::handle_for(backend, "attention");
      } catch (const ::wick::Error& e) {
        log = e.what();
      }
      if (handle && build_graph(*fused, p, handle, &log)) choose_plan(*fused, handle, &log);
    }
    if (log_enabled())
      attention_log("%s: %s%s", describe(g, dt, p).c_str(), log.c_str(),
                    fused->plan ? "" : "; wick's own kernels serve it");
    std::lock_guard<std::mutex> lock(mutex);
    fused = cache.emplace(key, fused).first->second;
  }
  if (!fused->plan) return false;

  cudnnHandle_t handle = cudnn::handle_for(backend, "attention");
  StoragePtr workspace;
  try {
    if (fused->workspace > 0) workspace = backend.alloc(static_cast<size_t>(fused->workspace));
  } catch (const OutOfMemoryError&) {
    attention_log("%s: no memory for cuDNN's workspace of %lld B; wick's own kernels serve this call",
                  describe(g, dt, p).c_str(), static_cast<long long>(fused->workspace));
    return false;
  }
  const float scale = static_cast<float>(g.scale);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int32_t seq_kv = static_cast<int32_t>(p.t_kv), seq_q = static_cast<int32_t>(p.t_q);
  int64_t uids[8];
  void* pointers[8];
  int64_t n = 0;
  auto bind = [&](int64_t uid, const void* data) {
    uids[n] = uid;
    pointers[n++] = const_cast<void*>(data);
  };
  bind(kUidQ, g.q);
  bind(kUidK, g.k);
  bind(kUidV, g.v);
  bind(kUidO, g.out);
  bind(kUidScale, &scale);  // by-value tensors: host pointers to their values
  if (p.causal) bind(kUidNegInf, &neg_inf);
  if (fused->bottom_right) {
    bind(kUidSeqKv, &seq_kv);
    bind(kUidSeqQ, &seq_q);
  }
  const cudnnStatus_t s =
      cudnn::execute(handle, *fused->plan, n, uids, pointers, workspace ? workspace->data() : nullptr);
  if (s == kOk) {
    fused->ran.store(true, std::memory_order_relaxed);
    backend.library_queued();
    return true;
  }
  // A plan that never ran is declined from now on; one that ran before and fails now is an error.
  if (fused->ran.load(std::memory_order_relaxed))
    cudnn::fail(s, "cudnnBackendExecute", __FILE__, __LINE__, "attention: " + describe(g, dt, p));
  (void)last_error();  // a failed launch inside cuDNN must not reach wick's next launch check
  attention_log("%s: cuDNN's plan failed on its first run: %s; wick's own kernels serve it", describe(g, dt, p).c_str(),
                cudnnGetErrorString(s));
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = std::make_shared<Fused>();
  return false;
}

}  // namespace wick::gpu::nn
