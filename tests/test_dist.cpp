// dist::Communicator: every collective against a reference computed from the ranks' inputs with
// wick's own ops on the CPU, for every dtype, 1 to 3 CPU ranks (and every GPU rank the machine
// has), sizes from empty to several chunks of the shared-memory transport, one thread driving
// every rank through dist::group or a thread per rank; then the failures: mismatched calls, bad
// arguments, a rank that never comes, abort. The cross-process cases (wick launch, a killed rank)
// are in test_cli.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include <sys/wait.h>

#include "backend/storage.h"
#include "test_util.h"
#include "wick/dist.h"
#include "wick/ops.h"

namespace wick {
namespace {

using dist::Communicator;
using dist::DistError;
using dist::ReduceOp;

// The bytes of a tensor (through the host): exact comparison for every dtype.
std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.to_device(Device::cpu()).contiguous();
  std::vector<uint8_t> out(static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  if (!out.empty()) std::memcpy(out.data(), static_cast<const char*>(c.storage()->data()) + c.offset() * dtype_size(c.dtype()), out.size());
  return out;
}

// Rank r's input: random values of `dtype` (small integers for integer dtypes, so sums stay in range).
// The f32 draws of each shape and rank are made once and copied after: the sanitizer build's tests
// spent a quarter of their time drawing them again for every dtype and op.
Tensor input(const Shape& shape, DType dtype, int rank, Device device) {
  static std::map<std::pair<std::vector<int64_t>, int>, Tensor> draws;
  auto [it, fresh] = draws.try_emplace({shape.to_vector(), rank});
  if (fresh) {
    manual_seed(1000 + static_cast<uint64_t>(rank), Device::cpu());
    it->second = Tensor::rand_uniform(shape, -50.0, 50.0, DType::F32);
  }
  Tensor x = it->second.copy();
  if (is_int(dtype)) x = (is_unsigned(dtype) ? x.abs() : x).floor();
  return x.to_dtype(dtype).to_device(device);
}

// The reduction of the ranks' inputs as the CPU ranks compute it: in rank order, floats in f32
// (f64 in f64), rounded to the dtype once.
Tensor reference(const std::vector<Tensor>& xs, ReduceOp op) {
  const DType dt = xs[0].dtype();
  const DType wide = dt == DType::F64 ? DType::F64 : is_float(dt) ? DType::F32 : dt;
  Tensor acc = xs[0].to_device(Device::cpu()).to_dtype(wide);
  for (size_t r = 1; r < xs.size(); ++r) {
    const Tensor v = xs[r].to_device(Device::cpu()).to_dtype(wide);
    acc = op == ReduceOp::Max ? acc.maximum(v) : op == ReduceOp::Min ? acc.minimum(v) : acc + v;
  }
  if (op == ReduceOp::Avg) acc = acc / Tensor::scalar(static_cast<double>(xs.size()), wide);
  return acc.to_dtype(dt);
}

// Runs `body(rank)` for every rank: on one thread inside a group, or on a thread per rank.
void each_rank(int n, bool threads, const std::function<void(int)>& body) {
  if (!threads) {
    dist::group([&] {
      for (int r = 0; r < n; ++r) body(r);
    });
    return;
  }
  dist::on_threads(n, body);
}

struct Group {
  std::string name;
  std::vector<Device> devices;
  bool threads;
};

std::vector<Group> groups() {
  std::vector<Group> g;
  for (int n = 1; n <= 3; ++n)
    for (bool threads : {false, true}) g.push_back({"cpu" + std::to_string(n) + (threads ? "_threads" : "_group"), std::vector<Device>(n, Device::cpu()), threads});
  std::vector<Device> gpus;
  for (Device d : available_devices())
    if (!d.is_cpu()) gpus.push_back(d);
  if (!gpus.empty()) g.push_back({"gpu1", {gpus[0]}, false});
  if (gpus.size() >= 2) {
    g.push_back({"gpu2_group", {gpus[0], gpus[1]}, false});
    g.push_back({"gpu2_threads", {gpus[0], gpus[1]}, true});
  }
  return g;
}

class DistTest : public ::testing::TestWithParam<Group> {
 protected:
  void SetUp() override {
    dist::Options o;
    o.timeout = std::chrono::seconds(60);
    comms_ = Communicator::local(GetParam().devices, o);
  }
  int n() const { return static_cast<int>(comms_.size()); }
  Device dev(int r) const { return GetParam().devices[static_cast<size_t>(r)]; }
  std::vector<Communicator> comms_;
};

// Sizes: empty, one element, odd, and (for the CPU ranks' 1 MiB areas) more than one chunk.
const std::vector<Shape> kShapes = {Shape({0}), Shape({1}), Shape({3, 7}), Shape({300007})};
const std::vector<ReduceOp> kOps = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg};

TEST_P(DistTest, AllReduceMatchesTheReferenceForEveryDtypeAndOp) {
  for (DType dt : kAllDTypes)
    for (ReduceOp op : kOps)
      for (const Shape& shape : kShapes) {
        if (dt == DType::I16 || (op == ReduceOp::Avg && is_int(dt))) continue;  // refused: see BadArguments
        if (dt == DType::F8E4M3 && !dev(0).is_cpu()) continue;                   // as the NCCL in use has it
        std::vector<Tensor> xs, ys(static_cast<size_t>(n()));
        for (int r = 0; r < n(); ++r) xs.push_back(input(shape, dt, r, dev(r)));
        each_rank(n(), GetParam().threads, [&](int r) { ys[r] = comms_[r].all_reduce(xs[r], op); });
        const std::vector<uint8_t> want = bytes_of(reference(xs, op));
        for (int r = 0; r < n(); ++r) {
          ASSERT_EQ(ys[r].shape(), shape);
          ASSERT_EQ(bytes_of(ys[r]), want) << dtype_name(dt) << " " << dist::name(op) << " " << shape << " rank " << r;
        }
      }
}

TEST_P(DistTest, AllReduceInPlaceWritesTheInput) {
  for (DType dt : {DType::F32, DType::BF16, DType::I32})
    for (const Shape& shape : {Shape({0}), Shape({7}), Shape({300007})}) {
      std::vector<Tensor> xs, ys;
      for (int r = 0; r < n(); ++r) {
        xs.push_back(input(shape, dt, r, dev(r)));
        ys.push_back(xs.back().contiguous().to_device(dev(r)) * Tensor::ones({1}, dt, dev(r)));  // a copy of its own
      }
      each_rank(n(), GetParam().threads, [&](int r) { comms_[r].all_reduce_(ys[r]); });
      for (int r = 0; r < n(); ++r) ASSERT_EQ(bytes_of(ys[r]), bytes_of(reference(xs, ReduceOp::Sum))) << dtype_name(dt) << " " << shape;
    }
  Tensor strided = input(Shape({4, 6}), DType::F32, 0, dev(0)).t();
  EXPECT_THROW(comms_[0].all_reduce_(strided), ShapeError);
}

TEST_P(DistTest, AllGatherAndBroadcastMoveEveryDtypeExactly) {
  for (DType dt : kAllDTypes)
    for (const Shape& shape : {Shape({0, 2}), Shape({1, 1}), Shape({5, 3}), Shape({150001, 2})}) {
      std::vector<Tensor> xs, gathered(static_cast<size_t>(n())), along1(gathered.size()), sent(gathered.size());
      for (int r = 0; r < n(); ++r) xs.push_back(input(shape, dt, r, dev(r)));
      const int root = n() - 1;
      each_rank(n(), GetParam().threads, [&](int r) {
        gathered[r] = comms_[r].all_gather(xs[r]);
        along1[r] = comms_[r].all_gather(xs[r].t(), 1);  // a strided input, joined along its last dim
        sent[r] = comms_[r].broadcast(xs[r], root);
      });
      std::vector<Tensor> cpu;
      for (const Tensor& x : xs) cpu.push_back(x.to_device(Device::cpu()));
      for (int r = 0; r < n(); ++r) {
        ASSERT_EQ(bytes_of(gathered[r]), bytes_of(cat(cpu, 0))) << dtype_name(dt) << " " << shape;
        std::vector<Tensor> ts;
        for (const Tensor& x : cpu) ts.push_back(x.t());
        ASSERT_EQ(bytes_of(along1[r]), bytes_of(cat(ts, 1))) << dtype_name(dt) << " " << shape;
        ASSERT_EQ(bytes_of(sent[r]), bytes_of(cpu[static_cast<size_t>(root)])) << dtype_name(dt) << " " << shape;
      }
    }
}

TEST_P(DistTest, ReduceScatterGivesEachRankItsPartOfTheReduction) {
  for (DType dt : {DType::F32, DType::BF16, DType::I64, DType::U8})
    for (int64_t rows : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{100003}})
      for (int dim : {0, 1}) {
        const Shape shape = dim == 0 ? Shape({rows * n(), 3}) : Shape({3, rows * n()});
        std::vector<Tensor> xs, ys(static_cast<size_t>(n()));
        for (int r = 0; r < n(); ++r) xs.push_back(input(shape, dt, r, dev(r)));
        each_rank(n(), GetParam().threads, [&](int r) { ys[r] = comms_[r].reduce_scatter(xs[r], ReduceOp::Sum, dim); });
        const Tensor all = reference(xs, ReduceOp::Sum);
        for (int r = 0; r < n(); ++r)
          ASSERT_EQ(bytes_of(ys[r]), bytes_of(all.narrow(dim, r * rows, rows))) << dtype_name(dt) << " " << shape << " dim " << dim;
      }
}

