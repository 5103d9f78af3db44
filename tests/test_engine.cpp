// The engine (include/wick/models/engine.h) on every device, with small random models and the
// shipped tiny model: requests run together give the tokens each gives alone (greedy, and sampled
// with seeds), through preemption in a pool too small for all of them and through prefix-cache
// hits; cancellation at any moment gives every block back; bad requests are refused at submit
// without harming the others; many threads submit at once; text pieces add up to the decoded
// tokens and stop at stop strings.
#include <atomic>
#include <random>
#include <thread>

#include "paged_util.h"
#include "test_util.h"
#include "wick/models/engine.h"
#include "wick/models/llama.h"
#include "wick/models/tensor_parallel.h"

namespace wick::test {
namespace {

using models::Engine;
using models::EngineOptions;
using models::Finish;
using models::Request;

class EngineTest : public ::testing::TestWithParam<Device> {
 protected:
  Device device() const { return GetParam(); }
  // With experts: Mixtral's layout, 4 experts of half the width, 2 per token.
  std::shared_ptr<const models::Model> random_model(int64_t window = 0, DType dtype = DType::F32,
                                                    bool experts = false) const {
    models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
    c.vocab = 96, c.dim = 64, c.hidden = 128, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
    c.context = 512;
    c.window = window;
    if (experts) c.hidden = 64, c.experts = 4, c.experts_used = 2;
    return std::make_shared<models::LlamaModel>(models::LlamaModel::random(c, device(), dtype, std::nullopt, 21));
  }
};

std::vector<int32_t> random_prompt(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, 95);
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int32_t& x : p) x = id(rng);
  return p;
}

std::vector<Request> requests(bool sampled) {
  std::vector<Request> r;
  const int64_t lengths[] = {5, 40, 1, 77, 16, 23};
  for (size_t i = 0; i < std::size(lengths); ++i) {
    Request q;
    q.prompt = random_prompt(lengths[i], static_cast<uint32_t>(i + 1));
    q.max_tokens = 6 + static_cast<int64_t>(i) * 3;
    q.stop_at_end = false;
    if (sampled) {
      q.sampling.temperature = 0.9;
      q.sampling.top_k = 20;
      q.sampling.seed = 100 + i;
    }
    r.push_back(q);
  }
  return r;
}

// Each request through its own engine, one at a time.
std::vector<std::vector<int32_t>> alone(const std::shared_ptr<const models::Model>& m, const std::vector<Request>& rs,
                                        const EngineOptions& options = {}) {
  std::vector<std::vector<int32_t>> out;
  for (const Request& r : rs) {
    Engine e(m, options);
    const Engine::Result res = e.wait(e.submit(r));
    EXPECT_EQ(res.finish, Finish::Length);
    out.push_back(res.tokens);
  }
  return out;
}

std::vector<std::vector<int32_t>> together(Engine& e, const std::vector<Request>& rs) {
  std::vector<int64_t> ids;
  for (const Request& r : rs) ids.push_back(e.submit(r));
  std::vector<std::vector<int32_t>> out;
  for (int64_t id : ids) out.push_back(e.wait(id).tokens);
  return out;
}

TEST_P(EngineTest, RequestsTogetherGiveTheTokensEachGivesAlone) {
  const auto m = random_model();
  for (bool sampled : {false, true}) {
    const std::vector<Request> rs = requests(sampled);
    const auto want = alone(m, rs);
    for (size_t i = 0; i < rs.size(); ++i) EXPECT_EQ(static_cast<int64_t>(want[i].size()), rs[i].max_tokens);
    EngineOptions o;
    o.step_tokens = 32;  // prompts in chunks, beside the others' decode steps
    Engine e(m, o);
    EXPECT_EQ(together(e, rs), want) << (sampled ? "sampled" : "greedy");
    const models::EngineStats s = e.stats();
    EXPECT_EQ(s.blocks_used, 0);
    EXPECT_EQ(s.running + s.waiting, 0);
    EXPECT_GT(s.steps, 0);
  }
}

