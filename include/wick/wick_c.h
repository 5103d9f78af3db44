/* wick's C API: a stable ABI over the C++ library, for C, Rust (hand-written extern "C"
 * declarations; see bindings/rust) and any language with a C FFI.
 *
 * Conventions:
 * - Every call that can fail returns a wick_status; WICK_OK is 0. On failure, the outputs are left
 *   alone and wick_last_error() gives the message (op, shapes, dtypes, device) in this thread. No
 *   C++ exception crosses this boundary.
 * - Tensors are opaque handles: every wick_tensor* a call hands out is the caller's, to release
 *   with wick_tensor_free. Handles share memory as C++ tensors do (a view shares its source's
 *   storage, which lives while any handle over it lives).
 * - Handles (wick_tensor*, wick_qtensor*, wick_model*) are checked, not trusted. A handle is a
 *   token, never an address to dereference: wick keeps a table of the live ones. Freeing a handle
 *   twice, or one wick never made, does nothing but set wick_last_error() (the free functions
 *   return void); every other call refuses a handle that is not live with WICK_ERROR_ARGUMENT,
 *   "not a live wick_tensor handle (freed already, or never made by wick)". This holds in every
 *   build, release included, and it holds after the memory or table slot of a freed handle serves
 *   a new one: a handle carries a generation, and a slot is retired rather than repeat one, so a
 *   freed handle never becomes live again (no "ABA" mix-up with a later tensor, which checking
 *   addresses could not rule out: malloc hands a freed block straight back). What no check can
 *   catch: a stray value that happens to equal a live handle of the same kind is taken for it.
 * - A free that succeeds, or of NULL, leaves wick_last_error() alone, so that cleanup on an error
 *   path keeps the failure's message. A free in one thread and a call with the same handle in
 *   another are safe: the call either holds the value for its whole run or refuses the handle.
 * - Shapes are (const int64_t* shape, int rank) pairs; rank 0 is a scalar and shape may be NULL.
 *   Dims may be negative, counting from the end, as in the C++ API.
 * - Names follow the C++ API (docs/api.md lists them side by side). The numbering of every enum is
 *   part of the ABI: values are only ever added. Calls take enum values as int32_t (dtype, op,
 *   kind), so that a value this library does not know is a WICK_ERROR_ARGUMENT, never undefined
 *   behaviour.
 */
#ifndef WICK_WICK_C_H
#define WICK_WICK_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Raised when a call changes meaning; a caller may check wick_c_abi_version() against it. */
#define WICK_C_ABI_VERSION 2

typedef enum wick_status {
  WICK_OK = 0,
  WICK_ERROR_ARGUMENT = 1,      /* a null or freed handle, a null pointer, an unknown enum, a size that disagrees */
  WICK_ERROR_SHAPE = 2,         /* wick::ShapeError */
  WICK_ERROR_DTYPE = 3,         /* wick::DTypeError */
  WICK_ERROR_DEVICE = 4,        /* wick::DeviceError */
  WICK_ERROR_INDEX = 5,         /* wick::IndexError */
  WICK_ERROR_OUT_OF_MEMORY = 6, /* wick::OutOfMemoryError */
  WICK_ERROR_NOT_SUPPORTED = 7, /* wick::NotSupportedError */
  WICK_ERROR_FORMAT = 8,        /* wick::io::FormatError: a bad GGUF or safetensors file */
  WICK_ERROR_DIST = 9,          /* wick::dist::DistError */
  WICK_ERROR_OTHER = 10         /* any other failure (a file that cannot be opened, ...) */
} wick_status;

/* The numbering of wick::DType. */
typedef enum wick_dtype {
  WICK_U8 = 0,
  WICK_U32 = 1,
  WICK_I16 = 2,
  WICK_I32 = 3,
  WICK_I64 = 4,
  WICK_BF16 = 5,
  WICK_F16 = 6,
  WICK_F32 = 7,
  WICK_F64 = 8,
  WICK_F8E4M3 = 9
} wick_dtype;

typedef enum wick_device_type { WICK_DEVICE_CPU = 0, WICK_DEVICE_CUDA = 1, WICK_DEVICE_ROCM = 2 } wick_device_type;