TEST_P(DistTest, SendAndRecvPassARingInOneGroup) {
  if (n() < 2) GTEST_SKIP() << "one rank has no peer";
  for (DType dt : {DType::F32, DType::I16, DType::F8E4M3})
    for (const Shape& shape : {Shape({0}), Shape({7}), Shape({200003})}) {
      std::vector<Tensor> xs, ys(static_cast<size_t>(n()));
      for (int r = 0; r < n(); ++r) xs.push_back(input(shape, dt, r, dev(r)));
      // Each rank sends to the next and receives from the previous: only a group lets both start.
      const bool threads = GetParam().threads;
      each_rank(n(), threads, [&](int r) {
        auto ring = [&] {
          comms_[r].send(xs[r], (r + 1) % n());
          ys[r] = comms_[r].recv(shape, dt, (r + n() - 1) % n());
        };
        if (threads)
          dist::group(ring);
        else
          ring();
      });
      for (int r = 0; r < n(); ++r) ASSERT_EQ(bytes_of(ys[r]), bytes_of(xs[static_cast<size_t>((r + n() - 1) % n())]));
    }
}

TEST_P(DistTest, BadArgumentsRaiseTypedErrorsBeforeAnythingMoves) {
  const Communicator& c = comms_[0];
  const Tensor x = input(Shape({4, 6}), DType::F32, 0, dev(0));
  EXPECT_THROW(c.all_reduce(x.to_dtype(DType::I16)), DTypeError);
  EXPECT_THROW(c.all_reduce(x.to_dtype(DType::I32), ReduceOp::Avg), DTypeError);
  EXPECT_THROW(c.reduce_scatter(x.to_dtype(DType::I16)), DTypeError);
  EXPECT_THROW(c.all_gather(Tensor::scalar(1.0, DType::F32, dev(0))), ShapeError);
  EXPECT_THROW(c.all_gather(x, 2), ShapeError);
  if (n() > 1) {
    EXPECT_THROW(c.reduce_scatter(Tensor::zeros({n() + 1}, DType::F32, dev(0))), ShapeError);
  }
  EXPECT_THROW(c.broadcast(x, n()), Error);
  EXPECT_THROW(c.broadcast(x, -1), Error);
  EXPECT_THROW(c.send(x, 0), Error);  // to itself
  EXPECT_THROW(c.recv(x.shape(), DType::F32, n()), Error);
  EXPECT_THROW(c.all_reduce(Tensor()), Error);
  if (!dev(0).is_cpu()) {
    EXPECT_THROW(c.all_reduce(x.to_device(Device::cpu())), DeviceError);
  }
  EXPECT_THROW(Communicator().all_reduce(x), Error);
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), n());
  EXPECT_EQ(c.device(), dev(0));
  // None of these reached the transport: the group still works.
  std::vector<Tensor> xs, ys(static_cast<size_t>(n()));
  for (int r = 0; r < n(); ++r) xs.push_back(input(Shape({5}), DType::F32, r, dev(r)));
  each_rank(n(), GetParam().threads, [&](int r) { ys[r] = comms_[r].all_reduce(xs[r]); });
  EXPECT_EQ(bytes_of(ys[0]), bytes_of(reference(xs, ReduceOp::Sum)));
}