// Deterministic steps, in bf16 (where sum orders show first): each request alone, its prompt whole,
// against all at once with prompts chunked beside the others' decode steps, then all again with the
// prefix cache holding their prompts and one prompt sharing another's beginning.
TEST_P(EngineTest, DeterministicRequestsGiveTheirTokensAloneInAnyCompany) {
  const auto m = random_model(0, DType::BF16);
  EngineOptions o;
  o.deterministic = true;
  for (bool sampled : {false, true}) {
    std::vector<Request> rs = requests(sampled);
    Request shared = rs[3];
    shared.prompt.resize(50);
    shared.prompt.insert(shared.prompt.end(), {7, 8, 9});
    rs.push_back(shared);
    const auto want = alone(m, rs, o);
    EngineOptions chunked = o;
    chunked.step_tokens = 32;
    Engine e(m, chunked);
    EXPECT_EQ(together(e, rs), want) << (sampled ? "sampled" : "greedy");
    EXPECT_EQ(together(e, rs), want) << (sampled ? "sampled" : "greedy") << ", the prefix cache warm";
    EXPECT_GT(e.stats().prefix_hit_tokens, 0);
  }
}

// A mixture of experts through the engine: requests together give each one's tokens alone (f32,
// prompts chunked beside decode steps), and in deterministic mode in bf16 the same bits whatever the
// company, though each step's experts then run over other rows.
TEST_P(EngineTest, AMixtureOfExpertsGivesEachRequestsTokensAlone) {
  for (const bool deterministic : {false, true}) {
    const auto m = random_model(0, deterministic ? DType::BF16 : DType::F32, true);
    EngineOptions o;
    o.deterministic = deterministic;
    const std::vector<Request> rs = requests(true);
    const auto want = alone(m, rs, o);
    EngineOptions chunked = o;
    chunked.step_tokens = 32;
    Engine e(m, chunked);
    EXPECT_EQ(together(e, rs), want) << (deterministic ? "deterministic, bf16" : "f32");
    EXPECT_EQ(e.stats().blocks_used, 0);
  }
}

// Log-probabilities: each piece's token with its log-probability and the likeliest tokens'; a
// greedy token is the likeliest; asking for them changes no token; penalties change the logits
// that greedy picks from, on the host.
TEST_P(EngineTest, LogprobsComeWithEachTokenAndChangeNone) {
  const auto m = random_model();
  std::vector<Request> rs = requests(false);
  rs.resize(3);
  rs[2].sampling.temperature = 0.8;
  rs[2].sampling.seed = 5;
  const auto want = alone(m, rs);
  Engine e(m);
  for (size_t i = 0; i < rs.size(); ++i) {
    Request r = rs[i];
    r.logprobs = 3;
    const int64_t id = e.submit(r);
    std::vector<int32_t> tokens;
    for (models::Piece p; e.next(id, p);) {
      if (p.token >= 0) {
        tokens.push_back(p.token);
        ASSERT_EQ(p.top_logprobs.size(), 3u);
        EXPECT_LE(p.logprob, 0.f);
        EXPECT_GE(p.top_logprobs[0].second, p.top_logprobs[1].second);
        EXPECT_GE(p.top_logprobs[1].second, p.top_logprobs[2].second);
        double mass = 0;
        for (const auto& [tok, lp] : p.top_logprobs) mass += std::exp(lp);
        EXPECT_LE(mass, 1.0 + 1e-5);
        if (r.sampling.temperature == 0) {
          EXPECT_EQ(p.token, p.top_logprobs[0].first);
          EXPECT_EQ(p.logprob, p.top_logprobs[0].second);
        }
      }
      if (p.finish != Finish::None) break;
    }
    EXPECT_EQ(tokens, want[i]) << "request " << i;
  }
  Request bad = rs[0];
  bad.logprobs = 21;
  WICK_EXPECT_ERROR(e.submit(bad), ShapeError, "logprobs");
  // A frequency penalty at temperature 0 picks on the host from the penalised logits.
  Request penalised = rs[0];
  penalised.sampling.frequency_penalty = 2;
  penalised.max_tokens = 24;
  const std::vector<int32_t> got = e.wait(e.submit(penalised)).tokens;
  models::GenerateOptions g;
  g.max_tokens = penalised.max_tokens;
  g.stop_at_end = false;
  g.sampling = penalised.sampling;
  const std::vector<std::vector<int32_t>> prompt = {penalised.prompt};
  EXPECT_EQ(models::generate(*m, prompt, g).tokens[0], got);
}