/* A device is a value, not a handle: (type, ordinal), as "cuda:1". */
typedef struct wick_device {
  int32_t type; /* a wick_device_type */
  int32_t index;
} wick_device;

typedef struct wick_tensor wick_tensor;
typedef struct wick_qtensor wick_qtensor;
typedef struct wick_model wick_model;

/* ---- the library ---------------------------------------------------------------------------- */
const char* wick_version(void);               /* "0.1.0" */
int wick_c_abi_version(void);                 /* WICK_C_ABI_VERSION of the library loaded */
const char* wick_last_error(void);            /* this thread's last failure; "" after a success */
const char* wick_status_name(int32_t status); /* "WICK_ERROR_SHAPE" */
size_t wick_dtype_size(int32_t dtype);        /* bytes per element; 0 for an unknown dtype */
const char* wick_dtype_name(int32_t dtype);   /* "f32"; "" for an unknown dtype */

/* ---- devices -------------------------------------------------------------------------------- */
/* "cpu", "cuda", "cuda:1", "rocm:0". */
wick_status wick_device_parse(const char* text, wick_device* out);
/* Devices of a type present (1 for the CPU, 0 for a backend not built in). */
wick_status wick_device_count(int32_t type, int* out);
/* Whether the backend of `type` is compiled in (1) or not (0). */
int wick_backend_built(int32_t type);
/* describe_device's line, truncated to cap - 1 bytes and NUL-terminated; *len (if not NULL) gets
 * the whole line's length. */
wick_status wick_device_describe(wick_device device, char* buf, size_t cap, size_t* len);
wick_status wick_synchronize(wick_device device);
/* memory_use (wick/device.h): the bytes wick's allocator has handed out on the device and not had
 * back (*in_use), and the most at once since the process started or wick_reset_peak_memory
 * (*peak); either may be NULL. */
wick_status wick_memory_use(wick_device device, int64_t* in_use, int64_t* peak);
wick_status wick_reset_peak_memory(wick_device device);
wick_status wick_manual_seed(uint64_t seed, wick_device device);
/* The cudaStream_t / hipStream_t wick queues the device's work on (NULL for the CPU). */
wick_status wick_native_stream(wick_device device, void** out);

/* ---- tensors: creation ---------------------------------------------------------------------- */
/* NULL is ignored; a handle already freed (or never made by wick) is left alone and sets
 * wick_last_error(), never a crash. The storage goes when the last handle and view over it go. */
void wick_tensor_free(wick_tensor* t);
/* A new handle to the same tensor (no copy). */
wick_status wick_tensor_retain(const wick_tensor* t, wick_tensor** out);
/* Copies nbytes (numel x the dtype's size) of row-major host data. */
wick_status wick_tensor_from_host(const void* data, size_t nbytes, int32_t dtype, const int64_t* shape, int rank,
                                  wick_device device, wick_tensor** out);
/* A tensor over memory the caller owns (device memory for a GPU), no copy: data is element 0,
 * strides in elements (non-negative; NULL: contiguous). release(ctx) is called once the last
 * handle and view over it are gone (release may be NULL). */
wick_status wick_tensor_from_blob(void* data, const int64_t* shape, const int64_t* strides, int rank, int32_t dtype,
                                  wick_device device, void (*release)(void* ctx), void* ctx, wick_tensor** out);
wick_status wick_tensor_zeros(const int64_t* shape, int rank, int32_t dtype, wick_device device, wick_tensor** out);
wick_status wick_tensor_ones(const int64_t* shape, int rank, int32_t dtype, wick_device device, wick_tensor** out);
wick_status wick_tensor_full(const int64_t* shape, int rank, double value, int32_t dtype, wick_device device,
                             wick_tensor** out);
wick_status wick_tensor_arange(double start, double end, double step, int32_t dtype, wick_device device,
                               wick_tensor** out);
wick_status wick_tensor_eye(int64_t n, int32_t dtype, wick_device device, wick_tensor** out);
wick_status wick_tensor_rand_uniform(const int64_t* shape, int rank, double lo, double up, int32_t dtype,
                                     wick_device device, wick_tensor** out);
wick_status wick_tensor_rand_normal(const int64_t* shape, int rank, double mean, double std, int32_t dtype,
                                    wick_device device, wick_tensor** out);

