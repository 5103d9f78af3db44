#include "args.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string_view>

namespace wick::cli {

const char* const kUsage = R"(usage: wick <command> [options]

commands:
  info                    version, backends built in, devices found
  parity [options]        run every op x dtype x layout case on a backend and compare with the
                          reference; exits 1 on any failure
      --backend B         cpu, cuda, rocm or all (default: all backends present)
      --op REGEX          only ops whose name matches (e.g. 'unary\.' or '^cast$')
      --dtype LIST        only these dtypes, comma separated (e.g. f32,bf16)
      --seed N            input seed (printed by every run)
      --case NAME         only the case of this name (as printed for a failure)
      --json FILE         write one record per case
  bench [options]         time ops at benchmark sizes (inputs larger than a GPU's L2 cache), after
                          measuring the device's ceilings: a large copy and a GEMM per float dtype;
                          prints median, min and max ms, GB/s or TFLOP/s and the fraction of the
                          ceiling (copy bandwidth, or the GEMM peak of the dtype) per case
      --backend B         cpu, cuda or rocm (default: the first GPU, else cpu)
      --op REGEX          only ops whose name matches, as for parity (e.g. '^binary\.add$')
      --dtype LIST        only these dtypes, comma separated
      --reps N            timed runs per case (default 20; fewer for slow cases, at least 3)
      --csv FILE          write one row per case: device, driver, revision, op, dtype, shape,
                          layout, times, bytes, flops, rate, ceiling and fraction
      --quick             tiny sizes (for tests)
  ops                     the table of ops and the dtypes each is defined for (markdown), then
                          which backends here have fused kernels for the nn ops
  tokenize [options]      the token ids of a text under a model's tokenizer, as [1, 2, 3]
      --model PATH        a GGUF file (its tokenizer.ggml.* metadata), a tokenizer.json, or a
                          checkpoint directory holding one
      --text TEXT         the text (or --file PATH: a file's bytes); either may repeat: each
                          text's ids on a line of their own, in the order given
      --no-special        no BOS/EOS added
      --parse-special     the text of control tokens (<|eot_id|>, ...) becomes those tokens
      --pieces            one line per token: its id and the bytes it stands for
  generate [options]      text from a model (Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE,
                          Phi-3, Phi-4-mini, Gemma 2, Gemma 3), streamed, then the prompt's and the
                          generation's speed
      --model PATH        a GGUF file, or a Hugging Face checkpoint directory (config.json,
                          safetensors, tokenizer.json); default: wick's tiny model (models/tiny.gguf)
      --prompt TEXT       the prompt (BOS added; control tokens' text in it counts)
      --chat              the prompt is one user turn of a chat, through the model's chat
                          template (GGUF tokenizer.chat_template, tokenizer_config.json's); only
                          the answer is printed
      --max-tokens N      new tokens at most (default 128); the model's end tokens stop earlier
      --temp T            temperature (default 0.8; 0: greedy)
      --top-k K, --top-p P, --min-p P, --repeat-penalty R
                          sampling (defaults 40, 0.95, 0.05, 1: none)
      --seed N            the draws' seed (default 0)
      --device D          cpu, cuda:0, ... (default: the first GPU present, else cpu)
      --devices D,D,...   the model split over these devices (tensor parallel; cpu may repeat)
      --dtype T           activations: f32, f16 or bf16 (default: bf16 on a GPU; on the CPU f16
                          or bf16 for a file whose weights are stored so, else f32)
      --mmap              on the CPU, read the weights in place from the file's mapping (no
                          copy: opens at once, shares the page cache; decodes slower)
  chat-template [options] a chat template rendered over a conversation, as serve and generate
                          --chat render it (transformers' jinja2 environment)
      --model PATH        the model's own template (default: wick's tiny model), or
      --template FILE     a Jinja template file, with --bos TEXT and --eos TEXT
      --messages FILE     a JSON array of messages ({"role", "content"}): prints the text
      --conversations FILE   a JSON array of {"messages", "add_generation_prompt"}: prints a
                          JSON array of {"text"} or {"error"}
      --no-generation-prompt   with --messages: no add_generation_prompt
  bench-model [options]   a model's prompt (ppN) and generation (tgN) speed, as llama-bench, and
                          the peak memory wick allocated on the (first) device during each test,
                          beside what the loaded model and a cache of each test's length hold
      --model PATH        a GGUF file or checkpoint directory (default: wick's tiny model), or --shape NAME:
                          random weights of a released model's shape (llama3-8b, llama3-70b, llama3-1b,
                          llama2-7b, qwen2-7b, qwen3-8b, the mixtures of experts mixtral-8x7b,
                          qwen3-30b-a3b, gemma2-9b, gemma3-1b, gemma3-4b, gemma3-27b), --qtype Q:
                          in a block format
      --device D, --devices LIST, --dtype T, --mmap   as for generate (split over devices:
                          size and weights read are each rank's)
      --prompt N, --gen N, --batch B, --reps R   (defaults 512, 128, 1, 3; --prompt 0 or
                          --gen 0 leaves that test out)
      --no-graph          on GPUs, decode through forward() instead of recorded steps
      --csv FILE          append one row per test (model, bytes, devices, dtype, batch, test,
                          tokens/s, peak bytes)
  bench-serve [options]   the engine under load: N requests, C in flight, greedy; output tokens/s,
                          time to first token and between tokens (p50, p99), the pool's use
      --model PATH        as for generate (default: wick's tiny model), or --shape NAME [--qtype Q]
                          as for bench-model
      --device D, --devices LIST, --dtype T   as for generate (split over devices: one engine
                          over the tensor-parallel group; the pool's budget is each device's)
      --requests N, --concurrency C, --prompt P, --gen G   (defaults 64, 16, 128, 64)
      --prefix-share F    the first F of each prompt shared by all requests (default 0)
      --block-size N, --kv-memory MIB, --kv-fraction F, --step-tokens N, --max-running N
                          the engine's options (defaults 16; 1 GiB on the CPU, a quarter of a
                          GPU's free memory; none; 512; 64)
      --seed N            of the prompts' tokens
      --no-graph          on a GPU, decode steps through forward_paged instead of recorded steps
      --deterministic     batch-invariant steps (each request's bits as if alone; slower)
      --kv-type T         the pool's keys and values: model (the model's dtype, the default) or
                          q8_0 (Q8_0 rows: a bit over half of bf16's bytes)
      --csv FILE          append one row (model, device, dtype, requests, concurrency, prompt,
                          gen, share, output t/s, all t/s, TTFT p50/p99 ms, TBT p50/p99 ms,
                          peak blocks, blocks, prefix-hit tokens, preemptions)
  serve [options]         an OpenAI-compatible HTTP server over the engine: POST
                          /v1/chat/completions and /v1/completions (whole or streamed),
                          GET /v1/models, /health, /metrics (Prometheus) and a chat page at /
      --model PATH        as for generate (default: wick's tiny model), or --shape NAME [--qtype Q]
                          as for bench-model (random weights, no tokenizer: token-id prompts)
      --host H, --port N  where to listen (default 127.0.0.1:8080; port 0: any free port)
      --api-key KEY       every /v1 call and /metrics need 'Authorization: Bearer KEY' (also
                          from WICK_API_KEY)
      --alias NAME        the model's name in the API (default: the file's name)
      --chat-template F   a Jinja chat template file instead of the model's own
      --device D, --devices LIST, --dtype T   as for generate
      --parallel N        requests in the running batch at most (default 16)
      --max-queue N       requests waiting beyond those; more get 503 (default 4 x --parallel)
      --ctx N             positions a request may use (default: the model's context)
      --max-tokens N      new tokens a request may ask for (default: --ctx)
      --kv-memory MIB, --kv-type T, --step-tokens N   the engine's, as for bench-serve
      --deterministic     batch-invariant steps (each answer's bits as if alone; slower)
      --no-prefix-cache   no reuse of cached prompt blocks
      --max-body BYTES    larger request bodies get 413 (default 8 MiB)
      --threads N         HTTP threads (default: --parallel + --max-queue + 8)
      --max-connections N connections open at once, answered or waiting for a thread; past it
                          new ones wait in the kernel's listen backlog (default 2 x --threads)
      --grace S           on SIGINT or SIGTERM, seconds running requests may finish before they
                          are cancelled (default 5)
  perplexity [options]    a model's perplexity on a text, as llama-perplexity computes it
      --model PATH        a GGUF file or checkpoint directory, as for generate
      --file PATH         the text
      --ctx N             tokens per chunk (default 512); the second half of each is scored
      --chunks N          at most N chunks (default: all the text holds)
      --device D          cpu (default), cuda:0, ...
      --dtype T           activations: f32, f16 or bf16 (default: bf16 on a GPU; on the CPU f16
                          or bf16 for a file whose weights are stored so, else f32)
      --mmap              as for generate
  bench-dist [options]    all_reduce over ranks of this process, 8 bytes to --max: time, algorithm
                          and bus bandwidth per size, as nccl-tests print them
      --devices D,D,...   one rank per device (cpu may repeat)
      --launched          instead, this process is one rank of `wick launch -n N wick bench-dist
                          --launched`, on the GPU of its local rank (the CPU where none is)
      --dtype T           default bf16
      --max BYTES         the largest size (default 1 GiB)
      --iters N           calls timed per size (default 20)
      --in-place          all_reduce_ into the input (as torch's), not into a new tensor
      --csv FILE          append one row per size
  launch -n N CMD [ARGS...]
                          N processes of CMD, one per rank of a dist::Communicator::from_env
                          group (WICK_RANK, WICK_LOCAL_RANK, WICK_WORLD_SIZE and a fresh
                          WICK_RENDEZVOUS in each); exits with the first failing rank's status
)";

const char* const kSeeHelp = "run 'wick --help' for the commands and their options\n";

std::vector<DType> parse_dtype_list(const std::string& list) {
  std::vector<DType> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = list.find(',', start);
    const std::string name = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
    DType dt;
    if (!parse_dtype(name, &dt)) throw std::runtime_error("unknown dtype '" + name + "'");
    out.push_back(dt);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

uint64_t parse_seed(const std::string& text) {
  uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    throw std::runtime_error("--seed takes an unsigned 64-bit integer, got '" + text + "'");
  return seed;
}

std::string command_usage(std::string_view command) {
  // A command's lines: its own (two spaces, then the name), up to the next command's.
  const std::string_view usage(kUsage);
  std::string out;
  bool in = false;
  for (size_t at = 0; at < usage.size();) {
    const size_t end = std::min(usage.find('\n', at), usage.size());
    const std::string_view line = usage.substr(at, end - at);
    const bool header = line.size() > 2 && line.substr(0, 2) == "  " && line[2] != ' ';
    if (header) in = line.substr(2, command.size()) == command && line.size() > command.size() + 2 &&
                     line[command.size() + 2] == ' ';
    if (in) out.append(line).append("\n");
    at = end + 1;
  }
  return out.empty() ? std::string(kUsage) : "usage: wick " + std::string(command) + " [options]\n\n" + out;
}

bool Options::next() {
  if (++at_ >= argc_) return false;
  name_ = argv_[at_];
  if (name_ == "--help" || name_ == "-h") {
    std::fputs(command_usage(command_).c_str(), stdout);
    std::exit(0);
  }
  return true;
}

std::string Options::value() {
  if (at_ + 1 >= argc_) fail(name_ + " needs a value");
  return argv_[++at_];
}

int64_t Options::int_value() {
  const std::string v = value();
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) fail(name_ + " takes an integer, not '" + v + "'");
  return n;
}

double Options::float_value() {
  const std::string v = value();
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != v.size()) fail(name_ + " takes a number, not '" + v + "'");
  return x;
}

Device Options::device_value() {
  const std::string v = value();
  Device d;
  if (!Device::parse(v, &d)) fail("unknown device '" + v + "'");
  return d;
}

std::vector<Device> Options::device_list_value() {
  const std::string v = value();
  std::vector<Device> out;
  for (size_t start = 0; start <= v.size();) {
    const size_t end = std::min(v.find(',', start), v.size());
    Device d;
    if (!Device::parse(v.substr(start, end - start), &d)) fail("unknown device '" + v.substr(start, end - start) + "' in '" + v + "'");
    out.push_back(d);
    start = end + 1;
  }
  return out;
}

DType Options::dtype_value() {
  const std::string v = value();
  DType dt;
  if (!parse_dtype(v, &dt)) fail("unknown dtype '" + v + "'");
  return dt;
}

quant::QType Options::qtype_value() {
  const std::string q = value();
  const std::optional<quant::QType> t = quant::parse_qtype(q);
  if (!t) fail("unknown block format '" + q + "'");
  return *t;
}

void Options::unknown() const { fail("unknown option '" + name_ + "'"); }

void Options::fail(const std::string& what) const { throw std::runtime_error(std::string(command_) + ": " + what); }

}  // namespace wick::cli