TEST_P(EngineTest, GreedyTokensAreGeneratesTokens) {
  const auto m = random_model();
  const std::vector<Request> rs = requests(false);
  Engine e(m);
  const auto got = together(e, rs);
  for (size_t i = 0; i < rs.size(); ++i) {
    models::GenerateOptions g;
    g.max_tokens = rs[i].max_tokens;
    g.stop_at_end = false;
    const std::vector<std::vector<int32_t>> prompt = {rs[i].prompt};
    EXPECT_EQ(models::generate(*m, prompt, g).tokens[0], got[i]) << "request " << i;
  }
}

TEST_P(EngineTest, ASmallPoolPreemptsAndGivesTheSameTokens) {
  const auto m = random_model();
  const std::vector<Request> rs = requests(false);
  const auto want = alone(m, rs);
  EngineOptions o;
  o.blocks = 8;  // 128 positions: the longest request alone needs 6 blocks
  o.block_size = 16;
  o.step_tokens = 24;
  Engine e(m, o);
  EXPECT_EQ(together(e, rs), want);
  EXPECT_GT(e.stats().preemptions, 0);
  EXPECT_EQ(e.stats().blocks_used, 0);
  // A request that could never fit is refused at once.
  Request big;
  big.prompt = random_prompt(100, 5);
  big.max_tokens = 40;
  WICK_EXPECT_ERROR(e.submit(big), ShapeError, "could never fit the pool of 8 blocks");
}

TEST_P(EngineTest, PrefixCacheHitsGiveTheSameTokens) {
  const auto m = random_model();
  Request r;
  r.prompt = random_prompt(70, 3);
  r.max_tokens = 8;
  r.stop_at_end = false;
  Engine e(m);
  const auto first = e.wait(e.submit(r)).tokens;
  EXPECT_EQ(e.stats().prefix_hit_tokens, 0);
  EXPECT_EQ(e.wait(e.submit(r)).tokens, first);
  EXPECT_EQ(e.stats().prefix_hit_tokens, 64);  // four whole blocks of 16
  // A prompt sharing the first 40 tokens: two blocks found.
  Request other = r;
  other.prompt.resize(40);
  const auto tail = random_prompt(30, 4);
  other.prompt.insert(other.prompt.end(), tail.begin(), tail.end());
  const auto hit = e.wait(e.submit(other)).tokens;
  EXPECT_EQ(e.stats().prefix_hit_tokens, 64 + 32);
  EngineOptions no_cache;
  no_cache.prefix_cache = false;
  Engine fresh(m, no_cache);
  EXPECT_EQ(fresh.wait(fresh.submit(other)).tokens, hit);
  EXPECT_EQ(fresh.stats().prefix_hit_tokens, 0);
}

TEST_P(EngineTest, CancellingGivesEveryBlockBack) {
  const auto m = random_model();
  EngineOptions o;
  o.step_tokens = 8;  // long prompts take many steps: cancels land mid-prompt
  Engine e(m, o);
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    Request r;
    r.prompt = random_prompt(i % 2 == 0 ? 200 : 10, static_cast<uint32_t>(i));
    r.max_tokens = 300;
    r.stop_at_end = false;
    ids.push_back(e.submit(r));
  }
  // Mid-decode for the short ones: wait for a piece first.
  models::Piece p;
  ASSERT_TRUE(e.next(ids[1], p));
  for (int64_t id : ids) EXPECT_TRUE(e.cancel(id));
  for (int64_t id : ids) EXPECT_EQ(e.wait(id).finish, Finish::Cancelled);
  EXPECT_FALSE(e.cancel(ids[0]));
  EXPECT_FALSE(e.cancel(12345));
  const models::EngineStats s = e.stats();
  EXPECT_EQ(s.blocks_used, 0);
  EXPECT_EQ(s.blocks_free + s.blocks_cached, s.blocks);
  EXPECT_EQ(s.running + s.waiting, 0);
}