/* ---- tensors: inspection and data ------------------------------------------------------------ */
wick_status wick_tensor_rank(const wick_tensor* t, int* out);
wick_status wick_tensor_shape(const wick_tensor* t, int64_t* out);   /* rank entries */
wick_status wick_tensor_strides(const wick_tensor* t, int64_t* out); /* rank entries, in elements */
wick_status wick_tensor_offset(const wick_tensor* t, int64_t* out);  /* in elements */
wick_status wick_tensor_numel(const wick_tensor* t, int64_t* out);
wick_status wick_tensor_dtype(const wick_tensor* t, wick_dtype* out);
wick_status wick_tensor_device(const wick_tensor* t, wick_device* out);
wick_status wick_tensor_is_contiguous(const wick_tensor* t, int* out);
/* The address of element 0 on the tensor's device (Tensor::data_ptr). */
wick_status wick_tensor_data_ptr(const wick_tensor* t, void** out);
/* Every element, row-major, into nbytes (numel x the dtype's size) of host memory. */
wick_status wick_tensor_to_host(const wick_tensor* t, void* dst, size_t nbytes);
/* PyTorch-style text of the values (operator<<), as wick_device_describe fills buf. */
wick_status wick_tensor_format(const wick_tensor* t, char* buf, size_t cap, size_t* len);
wick_status wick_tensor_to_dtype(const wick_tensor* t, int32_t dtype, wick_tensor** out);
wick_status wick_tensor_to_device(const wick_tensor* t, wick_device device, wick_tensor** out);
wick_status wick_tensor_contiguous(const wick_tensor* t, wick_tensor** out);
wick_status wick_tensor_copy(const wick_tensor* t, wick_tensor** out);

/* ---- views (no data moves) ------------------------------------------------------------------- */
wick_status wick_narrow(const wick_tensor* t, int64_t dim, int64_t start, int64_t len, wick_tensor** out);
wick_status wick_slice(const wick_tensor* t, int64_t dim, int64_t start, int64_t end, int64_t step, wick_tensor** out);
wick_status wick_select(const wick_tensor* t, int64_t dim, int64_t index, wick_tensor** out);
wick_status wick_transpose(const wick_tensor* t, int64_t dim0, int64_t dim1, wick_tensor** out);
wick_status wick_permute(const wick_tensor* t, const int64_t* dims, int rank, wick_tensor** out);
wick_status wick_broadcast_as(const wick_tensor* t, const int64_t* shape, int rank, wick_tensor** out);
wick_status wick_squeeze(const wick_tensor* t, int64_t dim, wick_tensor** out);
wick_status wick_unsqueeze(const wick_tensor* t, int64_t dim, wick_tensor** out);
wick_status wick_reshape(const wick_tensor* t, const int64_t* shape, int rank, wick_tensor** out);
wick_status wick_flatten(const wick_tensor* t, int64_t start_dim, int64_t end_dim, wick_tensor** out);

/* ---- elementwise ----------------------------------------------------------------------------- */
/* clang-format off */
typedef enum wick_unary_op {
  WICK_EXP = 0, WICK_LOG, WICK_SIN, WICK_COS, WICK_TANH, WICK_ABS, WICK_NEG, WICK_RECIP, WICK_SQR, WICK_SQRT,
  WICK_GELU, WICK_GELU_ERF, WICK_ERF, WICK_RELU, WICK_SILU, WICK_SIGMOID, WICK_FLOOR, WICK_CEIL, WICK_ROUND,
  WICK_SIGN
} wick_unary_op;
/* The comparisons give u8 (1 true, 0 false). */
typedef enum wick_binary_op {
  WICK_ADD = 0, WICK_SUB, WICK_MUL, WICK_DIV, WICK_MAXIMUM, WICK_MINIMUM, WICK_EQ, WICK_NE, WICK_LT, WICK_LE,
  WICK_GT, WICK_GE
} wick_binary_op;
/* clang-format on */
wick_status wick_unary(int32_t op, const wick_tensor* x, wick_tensor** out);
/* Numpy broadcasting; both operands of one dtype. */
wick_status wick_binary(int32_t op, const wick_tensor* a, const wick_tensor* b, wick_tensor** out);
/* With a number: an integral value is taken as an integer (fit to integer dtypes is checked). */
wick_status wick_binary_scalar(int32_t op, const wick_tensor* a, double b, wick_tensor** out);
wick_status wick_affine(const wick_tensor* x, double mul, double add, wick_tensor** out);
wick_status wick_powf(const wick_tensor* x, double exponent, wick_tensor** out);
wick_status wick_elu(const wick_tensor* x, double alpha, wick_tensor** out);
wick_status wick_clamp(const wick_tensor* x, double lo, double hi, wick_tensor** out);
wick_status wick_where_cond(const wick_tensor* cond, const wick_tensor* on_true, const wick_tensor* on_false,
                            wick_tensor** out);