INSTANTIATE_TEST_SUITE_P(Groups, DistTest, ::testing::ValuesIn(groups()),
                         [](const ::testing::TestParamInfo<Group>& i) { return i.param.name; });

// ---- failures of CPU ranks (GPU ranks' are run across processes on a machine with two GPUs) ----

std::vector<Communicator> cpu_ranks(int n, int timeout_ms) {
  dist::Options o;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  return Communicator::local(std::vector<Device>(static_cast<size_t>(n), Device::cpu()), o);
}

// transport() names what carries each kind of rank: shared memory for the CPU; for a GPU the
// library with its version and the file the loader found.
TEST(DistTransport, NamesTheLibraryAndItsFile) {
  EXPECT_EQ(dist::transport(Device::cpu()), "shared memory");
  for (Device d : available_devices()) {
    if (d.is_cpu()) continue;
    const std::string t = dist::transport(d);
    EXPECT_TRUE(t.rfind("NCCL 2.", 0) == 0 || t.rfind("RCCL 2.", 0) == 0) << t;
    EXPECT_NE(t.find(".so"), std::string::npos) << t;
  }
}

TEST(DistFailures, MismatchedCollectivesFailOnEveryRank) {
  std::vector<Communicator> c = cpu_ranks(2, 10000);
  std::vector<std::string> messages(2);
  each_rank(2, true, [&](int r) {
    try {
      if (r == 0)
        c[0].all_reduce(Tensor::ones({8}));
      else
        c[1].all_gather(Tensor::ones({8}));
    } catch (const DistError& e) {
      messages[r] = e.what();
    }
  });
  for (const std::string& m : messages) {
    EXPECT_NE(m.find("all_reduce of 8 f32 (sum)"), std::string::npos) << m;
    EXPECT_NE(m.find("all_gather of 8 f32"), std::string::npos) << m;
  }
  // The group is unusable from then on.
  EXPECT_THROW(c[0].all_reduce(Tensor::ones({8})), DistError);
}