// The pool from a fraction of the device's free memory, from a byte budget, and by default; a
// fraction outside [0, 1) is refused.
TEST_P(EngineTest, ThePoolComesFromABudgetOrAFractionOfFreeMemory) {
  const auto m = random_model();
  const DeviceMemory mem = device_memory(device());
  EXPECT_GT(mem.total, 0);
  EXPECT_GT(mem.free, 0);
  EXPECT_LE(mem.free, mem.total);
  const int64_t per_block = m->paged_block_bytes(16, models::KvType::Model);
  EngineOptions o;
  o.kv_fraction = 1e-4;
  const int64_t want = static_cast<int64_t>(1e-4 * static_cast<double>(mem.free)) / per_block;
  const int64_t got = Engine(m, o).stats().blocks;  // free memory moves a little between the reads
  EXPECT_GT(got, 0);
  EXPECT_NEAR(static_cast<double>(got), static_cast<double>(want), 0.2 * static_cast<double>(want) + 2);
  o = {};
  o.kv_memory = 100 * per_block + 5;
  EXPECT_EQ(Engine(m, o).stats().blocks, 100);
  // By default: capped at max_running sequences of the whole context (512 positions, 32 blocks).
  o = {};
  o.max_running = 3;
  EXPECT_EQ(Engine(m, o).stats().blocks, 3 * 32 + 1);
  for (double bad : {-0.1, 1.0, 2.0}) {
    o = {};
    o.kv_fraction = bad;
    WICK_EXPECT_ERROR(Engine(m, o), ShapeError, "kv_fraction");
  }
}

// A Q8_0 cache: 34 bytes for every 32 values a block held in f32 (128), the deterministic
// requests' tokens alone and together (chunked, prefix cache warm) the same, and a model whose head
// dim is not a multiple of 32 refused.
TEST_P(EngineTest, AQ8_0CacheHoldsMorePositionsAndGivesTokensAloneInAnyCompany) {
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  c.vocab = 96, c.dim = 128, c.hidden = 256, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 32;
  c.context = 512;
  const auto m =
      std::make_shared<models::LlamaModel>(models::LlamaModel::random(c, device(), DType::F32, std::nullopt, 23));
  EXPECT_EQ(m->paged_block_bytes(16, models::KvType::Q8_0) * 128, m->paged_block_bytes(16, models::KvType::Model) * 34);
  EngineOptions o;
  o.kv_type = models::KvType::Q8_0;
  o.deterministic = true;
  o.kv_memory = 200 * m->paged_block_bytes(16, models::KvType::Q8_0);
  std::vector<Request> rs = requests(false);
  Request shared = rs[3];
  shared.prompt.resize(50);
  shared.prompt.insert(shared.prompt.end(), {7, 8, 9});
  rs.push_back(shared);
  const auto want = alone(m, rs, o);
  EngineOptions chunked = o;
  chunked.step_tokens = 32;
  Engine e(m, chunked);
  EXPECT_EQ(e.stats().blocks, 200);
  EXPECT_EQ(together(e, rs), want);
  EXPECT_EQ(together(e, rs), want) << "the prefix cache warm";
  EXPECT_GT(e.stats().prefix_hit_tokens, 0);
  EngineOptions bad;
  bad.kv_type = models::KvType::Q8_0;
  WICK_EXPECT_ERROR(Engine(random_model(), bad), ShapeError, "multiple of 32");
}

TEST_P(EngineTest, BadRequestsAreRefusedAtSubmit) {
  const auto m = random_model();
  Engine e(m);
  Request ok;
  ok.prompt = random_prompt(10, 1);
  ok.max_tokens = 4;
  ok.stop_at_end = false;
  const int64_t running = e.submit(ok);
  Request r = ok;
  r.prompt.clear();
  WICK_EXPECT_ERROR(e.submit(r), ShapeError, "empty prompt");
  r = ok;
  r.prompt[3] = 96;
  WICK_EXPECT_ERROR(e.submit(r), IndexError, "token 96", "at 3");
  r = ok;
  r.prompt = random_prompt(512, 2);
  WICK_EXPECT_ERROR(e.submit(r), ShapeError, "leaves no room", "512");
  r = ok;
  r.max_tokens = 0;
  WICK_EXPECT_ERROR(e.submit(r), ShapeError, "max_tokens");
  r = ok;
  r.sampling.top_p = 1.5;
  WICK_EXPECT_ERROR(e.submit(r), Error, "top_p");
  r = ok;
  r.prompt.clear();
  r.text = "hello";
  WICK_EXPECT_ERROR(e.submit(r), Error, "without a tokenizer");
  EXPECT_EQ(e.wait(running).tokens.size(), 4u);
  EXPECT_THROW(e.wait(running), Error);  // forgotten after its last piece
  EngineOptions bad;
  bad.block_size = 0;
  EXPECT_THROW(Engine(m, bad), ShapeError);
}