/* ---- reductions and sorting ------------------------------------------------------------------ */
typedef enum wick_reduce_op { WICK_SUM = 0, WICK_MEAN, WICK_MAX, WICK_MIN, WICK_VAR } wick_reduce_op;
/* Over `dims` (ndims of them); ndims 0 reduces every dim to rank 0 (not for WICK_VAR). */
wick_status wick_reduce(int32_t op, const wick_tensor* x, const int64_t* dims, int ndims, int keepdim,
                        wick_tensor** out);
wick_status wick_argmax(const wick_tensor* x, int64_t dim, int keepdim, wick_tensor** out); /* u32 */
wick_status wick_argmin(const wick_tensor* x, int64_t dim, int keepdim, wick_tensor** out);
wick_status wick_cumsum(const wick_tensor* x, int64_t dim, wick_tensor** out);
wick_status wick_argsort(const wick_tensor* x, int ascending, wick_tensor** out); /* last dim, u32, stable */
wick_status wick_sort(const wick_tensor* x, int ascending, wick_tensor** values, wick_tensor** indices);

/* ---- products, convolution, pooling, upsampling ---------------------------------------------- */
wick_status wick_matmul(const wick_tensor* a, const wick_tensor* b, wick_tensor** out);
wick_status wick_dot(const wick_tensor* a, const wick_tensor* b, wick_tensor** out);
wick_status wick_mv(const wick_tensor* m, const wick_tensor* v, wick_tensor** out);
typedef struct wick_conv_options {
  int64_t padding[2]; /* conv1d uses index 0; conv2d (h, w) */
  int64_t stride[2];
  int64_t dilation[2];
  int64_t output_padding[2]; /* transposed convolutions only */
  int64_t groups;
} wick_conv_options;
/* NULL options: padding 0, stride 1, dilation 1, output_padding 0, groups 1. */
wick_status wick_conv1d(const wick_tensor* x, const wick_tensor* kernel, const wick_conv_options* options,
                        wick_tensor** out);
wick_status wick_conv_transpose1d(const wick_tensor* x, const wick_tensor* kernel, const wick_conv_options* options,
                                  wick_tensor** out);
wick_status wick_conv2d(const wick_tensor* x, const wick_tensor* kernel, const wick_conv_options* options,
                        wick_tensor** out);
wick_status wick_conv_transpose2d(const wick_tensor* x, const wick_tensor* kernel, const wick_conv_options* options,
                                  wick_tensor** out);
wick_status wick_avg_pool2d(const wick_tensor* x, int64_t kernel_h, int64_t kernel_w, int64_t stride_h,
                            int64_t stride_w, wick_tensor** out);
wick_status wick_max_pool2d(const wick_tensor* x, int64_t kernel_h, int64_t kernel_w, int64_t stride_h,
                            int64_t stride_w, wick_tensor** out);
wick_status wick_upsample_nearest1d(const wick_tensor* x, int64_t size, wick_tensor** out);
wick_status wick_upsample_nearest2d(const wick_tensor* x, int64_t height, int64_t width, wick_tensor** out);
wick_status wick_upsample_bilinear2d(const wick_tensor* x, int64_t height, int64_t width, int align_corners,
                                     wick_tensor** out);

