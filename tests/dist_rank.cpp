// One rank of a group started by `wick launch` (tests/test_dist.cpp runs it; so does a machine
// with several GPUs):
//   dist_rank collectives [DEVICE]   all_reduce, all_gather, broadcast, reduce_scatter and a ring
//                                    of send/recv, each checked; prints "rank R of N: ok"
//   dist_rank die [DEVICE]           rank 1 exits at once; the others' all_reduce must raise
//                                    DistError naming it (within the 1 s timeout)
//   dist_rank hang [DEVICE]          rank 1 stops answering for 3 s; the others must time out
//                                    after 1 s, and rank 1's next call must see their failure
// DEVICE is cpu (default) or a GPU kind ("cuda"), whose device index is WICK_LOCAL_RANK. Exits 0
// when the rank saw what it should.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "wick/dist.h"
#include "wick/ops.h"

using namespace wick;

namespace {

int check(bool ok, const std::string& what, int rank) {
  if (!ok) std::fprintf(stderr, "rank %d: %s: wrong result\n", rank, what.c_str());
  return ok ? 0 : 1;
}

int collectives(const dist::Communicator& c) {
  const int r = c.rank(), n = c.size();
  const Device d = c.device();
  int bad = 0;
  // Rank r holds r + 1 everywhere: sums, gathers and the root's values are known exactly.
  const Tensor mine = Tensor::full({1000, 3}, r + 1.0, DType::F32, d);
  bad += check(c.all_reduce(mine).to_vector<float>() == std::vector<float>(3000, n * (n + 1) / 2.0f), "all_reduce", r);
  bad += check(c.all_reduce(mine, dist::ReduceOp::Max).to_vector<float>() == std::vector<float>(3000, float(n)), "max", r);
  const std::vector<float> g = c.all_gather(mine.narrow(0, 0, 2)).to_vector<float>();
  bool gathered = g.size() == static_cast<size_t>(6 * n);
  for (size_t i = 0; gathered && i < g.size(); ++i) gathered = g[i] == static_cast<float>(i / 6 + 1);
  bad += check(gathered, "all_gather", r);
  bad += check(c.broadcast(mine, n - 1).to_vector<float>() == std::vector<float>(3000, float(n)), "broadcast", r);
  const Tensor parts = Tensor::full({2 * n}, r + 1.0, DType::F32, d);
  bad += check(c.reduce_scatter(parts).to_vector<float>() == std::vector<float>(2, n * (n + 1) / 2.0f), "reduce_scatter", r);
  if (n > 1) {
    Tensor got;
    dist::group([&] {
      c.send(Tensor::full({5}, r * 10.0, DType::I64, d), (r + 1) % n);
      got = c.recv(Shape({5}), DType::I64, (r + n - 1) % n);
    });
    bad += check(got.to_vector<int64_t>() == std::vector<int64_t>(5, ((r + n - 1) % n) * 10), "send/recv", r);
  }
  c.synchronize();
  if (bad == 0) std::printf("rank %d of %d: ok\n", r, n);
  return bad == 0 ? 0 : 1;
}

// The other ranks' side of `die` and `hang`: a call that must fail with `expect` in the message.
int expect_failure(const dist::Communicator& c, const std::string& expect) {
  try {
    c.all_reduce(Tensor::ones({8}, DType::F32, c.device())).to_vector<float>();
    c.synchronize();
  } catch (const dist::DistError& e) {
    std::printf("rank %d: DistError: %s\n", c.rank(), e.what());
    return std::string(e.what()).find(expect) == std::string::npos ? 1 : 0;
  }
  std::fprintf(stderr, "rank %d: no error\n", c.rank());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "collectives";
  const std::string kind = argc > 2 ? argv[2] : "cpu";
  try {
    Device device = Device::cpu();
    if (kind != "cpu") {
      const char* local = std::getenv("WICK_LOCAL_RANK");
      if (!Device::parse(kind + ":" + (local != nullptr ? local : "0"), &device)) throw Error("dist_rank: bad device " + kind);
    }
    dist::Options options;
    if (scenario != "collectives") options.timeout = std::chrono::seconds(1);
    const dist::Communicator c = dist::Communicator::from_env(device, options);
    if (scenario == "collectives") return collectives(c);
    // A GPU rank learns of the failure from NCCL or from the watchdog, in their words.
    const bool cpu = device.is_cpu();
    if (scenario == "die") {
      if (c.rank() == 1) std::_Exit(3);
      return expect_failure(c, cpu ? "rank 1 (process" : "");
    }
    if (scenario == "hang") {
      if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(3));
      return expect_failure(c, cpu ? "waited 1000 ms" : "");
    }
    std::fprintf(stderr, "dist_rank: unknown scenario %s\n", scenario.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_rank: %s\n", e.what());
    return 1;
  }
}
