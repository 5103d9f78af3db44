/* The C API from C: creation, ops, data back, views, memory shared both ways, errors with their
 * messages, and the model runner on the tiny model of the source tree. Prints one line per check
 * and a summary; exits 1 on any failure. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "wick/wick_c.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond, what)                                                            \
  do {                                                                               \
    ++checks;                                                                        \
    if (!(cond)) {                                                                   \
      ++failures;                                                                    \
      printf("FAILED %s:%d %s (%s)\n", __FILE__, __LINE__, what, wick_last_error()); \
    }                                                                                \
  } while (0)

#define OK(call) CHECK((call) == WICK_OK, #call)

/* Whether the last error contains `what` with arg in place of %s ("the tensor handle %s is null"). */
static int says(const char* what, const char* arg) {
  char want[128];
  snprintf(want, sizeof want, what, arg);
  return strstr(wick_last_error(), want) != NULL;
}
/* A call refused for a null handle, the message naming the argument that was null. */
#define NULL_ARG(call, arg) CHECK((call) == WICK_ERROR_ARGUMENT && says("handle %s is null", arg), #call " names " arg)
/* A call refused for a handle freed already, the message naming the argument. */
#define DEAD_ARG(call, arg, type) \
  CHECK((call) == WICK_ERROR_ARGUMENT && says("%s is not a live " type " handle", arg), #call " names " arg)

static const wick_device cpu = {WICK_DEVICE_CPU, 0};
static int released = 0;
static void release(void* ctx) { released += *(int*)ctx; }
/* A release callback that calls back into wick: it frees another handle. */
static wick_tensor* freed_on_release = NULL;
static void release_and_free(void* ctx) {
  (void)ctx;
  wick_tensor_free(freed_on_release);
  freed_on_release = NULL;
}

static int pieces = 0;
static int on_token(const char* text, size_t len, int32_t token, void* user) {
  (void)text;
  (void)len;
  (void)token;
  ++*(int*)user;
  ++pieces;
  return 0;
}

/* Records the tokens of a generation (up to 16). */
typedef struct {
  int32_t ids[16];
  int n;
} recorded;
static int record_token(const char* text, size_t len, int32_t token, void* user) {
  (void)text;
  (void)len;
  recorded* r = (recorded*)user;
  if (token >= 0 && r->n < 16) r->ids[r->n++] = token;
  return 0;
}

int main(int argc, char** argv) {
  CHECK(strlen(wick_version()) > 0, "version");
  CHECK(wick_c_abi_version() == WICK_C_ABI_VERSION, "abi version");
  CHECK(wick_dtype_size(WICK_BF16) == 2 && strcmp(wick_dtype_name(WICK_F32), "f32") == 0, "dtype size and name");

  /* memory_use: a 4 KiB tensor held, then freed; the peak keeps it until reset. */
  {
    int64_t before = -1, held = -1, after = -1, peak = -1;
    const float zeros[1024] = {0};
    const int64_t n1024[1] = {1024};
    wick_tensor* big = NULL;
    OK(wick_reset_peak_memory(cpu));
    OK(wick_memory_use(cpu, &before, NULL));
    OK(wick_tensor_from_host(zeros, sizeof zeros, WICK_F32, n1024, 1, cpu, &big));
    OK(wick_memory_use(cpu, &held, NULL));
    wick_tensor_free(big);
    OK(wick_memory_use(cpu, &after, &peak));
    CHECK(held - before == 4096 && after == before && peak >= before + 4096, "memory_use counts a tensor and the peak");
    OK(wick_reset_peak_memory(cpu));
    OK(wick_memory_use(cpu, &after, &peak));
    CHECK(peak == after, "reset_peak_memory");
  }

  /* a (2, 3) + b (3): broadcasting, then the sum of each row. */
  const float av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {0.5f, -1, 2};
  const int64_t s23[2] = {2, 3}, s3[1] = {3};
  wick_tensor *a = NULL, *b = NULL, *c = NULL, *r = NULL;
  OK(wick_tensor_from_host(av, sizeof av, WICK_F32, s23, 2, cpu, &a));
  OK(wick_tensor_from_host(bv, sizeof bv, WICK_F32, s3, 1, cpu, &b));
  OK(wick_binary(WICK_ADD, a, b, &c));
  const int64_t dim1 = 1;
  OK(wick_reduce(WICK_SUM, c, &dim1, 1, 0, &r));
  float rv[2] = {0, 0};
  OK(wick_tensor_to_host(r, rv, sizeof rv));
  CHECK(rv[0] == 7.5f && rv[1] == 16.5f, "(a + b).sum(1)");
  int rank = -1;
  int64_t shape[8];
  OK(wick_tensor_rank(r, &rank));
  OK(wick_tensor_shape(r, shape));
  CHECK(rank == 1 && shape[0] == 2, "the sum's shape");

  /* matmul of a by its transpose (a view), then exp, against the C library's. */
  wick_tensor *at = NULL, *m = NULL, *e = NULL;
  OK(wick_transpose(a, 0, 1, &at));
  int contiguous = 1;
  OK(wick_tensor_is_contiguous(at, &contiguous));
  CHECK(!contiguous, "a transposed is a view");
  OK(wick_matmul(a, at, &m));
  float mv[4];
  OK(wick_tensor_to_host(m, mv, sizeof mv));
  CHECK(mv[0] == 14 && mv[1] == 32 && mv[2] == 32 && mv[3] == 77, "a @ a^T");
  OK(wick_unary(WICK_EXP, a, &e));
  float ev[6];
  OK(wick_tensor_to_host(e, ev, sizeof ev));
  CHECK(fabsf(ev[5] - expf(6)) <= 1e-6f * expf(6), "exp");

  /* The fused residual add and norm, and the gated unit, of a and a itself. */
  wick_tensor *ones = NULL, *sum = NULL, *normed = NULL, *gated = NULL;
  const float onev[3] = {1, 1, 1};
  OK(wick_tensor_from_host(onev, sizeof onev, WICK_F32, s3, 1, cpu, &ones));
  OK(wick_add_rms_norm(a, a, ones, 0, &sum, &normed));
  float sv[6], nv[6], gv[6];
  OK(wick_tensor_to_host(sum, sv, sizeof sv));
  OK(wick_tensor_to_host(normed, nv, sizeof nv));
  CHECK(sv[0] == 2 && sv[5] == 12, "add_rms_norm's sum");
  CHECK(fabsf(nv[0] - 2 / sqrtf(56.f / 3)) <= 1e-6f, "add_rms_norm's normed rows");
  OK(wick_silu_mul(a, a, &gated));
  OK(wick_tensor_to_host(gated, gv, sizeof gv));
  CHECK(fabsf(gv[1] - 2 / (1 + expf(-2)) * 2) <= 1e-5f, "silu_mul");

  /* Errors: a status, and a message naming the op, the shapes and the dtypes. */
  wick_tensor *bad = NULL, *i32 = NULL, *untouched = (wick_tensor*)&failures;
  const int64_t s4[1] = {4};
  OK(wick_tensor_zeros(s4, 1, WICK_F32, cpu, &bad));
  CHECK(wick_binary(WICK_ADD, a, bad, &untouched) == WICK_ERROR_SHAPE, "add of [2, 3] and [4] is a shape error");
  CHECK(strstr(wick_last_error(), "add") && strstr(wick_last_error(), "[2, 3]") && strstr(wick_last_error(), "[4]"),
        "the message names add and both shapes");
  CHECK(untouched == (wick_tensor*)&failures, "a failed call leaves its output alone");
  OK(wick_tensor_zeros(s3, 1, WICK_I32, cpu, &i32));
  CHECK(wick_binary(WICK_MUL, b, i32, &untouched) == WICK_ERROR_DTYPE, "f32 * i32 is a dtype error");
  CHECK(strstr(wick_last_error(), "f32") && strstr(wick_last_error(), "i32"), "the message names both dtypes");
  CHECK(wick_unary(WICK_EXP, NULL, &untouched) == WICK_ERROR_ARGUMENT, "a null handle");
  CHECK(wick_unary(99, a, &untouched) == WICK_ERROR_ARGUMENT, "an unknown op");
  CHECK(wick_tensor_zeros(s3, 1, -1, cpu, &untouched) == WICK_ERROR_ARGUMENT, "an unknown dtype");
  CHECK(wick_tensor_to_host(a, rv, sizeof rv) == WICK_ERROR_ARGUMENT, "a host buffer of the wrong size");
  wick_device nowhere = {WICK_DEVICE_CUDA, 1000};
  wick_tensor* far = NULL;
  wick_status s = wick_tensor_zeros(s3, 1, WICK_F32, nowhere, &far);
  CHECK(s == WICK_ERROR_DEVICE, "a device that does not exist");
  CHECK(strstr(wick_last_error(), "cuda:1000") != NULL, "the message names the device");
  OK(wick_tensor_numel(a, &shape[0]));
  CHECK(wick_last_error()[0] == '\0', "a success clears the message");

  /* A null handle is named by its own argument's name, whichever argument it is. */
  NULL_ARG(wick_rope(WICK_ROPE, a, NULL, a, &untouched), "cos");
  NULL_ARG(wick_rope(WICK_ROPE, a, a, NULL, &untouched), "sin");
  NULL_ARG(wick_rope(WICK_ROPE, NULL, a, a, &untouched), "x");
  NULL_ARG(wick_scaled_dot_product_attention(NULL, a, a, 0, 0, NULL, 0, &untouched), "q");
  NULL_ARG(wick_scaled_dot_product_attention(a, NULL, a, 0, 0, NULL, 0, &untouched), "k");
  NULL_ARG(wick_scaled_dot_product_attention(a, a, NULL, 0, 0, NULL, 0, &untouched), "v");
  NULL_ARG(wick_index_select(a, NULL, 0, &untouched), "ids");
  NULL_ARG(wick_gather(a, NULL, 0, &untouched), "ids");
  NULL_ARG(wick_embedding(a, NULL, &untouched), "ids");
  NULL_ARG(wick_embedding(NULL, a, &untouched), "weight");
  NULL_ARG(wick_scatter(a, a, NULL, 0, &untouched), "src");
  NULL_ARG(wick_rms_norm(a, NULL, 0, &untouched), "weight");
  NULL_ARG(wick_silu_mul(a, NULL, &untouched), "up");
  NULL_ARG(wick_mv(a, NULL, &untouched), "v");
  NULL_ARG(wick_conv1d(a, NULL, NULL, &untouched), "kernel");
  NULL_ARG(wick_binary_scalar(WICK_ADD, NULL, 1, &untouched), "a");
  NULL_ARG(wick_narrow(NULL, 0, 0, 1, &untouched), "t");
  CHECK(untouched == (wick_tensor*)&failures, "refused calls leave their output alone");

  /* Handles are checked: a second free sets the last error and does nothing else, and a freed
   * handle is refused by every call, even once a new handle may have taken its memory. */
  {
    wick_tensor *gone = NULL, *next = NULL, *row = NULL;
    wick_qtensor *q = NULL, *qnext = NULL;
    const int64_t s1x32[2] = {1, 32};
    int64_t n = 0;
    OK(wick_tensor_zeros(s3, 1, WICK_F32, cpu, &gone));
    wick_tensor_free(gone);
    OK(wick_tensor_numel(a, &n));
    wick_tensor_free(gone);
    CHECK(says("%s: not a live wick_tensor handle (freed already", "wick_tensor_free"), "a second tensor free");
    OK(wick_tensor_zeros(s3, 1, WICK_F32, cpu, &next));
    CHECK(next != gone, "a new handle is never a freed one's");
    wick_tensor_free(gone);
    OK(wick_tensor_numel(next, &n));
    CHECK(n == 3, "a stale free leaves the handle made after it alone");
    DEAD_ARG(wick_unary(WICK_EXP, gone, &untouched), "x", "wick_tensor");
    DEAD_ARG(wick_binary(WICK_ADD, a, gone, &untouched), "b", "wick_tensor");
    DEAD_ARG(wick_tensor_retain(gone, &untouched), "t", "wick_tensor");
    DEAD_ARG(wick_tensor_to_host(gone, rv, sizeof rv), "t", "wick_tensor");
    DEAD_ARG(wick_fill(gone, 1), "t", "wick_tensor");
    DEAD_ARG(wick_rope(WICK_ROPE, a, a, gone, &untouched), "sin", "wick_tensor");
    DEAD_ARG(wick_scaled_dot_product_attention(a, a, a, 0, 0, gone, 0, &untouched), "mask", "wick_tensor");
    DEAD_ARG(wick_layer_norm(a, ones, gone, 1e-5, &untouched), "bias", "wick_tensor");
    const wick_tensor* pair[2] = {a, gone};
    DEAD_ARG(wick_cat(pair, 2, 0, &untouched), "tensors[1]", "wick_tensor");
    CHECK(untouched == (wick_tensor*)&failures, "refused calls leave their output alone");

    /* A free that works leaves a failure's message for the error path that frees after it. */
    CHECK(wick_unary(99, a, &untouched) == WICK_ERROR_ARGUMENT, "an unknown op");
    wick_tensor_free(next);
    wick_tensor_free(NULL);
    CHECK(says("%s", "unknown wick_unary_op 99"), "a free keeps the last failure's message");

    OK(wick_tensor_zeros(s1x32, 2, WICK_F32, cpu, &row));
    OK(wick_quantize(row, 8, &q));
    wick_qtensor_free(q);
    OK(wick_tensor_numel(a, &n));
    wick_qtensor_free(q);
    CHECK(says("%s: not a live wick_qtensor handle", "wick_qtensor_free"), "a second qtensor free");
    OK(wick_quantize(row, 8, &qnext));
    DEAD_ARG(wick_dequantize(q, WICK_F32, &untouched), "w", "wick_qtensor");
    DEAD_ARG(wick_qmatmul(row, q, &untouched), "w", "wick_qtensor");
    /* A handle of one kind passed as another (a cast in C) is not live either. */
    DEAD_ARG(wick_dequantize((const wick_qtensor*)row, WICK_F32, &untouched), "w", "wick_qtensor");
    DEAD_ARG(wick_unary(WICK_EXP, (const wick_tensor*)qnext, &untouched), "x", "wick_tensor");
    wick_tensor_free((wick_tensor*)qnext);
    CHECK(says("%s: not a live wick_tensor handle", "wick_tensor_free"), "a qtensor freed as a tensor");
    OK(wick_dequantize(qnext, WICK_F32, &untouched));
    wick_tensor_free(untouched);
    untouched = (wick_tensor*)&failures;
    wick_qtensor_free(qnext);
    wick_tensor_free(row);
  }

  /* Memory the caller owns, without a copy: writes land in it; release runs once, at the end. */
  float owned[6] = {1, 1, 1, 1, 1, 1};
  int weight = 1;
  wick_tensor *blob = NULL, *view = NULL;
  OK(wick_tensor_from_blob(owned, s23, NULL, 2, WICK_F32, cpu, release, &weight, &blob));
  void* p = NULL;
  OK(wick_tensor_data_ptr(blob, &p));
  CHECK(p == owned, "from_blob shares the memory");
  OK(wick_select(blob, 0, 1, &view));
  OK(wick_fill(view, 3));
  CHECK(owned[2] == 1 && owned[3] == 3 && owned[5] == 3, "a write through a view lands in the caller's memory");
  wick_tensor_free(blob);
  CHECK(released == 0, "the view keeps the memory");
  wick_tensor_free(view);
  CHECK(released == 1, "release once the last handle goes");

  /* Memory lent with no release at all: wick never frees it. */
  float lent[3] = {1, 2, 3};
  wick_tensor* plain = NULL;
  OK(wick_tensor_from_blob(lent, s3, NULL, 1, WICK_F32, cpu, NULL, NULL, &plain));
  OK(wick_fill(plain, 4));
  wick_tensor_free(plain);
  CHECK(lent[0] == 4 && lent[2] == 4, "memory lent without a release callback");
  OK(wick_tensor_zeros(s3, 1, WICK_F32, cpu, &freed_on_release));
  OK(wick_tensor_from_blob(lent, s3, NULL, 1, WICK_F32, cpu, release_and_free, NULL, &plain));
  wick_tensor_free(plain);
  CHECK(freed_on_release == NULL, "a release callback may free a handle");

  /* Text of the values. */
  char text[256];
  size_t len = 0;
  OK(wick_tensor_format(r, text, sizeof text, &len));
  CHECK(strcmp(text, "tensor([ 7.5000, 16.5000], dtype=f32)") == 0, "format");

  /* The model runner: greedy on the tiny model, the same text twice. */
  if (argc > 1) {
    wick_model* model = NULL;
    OK(wick_model_open(argv[1], cpu, WICK_F32, &model));
    size_t n = 0;
    OK(wick_model_encode(model, "Hello world", NULL, 0, &n));
    CHECK(n > 1, "encode");
    wick_generate_options o = wick_generate_defaults();
    o.max_tokens = 8;
    int calls = 0;
    wick_generate_stats st;
    OK(wick_model_generate(model, "Hello world", &o, on_token, &calls, &st));
    CHECK(st.generated_tokens >= 1 && st.generated_tokens <= 8 && calls >= st.generated_tokens, "generate");

    /* The engine: two requests at once, read by polling, the second cancelled. */
    {
      wick_engine* engine = NULL;
      wick_engine_options eo = wick_engine_defaults();
      eo.blocks = 64;
      OK(wick_engine_new(model, &eo, &engine));
      wick_request q = wick_request_defaults();
      q.text = "Hello world";
      q.options.max_tokens = 8;
      q.stop_at_end = 0;
      int64_t first = -1, second = -1;
      OK(wick_engine_submit(engine, &q, &first));
      const char* stops[] = {"the"};
      q.stop = stops;
      q.n_stop = 1;
      q.options.max_tokens = 200;
      OK(wick_engine_submit(engine, &q, &second));
      char joined[4096] = {0};
      size_t used = 0;
      int tokens = 0, finish = -1;
      for (;;) {
        wick_piece pc;
        int32_t got = 0;
        OK(wick_engine_next(engine, first, -1, &pc, &got));
        if (!got) break;
        if (pc.token >= 0) ++tokens;
        if (used + pc.len < sizeof joined) {
          memcpy(joined + used, pc.text, pc.len);
          used += pc.len;
        }
        finish = pc.finish;
        wick_piece_clear(&pc);
        if (finish != WICK_FINISH_NONE) break;
      }
      CHECK(tokens == 8 && finish == WICK_FINISH_LENGTH && used > 0, "the engine's request: 8 tokens and their text");
      int32_t cancelled = -1;
      OK(wick_engine_cancel(engine, second, &cancelled));
      wick_piece last;
      int32_t got = 0;
      do {
        OK(wick_engine_next(engine, second, -1, &last, &got));
        finish = got ? last.finish : -1;
        if (got) wick_piece_clear(&last);
      } while (got && finish == WICK_FINISH_NONE);
      CHECK(finish == WICK_FINISH_CANCELLED || finish == WICK_FINISH_STOP, "a cancelled (or stopped) request's last piece");
      OK(wick_engine_next(engine, second, 0, &last, &got));
      CHECK(got == 0, "a finished request has no more pieces");
      wick_engine_stats es;
      OK(wick_engine_get_stats(engine, &es));
      CHECK(es.finished == 2 && es.blocks == 64 && es.blocks_used == 0 && es.generated_tokens >= 8, "engine stats");
      q.text = NULL;
      q.n_ids = 0;
      CHECK(wick_engine_submit(engine, &q, &first) == WICK_ERROR_SHAPE && strstr(wick_last_error(), "empty prompt"),
            "an empty prompt is refused at submit");
      wick_engine_free(engine);
      wick_engine_free(engine);
      CHECK(says("%s: not a live wick_engine handle", "wick_engine_free"), "a second engine free");
    }
    /* A deterministic engine: a sampled request gives the same tokens beside another as alone. */
    {
      wick_engine_options eo = wick_engine_defaults();
      CHECK(eo.deterministic == 0 && eo.kv_fraction == 0, "engines are not deterministic by default");
      eo.blocks = 64;
      eo.deterministic = 1;
      wick_engine* engine = NULL;
      OK(wick_engine_new(model, &eo, &engine));
      wick_request q = wick_request_defaults();
      q.text = "Hello world";
      q.options.max_tokens = 6;
      q.options.temperature = 0.8f;
      q.options.seed = 7;
      q.stop_at_end = 0;
      int32_t runs[3][6];
      int64_t ids[3];
      OK(wick_engine_submit(engine, &q, &ids[0]));
      OK(wick_engine_submit(engine, &q, &ids[1]));
      for (int r = 0; r < 3; ++r) {
        if (r == 2) OK(wick_engine_submit(engine, &q, &ids[2])); /* alone, after the two */
        int n = 0;
        for (;;) {
          wick_piece pc;
          int32_t got = 0;
          OK(wick_engine_next(engine, ids[r], -1, &pc, &got));
          if (!got) break;
          if (pc.token >= 0 && n < 6) runs[r][n++] = pc.token;
          const int done = pc.finish != WICK_FINISH_NONE;
          wick_piece_clear(&pc);
          if (done) break;
        }
        CHECK(n == 6, "a deterministic request's 6 tokens");
      }
      CHECK(memcmp(runs[0], runs[1], sizeof runs[0]) == 0 && memcmp(runs[0], runs[2], sizeof runs[0]) == 0,
            "a deterministic request's tokens beside another and alone");
      wick_engine_free(engine);
      DEAD_ARG(wick_engine_submit(engine, &q, &ids[0]), "e", "wick_engine");
    }
    /* The model split over two CPU ranks (tensor parallel) generates the same greedy tokens;
     * fewer than two devices are refused. */
    {
      const wick_device two[] = {cpu, cpu};
      wick_model* split = NULL;
      OK(wick_model_open_split(argv[1], two, 2, WICK_F32, &split));
      wick_generate_options g = wick_generate_defaults();
      g.max_tokens = 12;
      recorded whole = {{0}, 0}, parts = {{0}, 0};
      OK(wick_model_generate(model, "Hello world", &g, record_token, &whole, NULL));
      OK(wick_model_generate(split, "Hello world", &g, record_token, &parts, NULL));
      CHECK(whole.n > 0 && whole.n == parts.n && memcmp(whole.ids, parts.ids, sizeof(int32_t) * (size_t)whole.n) == 0,
            "a split model's greedy tokens are the whole model's");
      wick_model_free(split);
      wick_model* none = NULL;
      CHECK(wick_model_open_split(argv[1], two, 1, WICK_F32, &none) == WICK_ERROR_ARGUMENT &&
                strstr(wick_last_error(), "at least 2 devices") != NULL && none == NULL,
            "a split over one device is refused, named");
    }
    /* Log-probabilities: each new token's and its 3 likeliest, the token among them under greedy
     * sampling; a frequency penalty changes the greedy answer; logprobs past 20 are refused. */
    {
      wick_engine_options eo = wick_engine_defaults();
      eo.blocks = 64;
      wick_engine* engine = NULL;
      OK(wick_engine_new(model, &eo, &engine));
      wick_request q = wick_request_defaults();
      CHECK(q.logprobs == -1 && q.options.presence_penalty == 0 && q.options.frequency_penalty == 0,
            "no log-probabilities and no penalties by default");
      q.text = "Hello world";
      q.options.max_tokens = 12;
      q.stop_at_end = 0;
      q.logprobs = 3;
      int32_t plain[12], penalized[12];
      int good = 1;
      for (int run = 0; run < 2; ++run) {
        if (run == 1) {
          q.logprobs = -1;
          q.options.frequency_penalty = 2; /* OpenAI's range: [-2, 2] */
        }
        int64_t id = 0;
        OK(wick_engine_submit(engine, &q, &id));
        int n = 0, finish = WICK_FINISH_NONE;
        while (finish == WICK_FINISH_NONE) {
          wick_piece pc;
          int32_t got = 0;
          OK(wick_engine_next(engine, id, -1, &pc, &got));
          if (!got) break;
          if (pc.token >= 0 && n < 12) {
            (run == 0 ? plain : penalized)[n++] = pc.token;
            if (run == 0)
              good &= pc.n_top == 3 && pc.top_tokens[0] == pc.token && pc.logprob == pc.top_logprobs[0] &&
                      pc.logprob <= 0 && pc.top_logprobs[1] <= pc.top_logprobs[0] &&
                      pc.top_logprobs[2] <= pc.top_logprobs[1];
            else
              good &= pc.n_top == 0 && pc.top_tokens == NULL;
          }
          finish = pc.finish;
          wick_piece_clear(&pc);
          CHECK(pc.top_tokens == NULL && pc.n_top == 0, "a cleared piece holds nothing");
        }
        CHECK(n == 12, "12 tokens");
      }
      CHECK(good, "each greedy token is the likeliest of its 3, with its log-probability");
      CHECK(memcmp(plain, penalized, sizeof plain) != 0, "a frequency penalty changes the greedy answer");
      q.options.frequency_penalty = 0;
      q.logprobs = 21;
      int64_t id = 0;
      CHECK(wick_engine_submit(engine, &q, &id) != WICK_OK && strstr(wick_last_error(), "logprobs") != NULL,
            "logprobs past 20 are refused, named");
      wick_engine_free(engine);
    }
    /* A Q8_0 cache serves a request; a kv_type outside the enum is refused. */
    {
      wick_engine_options eo = wick_engine_defaults();
      CHECK(eo.kv_type == WICK_KV_MODEL, "the cache holds the model's dtype by default");
      eo.blocks = 64;
      eo.kv_type = WICK_KV_Q8_0;
      wick_engine* engine = NULL;
      OK(wick_engine_new(model, &eo, &engine));
      wick_request q = wick_request_defaults();
      q.text = "Hello world";
      q.options.max_tokens = 5;
      q.stop_at_end = 0;
      int64_t id = 0;
      OK(wick_engine_submit(engine, &q, &id));
      int n = 0, finish = WICK_FINISH_NONE;
      while (finish == WICK_FINISH_NONE) {
        wick_piece pc;
        int32_t got = 0;
        OK(wick_engine_next(engine, id, -1, &pc, &got));
        if (!got) break;
        n += pc.token >= 0;
        finish = pc.finish;
        wick_piece_clear(&pc);
      }
      CHECK(n == 5 && finish == WICK_FINISH_LENGTH, "a request through a Q8_0 cache gives its 5 tokens");
      wick_engine_free(engine);
      eo.kv_type = 7;
      CHECK(wick_engine_new(model, &eo, &engine) == WICK_ERROR_SHAPE && strstr(wick_last_error(), "kv_type") != NULL,
            "an unknown kv_type is refused, named");
    }
    CHECK(wick_model_open("/nonexistent.gguf", cpu, WICK_F32, &model) != WICK_OK, "a missing file");
    CHECK(strstr(wick_last_error(), "/nonexistent.gguf") != NULL, "the message names the file");
    CHECK(wick_model_encode(model, "Hello", NULL, 4, &n) == WICK_ERROR_ARGUMENT && says("%s is null", "ids"),
          "encode names ids");
    wick_model_free(model);
    OK(wick_tensor_numel(a, &shape[0]));
    wick_model_free(model);
    CHECK(says("%s: not a live wick_model handle", "wick_model_free"), "a second model free");
    DEAD_ARG(wick_model_encode(model, "Hello world", NULL, 0, &n), "m", "wick_model");
    DEAD_ARG(wick_model_generate(model, "Hello world", &o, on_token, &calls, &st), "m", "wick_model");
  }

  wick_tensor* all[] = {a, b, c, r, at, m, e, bad, i32, ones, sum, normed, gated};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) wick_tensor_free(all[i]);
  printf("C API: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