TEST_P(EngineTest, ManyThreadsSubmitAtOnce) {
  const auto m = random_model(9);  // a sliding window, too
  const std::vector<Request> rs = requests(true);
  const auto want = alone(m, rs);
  EngineOptions o;
  o.step_tokens = 40;
  o.max_running = 4;  // more requests than the batch holds: some wait
  Engine e(m, o);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < rs.size() * 2; i += 4) {
        const size_t k = i % rs.size();
        if (e.wait(e.submit(rs[k])).tokens != want[k]) ++wrong;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(e.stats().finished, static_cast<int64_t>(rs.size() * 2));
}

TEST_P(EngineTest, TextPiecesAddUpAndStopAtStopStrings) {
  const models::ModelFile file = models::ModelFile::open(std::string(WICK_SOURCE_DIR) + "/models/tiny.gguf");
  models::LoadOptions lo;
  lo.device = device();
  lo.dtype = DType::F32;
  const std::shared_ptr<const models::Model> m = file.load(lo);
  Engine e(m);
  Request r;
  r.text = "This License";
  r.max_tokens = 24;
  r.stop_at_end = false;
  std::vector<models::Piece> pieces;
  std::mutex mu;
  std::condition_variable done;
  bool finished = false;
  e.submit(r, [&](const models::Piece& p) {
    std::lock_guard lock(mu);
    pieces.push_back(p);
    if (p.finish != Finish::None) {
      finished = true;
      done.notify_all();
    }
  });
  {
    std::unique_lock lock(mu);
    done.wait(lock, [&] { return finished; });
  }
  std::vector<int32_t> tokens;
  std::string text;
  for (const models::Piece& p : pieces) {
    if (p.token >= 0) tokens.push_back(p.token);
    text += p.text;
  }
  ASSERT_EQ(tokens.size(), 24u);
  EXPECT_EQ(text, m->tokenizer()->decode(tokens, false, true));  // continuing the prompt
  ASSERT_GT(text.size(), 6u);
  // The same request stopped at a piece of that text: cut before it, finished as a stop.
  Request s = r;
  const std::string stop = text.substr(text.size() / 2, 3);
  s.stop_strings = {stop};
  const Engine::Result res = e.wait(e.submit(s));
  EXPECT_EQ(res.finish, Finish::Stop);
  EXPECT_EQ(res.text, text.substr(0, text.find(stop)));
}