/* ---- indexing, joining ----------------------------------------------------------------------- */
wick_status wick_index_select(const wick_tensor* x, const wick_tensor* ids, int64_t dim, wick_tensor** out);
wick_status wick_gather(const wick_tensor* x, const wick_tensor* ids, int64_t dim, wick_tensor** out);
wick_status wick_scatter(const wick_tensor* x, const wick_tensor* ids, const wick_tensor* src, int64_t dim,
                         wick_tensor** out);
wick_status wick_scatter_add(const wick_tensor* x, const wick_tensor* ids, const wick_tensor* src, int64_t dim,
                             wick_tensor** out);
wick_status wick_index_add(const wick_tensor* x, const wick_tensor* ids, const wick_tensor* src, int64_t dim,
                           wick_tensor** out);
wick_status wick_pad_with_zeros(const wick_tensor* x, int64_t dim, int64_t left, int64_t right, wick_tensor** out);
wick_status wick_cat(const wick_tensor* const* tensors, size_t count, int64_t dim, wick_tensor** out);
wick_status wick_stack(const wick_tensor* const* tensors, size_t count, int64_t dim, wick_tensor** out);
wick_status wick_embedding(const wick_tensor* weight, const wick_tensor* ids, wick_tensor** out);

/* ---- in place: writes through the handle into its storage ------------------------------------ */
wick_status wick_fill(wick_tensor* t, double value);
wick_status wick_copy_from(wick_tensor* t, const wick_tensor* src);
wick_status wick_slice_set(wick_tensor* t, const wick_tensor* src, int64_t dim, int64_t start);
wick_status wick_scatter_set(wick_tensor* t, const wick_tensor* ids, const wick_tensor* src, int64_t dim);
wick_status wick_scatter_add_set(wick_tensor* t, const wick_tensor* ids, const wick_tensor* src, int64_t dim);

/* ---- transformer ops (wick/nn.h) ------------------------------------------------------------- */
wick_status wick_softmax(const wick_tensor* x, int64_t dim, wick_tensor** out);
wick_status wick_log_softmax(const wick_tensor* x, int64_t dim, wick_tensor** out);
wick_status wick_rms_norm(const wick_tensor* x, const wick_tensor* weight, double eps, wick_tensor** out);
/* sum = x + residual and normed = rms_norm(sum, weight, eps), both new tensors. */
wick_status wick_add_rms_norm(const wick_tensor* x, const wick_tensor* residual, const wick_tensor* weight, double eps,
                              wick_tensor** sum, wick_tensor** normed);
/* silu(gate) * up. */
wick_status wick_silu_mul(const wick_tensor* gate, const wick_tensor* up, wick_tensor** out);
/* bias may be NULL. */
wick_status wick_layer_norm(const wick_tensor* x, const wick_tensor* weight, const wick_tensor* bias, double eps,
                            wick_tensor** out);
typedef enum wick_rope_kind { WICK_ROPE = 0, WICK_ROPE_I = 1, WICK_ROPE_THD = 2 } wick_rope_kind;
wick_status wick_rope(int32_t kind, const wick_tensor* x, const wick_tensor* cos, const wick_tensor* sin,
                      wick_tensor** out);
/* cos and sin tables of shape (t, head_dim / 2) for positions offset .. offset + t - 1. */
wick_status wick_rope_tables(int64_t head_dim, int64_t t, double theta, int64_t offset, int32_t dtype,
                             wick_device device, wick_tensor** cos, wick_tensor** sin);
/* mask may be NULL; scale <= 0 means 1 / sqrt(d); window 0 means none. */
wick_status wick_scaled_dot_product_attention(const wick_tensor* q, const wick_tensor* k, const wick_tensor* v,
                                              int causal, double scale, const wick_tensor* mask, int64_t window,
                                              wick_tensor** out);

/* ---- GGUF block formats (wick/quant.h) ------------------------------------------------------- */
/* As wick_tensor_free: NULL is ignored, a handle not live sets wick_last_error() and does nothing. */
void wick_qtensor_free(wick_qtensor* q);
/* qtype: the ggml type number (2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 9 Q8_1, 10 Q2_K ... 15 Q8_K). */
wick_status wick_qtensor_from_blocks(int32_t qtype, int64_t rows, int64_t cols, const void* data, size_t nbytes,
                                     wick_device device, wick_qtensor** out);