TEST(DistFailures, ARecvOfTheWrongSizeFails) {
  std::vector<Communicator> c = cpu_ranks(2, 10000);
  EXPECT_THROW(dist::group([&] {
                 c[0].send(Tensor::ones({8}), 1);
                 c[1].recv(Shape({9}), DType::F32, 0);
               }),
               DistError);
}

TEST(DistFailures, ARankThatNeverCallsTimesOutWithAHint) {
  std::vector<Communicator> c = cpu_ranks(2, 200);
  const auto start = std::chrono::steady_clock::now();
  try {
    c[0].all_reduce(Tensor::ones({8}));  // one thread, no group: rank 1 cannot call
    FAIL() << "no error";
  } catch (const DistError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("waited 200 ms in all_reduce for rank 1"), std::string::npos) << m;
    EXPECT_NE(m.find("dist::group"), std::string::npos) << m;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_THROW(c[1].all_reduce(Tensor::ones({8})), DistError);  // the failure reached rank 1
}

TEST(DistFailures, AbortEndsAPeersWait) {
  std::vector<Communicator> c = cpu_ranks(2, 60000);
  std::string message;
  std::thread waiter([&] {
    try {
      c[1].all_reduce(Tensor::ones({8}));
    } catch (const DistError& e) {
      message = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c[0].abort();
  waiter.join();
  EXPECT_NE(message.find("rank 0 aborted the group"), std::string::npos) << message;
}

TEST(DistFailures, AnErrorInsideAGroupAbortsIt) {
  std::vector<Communicator> c = cpu_ranks(2, 60000);
  EXPECT_THROW(dist::group([&] {
                 c[0].all_reduce(Tensor::ones({8}));
                 c[1].all_reduce(Tensor::ones({8}, DType::I16));  // refused
               }),
               DTypeError);
  EXPECT_THROW(c[1].all_reduce(Tensor::ones({8})), DistError);
}

TEST(DistFailures, OnThreadsRunsEveryRankAndRethrowsTheLowestRanksError) {
  std::vector<int> ran(4, 0);
  std::vector<std::thread::id> where(4);
  dist::on_threads(4, [&](int r) {
    ran[static_cast<size_t>(r)] = r + 1;
    where[static_cast<size_t>(r)] = std::this_thread::get_id();
  });
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
  // Rank 0 on the calling thread (one rank makes no second OpenMP pool), the others each on its own.
  EXPECT_EQ(where[0], std::this_thread::get_id());
  for (size_t i = 1; i < where.size(); ++i) EXPECT_NE(where[i], where[0]);
  std::thread::id one;
  dist::on_threads(1, [&](int) { one = std::this_thread::get_id(); });
  EXPECT_EQ(one, std::this_thread::get_id());
  try {
    dist::on_threads(3, [](int r) {
      if (r > 0) throw DTypeError("rank " + std::to_string(r));
    });
    FAIL() << "no error";
  } catch (const DTypeError& e) {
    EXPECT_STREQ(e.what(), "rank 1");
  }
}

TEST(DistFailures, LocalAndJoinRefuseBadGroups) {
  EXPECT_THROW(Communicator::local({}), Error);
  EXPECT_THROW(Communicator::local(std::vector<Device>(65, Device::cpu())), Error);
  EXPECT_THROW(Communicator::join("/tmp/x", 2, 2, Device::cpu()), Error);
  EXPECT_THROW(Communicator::join("", 1, 0, Device::cpu()), Error);
  dist::Options zero;
  zero.timeout = std::chrono::milliseconds(0);
  EXPECT_THROW(Communicator::local({Device::cpu()}, zero), Error);
  // A rank that waits for a rank 0 that never comes.
  dist::Options quick;
  quick.timeout = std::chrono::milliseconds(100);
  const std::string path = ::testing::TempDir() + "/wick-dist-nobody";
  std::remove(path.c_str());
  EXPECT_THROW(Communicator::join(path, 2, 1, Device::cpu(), quick), DistError);
}

TEST(DistFailures, JoinMakesOneGroupOfThreadsThroughAFile) {
  const std::string path = ::testing::TempDir() + "/wick-dist-join";
  std::remove(path.c_str());
  std::vector<Communicator> c(3);
  each_rank(3, true, [&](int r) { c[r] = Communicator::join(path, 3, r, Device::cpu()); });
  EXPECT_FALSE(std::ifstream(path).good());  // rank 0 removed it once all had joined
  std::vector<Tensor> ys(3);
  each_rank(3, true, [&](int r) { ys[r] = c[r].all_reduce(Tensor::full({4}, r + 1.0)); });
  for (const Tensor& y : ys) EXPECT_EQ(y.to_vector<float>(), std::vector<float>(4, 6.0f));
  // The same path again, while nobody removed it: an error, not a shared file.
  { std::ofstream(path) << "x"; }
  EXPECT_THROW(Communicator::join(path, 1, 0, Device::cpu()), DistError);
  std::remove(path.c_str());
}

// ---- groups of processes through `wick launch` (tests/dist_rank.cpp is each rank) -------------

struct Launched {
  int status;
  std::string output;
};

// The process tests need the `wick` program; a build of test_dist alone (the sanitizer build) skips them.
#define WICK_NEEDS_CLI()                                                                                  \
  if (!std::ifstream(WICK_CLI).good() || !std::ifstream(WICK_DIST_RANK).good()) GTEST_SKIP() << "wick and dist_rank not built"

Launched launch(const std::string& args) {
  const std::string cmd = std::string(WICK_CLI) + " launch " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

const std::string kRank = WICK_DIST_RANK;

TEST(DistProcesses, LaunchRunsAGroupOfProcesses) {
  WICK_NEEDS_CLI();
  const Launched r = launch("-n 3 " + kRank + " collectives");
  EXPECT_EQ(r.status, 0) << r.output;
  for (int i = 0; i < 3; ++i) EXPECT_NE(r.output.find("rank " + std::to_string(i) + " of 3: ok"), std::string::npos) << r.output;
}

TEST(DistProcesses, AKilledRankFailsTheOthersInsteadOfHangingThem) {
  WICK_NEEDS_CLI();
  const auto start = std::chrono::steady_clock::now();
  const Launched r = launch("-n 3 " + kRank + " die");
  EXPECT_EQ(r.status, 3) << r.output;  // rank 1's own status
  EXPECT_NE(r.output.find("wick launch: rank 1 (process"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exited with status 3"), std::string::npos) << r.output;
  for (int i : {0, 2}) EXPECT_NE(r.output.find("rank " + std::to_string(i) + ": DistError: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("has exited"), std::string::npos) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(DistProcesses, AHungRankTimesTheOthersOut) {
  WICK_NEEDS_CLI();
  const Launched r = launch("-n 2 " + kRank + " hang");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rank 0: DistError: dist: all_reduce on rank 0: rank 0 waited 1000 ms in all_reduce for rank 1"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank 1: DistError: dist: all_reduce on rank 1: rank 0 reports"), std::string::npos) << r.output;
}

TEST(DistProcesses, LaunchRefusesBadArgumentsAndReportsACommandThatDoesNotRun) {
  WICK_NEEDS_CLI();
  EXPECT_EQ(launch(kRank).status, 2);
  EXPECT_EQ(launch("-n 0 " + kRank).status, 2);
  EXPECT_EQ(launch("-n 2").status, 2);
  const Launched missing = launch("-n 2 /nonexistent/program");
  EXPECT_EQ(missing.status, 127) << missing.output;
  EXPECT_NE(missing.output.find("cannot run /nonexistent/program"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace wick