// The engine over a model split across a tensor-parallel group (TensorParallelModel): the tokens of
// the whole model, greedy and sampled, requests together with prompts in chunks, the prefix cache
// warm; 2 and 4 CPU ranks, and 2 GPUs where present (f32).
void expect_group_gives_whole_models_tokens(const std::vector<Device>& devices) {
  const auto n = static_cast<int>(devices.size());
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  c.vocab = 96, c.dim = 128, c.hidden = 256, c.layers = 2, c.heads = 8, c.kv_heads = 4, c.head_dim = 16;
  c.context = 512;
  const auto whole =
      std::make_shared<models::LlamaModel>(models::LlamaModel::random(c, devices[0], DType::F32, std::nullopt, 21));
  const std::vector<dist::Communicator> comms = dist::Communicator::local(devices);
  std::vector<std::shared_ptr<const models::Model>> parts;
  for (int r = 0; r < n; ++r)
    parts.push_back(std::make_shared<models::LlamaModel>(models::LlamaModel::random(
        c, devices[static_cast<size_t>(r)], DType::F32, std::nullopt, 21, comms[static_cast<size_t>(r)])));
  const auto group = std::make_shared<models::TensorParallelModel>(parts);
  EXPECT_FALSE(group->communicator().defined());
  EXPECT_EQ(group->ranks(), n);
  for (bool sampled : {false, true}) {
    const std::vector<Request> rs = requests(sampled);
    const auto want = alone(whole, rs);
    EngineOptions o;
    o.step_tokens = 32;
    Engine e(group, o);
    EXPECT_EQ(together(e, rs), want) << n << " ranks, " << (sampled ? "sampled" : "greedy");
    EXPECT_EQ(together(e, rs), want) << n << " ranks, the prefix cache warm";
    EXPECT_GT(e.stats().prefix_hit_tokens, 0);
    EXPECT_EQ(e.stats().blocks_used, 0);
  }
  // generate() over the group's contiguous caches too.
  models::GenerateOptions g;
  g.max_tokens = 8;
  g.stop_at_end = false;
  const std::vector<std::vector<int32_t>> prompts = {random_prompt(9, 2), random_prompt(4, 3)};
  EXPECT_EQ(models::generate(*group, prompts, g).tokens, models::generate(*whole, prompts, g).tokens);
}

TEST(EngineTensorParallel, AGroupOfCpuRanksGivesTheWholeModelsTokens) {
  for (int n : {2, 4})
    expect_group_gives_whole_models_tokens(std::vector<Device>(static_cast<size_t>(n), Device::cpu()));
}

TEST(EngineTensorParallel, AGroupOfTwoGpusGivesTheWholeModelsTokens) {
  std::vector<Device> gpus;
  for (Device d : devices())
    if (!d.is_cpu()) gpus.push_back(d);
  if (gpus.size() < 2) GTEST_SKIP() << "needs two GPUs";
  expect_group_gives_whole_models_tokens({gpus[0], gpus[1]});
}

// A group's decode steps against its own forward() and forward_paged() on a second cache: on GPUs
// each rank's steps are replayed from graphs that hold the step's collectives (recorded() true); on
// CPU ranks they run forward() (contiguous) or are none (paged). The lent layers go back to the
// group's cache after each step.
void expect_group_steps_give_forwards_logits(const std::vector<Device>& devices) {
  const auto n = static_cast<int>(devices.size());
  const bool gpus = devices[0].is_gpu();
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  c.vocab = 96, c.dim = 128, c.hidden = 256, c.layers = 2, c.heads = 8, c.kv_heads = 4, c.head_dim = 16;
  c.context = 64;
  const std::vector<dist::Communicator> comms = dist::Communicator::local(devices);
  std::vector<std::shared_ptr<const models::Model>> parts;
  for (int r = 0; r < n; ++r)
    parts.push_back(std::make_shared<models::LlamaModel>(models::LlamaModel::random(
        c, devices[static_cast<size_t>(r)], DType::F32, std::nullopt, 5, comms[static_cast<size_t>(r)])));
  const models::TensorParallelModel group(parts);
  std::mt19937 rng(6);
  std::uniform_int_distribution<int32_t> id(0, 95);
  auto tokens = [&](int64_t b, int64_t t) {
    std::vector<int32_t> v(static_cast<size_t>(b * t));
    for (int32_t& x : v) x = id(rng);
    return Tensor::from_vector(v, {b, t});
  };

  std::vector<nn::KvCache> stepped = group.make_cache(2, 64), plain = group.make_cache(2, 64);
  const Tensor prompt = tokens(2, 5);
  (void)group.forward(prompt, stepped);
  (void)group.forward(prompt, plain);
  const std::unique_ptr<models::DecodeSteps> steps = group.decode_steps(stepped);
  for (int s = 0; s < 12; ++s) {
    const Tensor next = tokens(2, 1);
    const Tensor got = steps->step(next).to_device(Device::cpu()).copy();
    const Tensor want = group.forward(next, plain, {}, true).to_device(Device::cpu());
    EXPECT_LT(max_abs_diff(got, want), 1e-4f * want.abs().max().item<float>()) << n << " ranks, step " << s;
  }
  EXPECT_EQ(steps->recorded(), gpus);
  EXPECT_EQ(steps->recording_error(), "");
  ASSERT_EQ(stepped.size(), plain.size());
  for (size_t i = 0; i < stepped.size(); ++i) EXPECT_EQ(stepped[i].size(), 17) << "layer " << i << " of the group's";

  const int64_t bs = 4, seqs = 3;
  models::PagedKvCache pool = group.make_paged_cache(seqs * 16 + 1, bs, models::KvType::Model),
                       paged_plain = group.make_paged_cache(seqs * 16 + 1, bs, models::KvType::Model);
  pool.scratch = paged_plain.scratch = static_cast<int32_t>(seqs * 16);
  const std::unique_ptr<models::PagedSteps> paged = group.paged_steps(pool, 4);
  ASSERT_EQ(paged != nullptr, gpus);
  if (!paged) return;
  std::vector<int64_t> length(seqs, 0);
  for (int64_t k : {1, 3, 3, 2, 3, 3, 3, 3}) {
    std::vector<int32_t> tokens(static_cast<size_t>(k));
    for (int32_t& t : tokens) t = id(rng);
    const models::PagedBatch b = decode_batch(tokens, length, 16, bs);
    const Tensor got = paged->step(b).to_device(Device::cpu()).copy();
    const Tensor want = group.forward_paged(b, paged_plain).to_device(Device::cpu());
    EXPECT_LT(max_abs_diff(got, want), 1e-4f * want.abs().max().item<float>()) << k << " sequences";
  }
  EXPECT_TRUE(paged->recorded());
  EXPECT_EQ(paged->recording_error(), "");
}