wick_status wick_quantize(const wick_tensor* w, int32_t qtype, wick_qtensor** out); /* w: f32 (rows, cols), CPU */
wick_status wick_dequantize(const wick_qtensor* w, int32_t dtype, wick_tensor** out);
wick_status wick_qmatmul(const wick_tensor* x, const wick_qtensor* w, wick_tensor** out);
wick_status wick_qtensor_to_device(const wick_qtensor* w, wick_device device, wick_qtensor** out);
/* The packed blocks as a u8 tensor (GGUF's bytes). */
wick_status wick_qtensor_bytes(const wick_qtensor* w, wick_tensor** out);

/* ---- the model runner (wick/models) ---------------------------------------------------------- */
/* A Llama-family model and its tokenizer from a GGUF file or a Hugging Face checkpoint folder,
 * its float weights as `dtype` on `device`. */
wick_status wick_model_open(const char* path, wick_device device, int32_t dtype, wick_model** out);
/* The same model split over n_devices >= 2 devices (tensor parallel: each holds its share of the
 * heads and of the MLP, with the collectives between them), run as one model by every call here.
 * A device may repeat (CPU ranks); the dtype is the same on each. */
wick_status wick_model_open_split(const char* path, const wick_device* devices, size_t n_devices, int32_t dtype,
                                  wick_model** out);
/* As wick_tensor_free: NULL is ignored, a handle not live sets wick_last_error() and does nothing.
 * A call running on the model in another thread keeps it until that call returns. */
void wick_model_free(wick_model* m);
/* Token ids of `text` (with BOS where the tokenizer adds it) into ids[0 .. cap); *count gets how
 * many there are (call with cap 0 to ask). */
wick_status wick_model_encode(const wick_model* m, const char* text, int32_t* ids, size_t cap, size_t* count);
/* The text of ids, as wick_device_describe fills buf. */
wick_status wick_model_decode(const wick_model* m, const int32_t* ids, size_t count, char* buf, size_t cap,
                              size_t* len);
typedef struct wick_generate_options {
  int64_t max_tokens;        /* new tokens, at most */
  double temperature;        /* 0: greedy */
  int64_t top_k;             /* 0: all */
  double top_p;              /* 1: all */
  double min_p;              /* 0: none */
  double repetition_penalty; /* 1: none */
  uint64_t seed;
  double presence_penalty;  /* OpenAI's: subtracted from the logit of each token already in the
                               window (repetition_penalty's); 0: none */
  double frequency_penalty; /* ... and this times its count there; 0: none */
} wick_generate_options;
/* max_tokens 128, greedy, no penalties, seed 0. */
wick_generate_options wick_generate_defaults(void);
/* Called with each new piece of text (complete UTF-8 characters) and its token; a nonzero return
 * stops generation. */
typedef int (*wick_token_callback)(const char* text, size_t len, int32_t token, void* user);
/* (After the last token, text still held back, an unfinished character, comes with token -1.) */
typedef struct wick_generate_stats {
  int64_t prompt_tokens;
  int64_t generated_tokens;
  double prompt_seconds;
  double generate_seconds;
} wick_generate_stats;
/* Generates from `prompt` until an end token or max_tokens; on_token and stats may be NULL. */
wick_status wick_model_generate(const wick_model* m, const char* prompt, const wick_generate_options* options,
                                wick_token_callback on_token, void* user, wick_generate_stats* stats);

/* ---- the engine (wick/models/engine.h) -------------------------------------------------------
 * Many requests served at once by one model: wick_engine_submit from any thread, pieces of text
 * read with wick_engine_next (each request's in order), wick_engine_cancel at any moment. */
typedef struct wick_engine wick_engine;
typedef struct wick_engine_options {
  int64_t block_size;   /* positions per block of the KV pool (16) */
  int64_t blocks;       /* the pool's blocks; 0: as many as kv_memory holds */
  int64_t kv_memory;    /* bytes; 0: kv_fraction of the free memory, else 1 GiB on the CPU, a
                           quarter of a GPU's free memory */
  int64_t step_tokens;  /* tokens of one step at most (512) */
  int64_t max_running;  /* sequences in the running batch at most (64) */
  int32_t prefix_cache; /* nonzero: reuse the blocks of prompts' shared beginnings (1) */
  int32_t deterministic; /* nonzero: batch-invariant steps, a request's bits as alone (0) */
  double kv_fraction;    /* of the device's free memory for the pool, in [0, 1) (0) */
  int32_t kv_type;       /* WICK_KV_MODEL: keys and values in the model's dtype (the default);
                            WICK_KV_Q8_0: in Q8_0 rows, a bit over half of bf16's bytes */
} wick_engine_options;
enum { WICK_KV_MODEL = 0, WICK_KV_Q8_0 = 1 };
wick_engine_options wick_engine_defaults(void);
/* An engine over model m (which it keeps; m may be freed). */
wick_status wick_engine_new(const wick_model* m, const wick_engine_options* options, wick_engine** out);
/* As wick_model_free. The engine stops, its requests left ending as cancelled, once no call on it
 * in another thread is running. */
void wick_engine_free(wick_engine* e);
typedef struct wick_request {
  const char* text;               /* the prompt as text, or NULL for ids */
  const int32_t* ids;             /* the prompt as token ids (n_ids of them) where text is NULL */
  size_t n_ids;
  wick_generate_options options;  /* max_tokens and sampling */
  int32_t stop_at_end;            /* nonzero: the tokenizer's end tokens stop the request (1) */
  const char* const* stop;        /* n_stop strings that stop it (cut off) */
  size_t n_stop;
  int32_t logprobs; /* -1: none; 0: each new token's log-probability; 1..20: and
                       that many likeliest tokens' (wick_piece's logprob, top_*) */
} wick_request;
/* text NULL, no ids, wick_generate_defaults(), stop at the end tokens, no stop strings, no
 * log-probabilities. */
wick_request wick_request_defaults(void);
/* Queues request r; *id names it. Errors (nothing queued): as the C++ Engine::submit's. */
wick_status wick_engine_submit(wick_engine* e, const wick_request* r, int64_t* id);
enum {
  WICK_FINISH_NONE = 0,
  WICK_FINISH_LENGTH = 1,
  WICK_FINISH_STOP = 2,
  WICK_FINISH_CANCELLED = 3,
  WICK_FINISH_ERROR = 4
};
typedef struct wick_piece {
  int64_t request;
  int32_t token;  /* the new token, or -1 */
  int32_t finish; /* WICK_FINISH_*: nonzero in a request's last piece */
  char* text;     /* the text it made certain (len bytes, NUL-terminated); wick's memory */
  size_t len;
  char* error;    /* WICK_FINISH_ERROR's message, else NULL */
  /* Where the request asked for them and token >= 0: the token's log-probability (the raw
   * logits' log-softmax, before sampling's changes), and the n_top likeliest tokens (top_tokens)
   * with theirs (top_logprobs), likeliest first; wick's memory. */
  double logprob;
  size_t n_top;
  int32_t* top_tokens;
  double* top_logprobs;
} wick_piece;
/* The next piece of request id, waiting up to wait_ms milliseconds (-1: until one comes): *got 1
 * and *piece filled (free its text with wick_piece_clear), or *got 0 where none came in time or
 * the id is unknown or finished. */
wick_status wick_engine_next(wick_engine* e, int64_t id, int64_t wait_ms, wick_piece* piece, int32_t* got);
/* Frees a piece's text, error and top tokens and zeroes it; NULL is ignored. */
void wick_piece_clear(wick_piece* piece);
/* Cancels request id; *cancelled 0 where it was unknown or finished already (may be NULL). */
wick_status wick_engine_cancel(wick_engine* e, int64_t id, int32_t* cancelled);
typedef struct wick_engine_stats {
  int64_t running, waiting, finished;
  int64_t blocks, blocks_used, blocks_cached, blocks_free;
  int64_t prompt_tokens, prefix_hit_tokens, computed_tokens, generated_tokens;
  int64_t steps, preemptions;
  double first_token_seconds; /* summed over requests */
  int64_t first_tokens;
  double between_tokens_seconds; /* summed over the gaps between tokens */
  int64_t token_gaps;
} wick_engine_stats;
wick_status wick_engine_get_stats(const wick_engine* e, wick_engine_stats* out);

#ifdef __cplusplus
}
#endif

#endif /* WICK_WICK_C_H */