TEST(EngineTensorParallel, AGroupsDecodeStepsGiveItsForwardsLogits) {
  expect_group_steps_give_forwards_logits({Device::cpu(), Device::cpu()});
  std::vector<Device> gpus;
  for (Device d : devices())
    if (!d.is_cpu()) gpus.push_back(d);
  if (gpus.size() < 2) GTEST_SKIP() << "two GPUs: needs two GPUs";
  expect_group_steps_give_forwards_logits({gpus[0], gpus[1]});
}

TEST(EngineTensorParallel, PartsThatAreNotOneGroupAreRefused) {
  models::LlamaConfig c = models::LlamaConfig::preset("llama3-8b");
  c.vocab = 96, c.dim = 64, c.hidden = 128, c.layers = 2, c.heads = 4, c.kv_heads = 2, c.head_dim = 16;
  const auto whole = std::make_shared<models::LlamaModel>(models::LlamaModel::random(c));
  WICK_EXPECT_ERROR(models::TensorParallelModel({whole}), ShapeError, "a group has at least 2 ranks");
  WICK_EXPECT_ERROR(models::TensorParallelModel({whole, whole}), ShapeError, "part 0 is not rank 0 of a group of 2");
  const std::vector<dist::Communicator> comms = dist::Communicator::local({Device::cpu(), Device::cpu()});
  std::vector<std::shared_ptr<const models::Model>> parts;
  for (int r : {1, 0})
    parts.push_back(std::make_shared<models::LlamaModel>(
        models::LlamaModel::random(c, Device::cpu(), DType::F32, std::nullopt, 0, comms[static_cast<size_t>(r)])));
  WICK_EXPECT_ERROR(models::TensorParallelModel{parts}, ShapeError,
                    "part 0 is not rank 0 of a group of 2 (it is rank 1 of 2)");
  // A cache that is not the group's.
  std::swap(parts[0], parts[1]);
  const models::TensorParallelModel group(parts);
  models::PagedKvCache odd = whole->make_paged_cache(4, 16, models::KvType::Model);
  odd.keys.push_back(odd.keys[0]);
  odd.values.push_back(odd.values[0]);
  models::PagedBatch b;
  WICK_EXPECT_ERROR(group.forward_paged(b, odd), ShapeError, "a cache of 3 layers is not one of this group's 2 ranks'");
}

INSTANTIATE_TEST_SUITE_P(Devices, EngineTest, ::testing::ValuesIn(devices()), device_name);

}  // namespace
}  // namespace wick::test
