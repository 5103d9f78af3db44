// moe_route, moe_combine and matmul_grouped: the checks, then the backend's kernel, or the host
// routing and the compositions that are their oracles.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "nn/nn_ops.h"
#include "wick/nn.h"
#include "wick/ops.h"

namespace wick::nn {

namespace {

// Whether expert a (score sa) comes before expert b (score sb) in a token's choice: the higher
// score first, the lower index among equal ones, a NaN after every number.
bool before(double sa, int64_t a, double sb, int64_t b) {
  const bool na = std::isnan(sa), nb = std::isnan(sb);
  if (na != nb) return nb;
  if (!na && sa != sb) return sa > sb;
  return a < b;
}

// The routing computed on the host in double: the oracle of the kernels, and the CPU's own.
MoeRouting route_on_host(const Tensor& scores, int64_t k, bool renormalize) {
  const int64_t n = scores.dim(0), experts = scores.dim(1), pairs = n * k;
  const std::vector<double> s = scores.to_dtype(DType::F64).to_device(Device::cpu()).contiguous().to_vector<double>();
  std::vector<int64_t> ids(static_cast<size_t>(pairs));
  std::vector<float> weights(static_cast<size_t>(pairs));
  std::vector<int64_t> order(static_cast<size_t>(experts));
  std::vector<double> p(static_cast<size_t>(experts));
  for (int64_t i = 0; i < n; ++i) {
    const double* row = s.data() + i * experts;
    double top = -INFINITY;
    for (int64_t e = 0; e < experts; ++e)
      if (!std::isnan(row[e])) top = std::max(top, row[e]);
    double sum = 0;
    for (int64_t e = 0; e < experts; ++e) {
      p[static_cast<size_t>(e)] = std::isnan(row[e]) || std::isinf(top) ? 0.0 : std::exp(row[e] - top);
      sum += p[static_cast<size_t>(e)];
    }
    for (int64_t e = 0; e < experts; ++e) order[static_cast<size_t>(e)] = e;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int64_t a, int64_t b) { return before(row[a], a, row[b], b); });
    double picked = 0;
    for (int64_t j = 0; j < k; ++j) picked += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
    const double total = renormalize ? picked : sum;
    std::sort(order.begin(), order.begin() + k);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = order[static_cast<size_t>(j)];
      ids[static_cast<size_t>(i * k + j)] = e;
      weights[static_cast<size_t>(i * k + j)] = total > 0 ? static_cast<float>(p[static_cast<size_t>(e)] / total) : 0.f;
    }
  }
  // The pairs in the experts' order (a stable counting sort: tokens in order within an expert).
  std::vector<int64_t> start(static_cast<size_t>(experts) + 1, 0);
  for (int64_t e : ids) ++start[static_cast<size_t>(e) + 1];
  for (int64_t e = 0; e < experts; ++e) start[static_cast<size_t>(e) + 1] += start[static_cast<size_t>(e)];
  const int64_t g = std::min(experts, pairs);
  std::vector<int64_t> groups;
  groups.reserve(static_cast<size_t>(3 * g));
  for (int64_t e = 0; e < experts; ++e)
    if (start[static_cast<size_t>(e) + 1] > start[static_cast<size_t>(e)])
      groups.insert(groups.end(), {e, start[static_cast<size_t>(e)], start[static_cast<size_t>(e) + 1]});
  while (static_cast<int64_t>(groups.size()) < 3 * g) groups.insert(groups.end(), {0, pairs, pairs});
  std::vector<int64_t> tokens(static_cast<size_t>(pairs)), slots(static_cast<size_t>(pairs));
  for (int64_t q = 0; q < pairs; ++q) {
    const int64_t row = start[static_cast<size_t>(ids[static_cast<size_t>(q)])]++;
    tokens[static_cast<size_t>(row)] = q / k;
    slots[static_cast<size_t>(q)] = row;
  }
  const Device d = scores.device();
  return {Tensor::from_vector(ids, {n, k}, d), Tensor::from_vector(weights, {n, k}, d),
          Tensor::from_vector(tokens, {pairs}, d), Tensor::from_vector(slots, {pairs}, d),
          Tensor::from_vector(groups, {g, 3}, d)};
}

}  // namespace

MoeRouting moe_route(const Tensor& scores, int64_t k, bool renormalize) {
  constexpr const char* op = "moe_route";
  detail::check_input(op, NnOp::MoeRoute, scores);
  WICK_CHECK(scores.rank() == 2, ShapeError, op, "scores must be (tokens, experts), got ", ops::describe(scores));
  const int64_t n = scores.dim(0), experts = scores.dim(1);
  WICK_CHECK(k >= 1 && k <= experts, ShapeError, op, "k = ", k, " must be from 1 to the ", experts, " experts (scores ",
             ops::describe(scores), ")");
  ops::check_output(op, Shape({n, k}), DType::I64, {&scores});
  if (n == 0) {
    const Device d = scores.device();
    return {Tensor::zeros({0, k}, DType::I64, d), Tensor::zeros({0, k}, DType::F32, d),
            Tensor::zeros({0}, DType::I64, d), Tensor::zeros({0}, DType::I64, d), Tensor::zeros({0, 3}, DType::I64, d)};
  }
  if (const NnKernels* kernels = detail::fused(NnOp::MoeRoute, scores)) {
    const Tensor s = scores.contiguous();
    NnKernels::MoeRouteStorage r = kernels->moe_route(ops::view_of(s), k, renormalize);
    if (r.ids) {
      const int64_t pairs = n * k;
      return {ops::wrap(std::move(r.ids), {n, k}, DType::I64), ops::wrap(std::move(r.weights), {n, k}, DType::F32),
              ops::wrap(std::move(r.tokens), {pairs}, DType::I64), ops::wrap(std::move(r.slots), {pairs}, DType::I64),
              ops::wrap(std::move(r.groups), {std::min(experts, pairs), 3}, DType::I64)};
    }
  }
  return route_on_host(scores, k, renormalize);
}

Tensor moe_combine(const Tensor& y, const MoeRouting& routing) {
  constexpr const char* op = "moe_combine";
  detail::check_input(op, NnOp::MoeCombine, y);
  ops::check_defined(op, routing.weights);
  ops::check_defined(op, routing.slots);
  ops::check_same_device(op, {&y, &routing.weights, &routing.slots});
  WICK_CHECK(routing.weights.dtype() == DType::F32 && routing.weights.rank() == 2, DTypeError, op,
             "the routing's weights must be (tokens, k) f32, got ", ops::describe(routing.weights));
  const int64_t n = routing.weights.dim(0), k = routing.weights.dim(1);
  WICK_CHECK(routing.slots.dtype() == DType::I64 && routing.slots.rank() == 1 && routing.slots.dim(0) == n * k,
             ShapeError, op, "the routing's slots must be (", n * k, ") i64 for its weights ",
             ops::describe(routing.weights), ", got ", ops::describe(routing.slots));
  WICK_CHECK(y.rank() == 2 && y.dim(0) == n * k, ShapeError, op, "y ", ops::describe(y), " must be (", n * k,
             ", d): a row for each of the routing's ", n, " tokens times ", k, " experts");
  const int64_t d = y.dim(1);
  ops::check_output(op, Shape({n, d}), y.dtype(), {&y});
  if (n == 0 || d == 0) return Tensor::zeros({n, d}, y.dtype(), y.device());
  if (const NnKernels* kernels = detail::fused(NnOp::MoeCombine, y)) {
    const Tensor yc = y.contiguous(), w = routing.weights.contiguous(), s = routing.slots.contiguous();
    if (StoragePtr out = kernels->moe_combine(ops::view_of(yc), ops::view_of(w), ops::view_of(s), k))
      return ops::wrap(std::move(out), {n, d}, y.dtype());
  }
  // Each token's rows gathered, weighted and added in the order of its experts, in the math type.
  const DType m = detail::math_dtype(y.dtype());
  const Tensor by_pair =
      y.index_select(routing.slots, 0).to_dtype(m).reshape({n, k, d}) * routing.weights.to_dtype(m).reshape({n, k, 1});
  Tensor out = by_pair.narrow(1, 0, 1);
  for (int64_t j = 1; j < k; ++j) out = out + by_pair.narrow(1, j, 1);
  return out.reshape({n, d}).to_dtype(y.dtype());
}

Tensor matmul_grouped(const Tensor& x, const Tensor& w, int64_t experts, const Tensor& groups, int64_t max_rows) {
  constexpr const char* op = "matmul_grouped";
  detail::check_input(op, NnOp::MatmulGrouped, x);
  ops::check_defined(op, w);
  ops::check_defined(op, groups);
  ops::check_same_device(op, {&x, &w, &groups});
  WICK_CHECK(w.dtype() == x.dtype(), DTypeError, op, "the weights ", ops::describe(w), " must have the dtype of x ",
             ops::describe(x));
  WICK_CHECK(w.rank() == 2, ShapeError, op, "the weights must be (experts * rows, cols), got ", ops::describe(w));
  WICK_CHECK(x.rank() == 2 && x.dim(1) == w.dim(1), ShapeError, op, "x ", ops::describe(x), " must be (rows, ",
             w.dim(1), "): the weights' columns (", ops::describe(w), ")");
  WICK_CHECK(experts >= 1 && w.dim(0) % experts == 0, ShapeError, op, "the weights ", ops::describe(w),
             " do not stack ", experts, " experts of equal rows");
  WICK_CHECK(groups.dtype() == DType::I64 && groups.rank() == 2 && groups.dim(1) == 3, ShapeError, op,
             "groups must be (g, 3) i64 ([expert, first row, end row) each), got ", ops::describe(groups));
  WICK_CHECK(max_rows >= 0, ShapeError, op, "max_rows = ", max_rows, " is negative");
  const int64_t p = x.dim(0), rows = w.dim(0) / experts;
  ops::check_output(op, Shape({p, rows}), x.dtype(), {&x});
  if (p == 0 || rows == 0 || groups.dim(0) == 0) return Tensor::zeros({p, rows}, x.dtype(), x.device());
  if (x.dim(1) > 0)
    if (const NnKernels* kernels = detail::fused(NnOp::MatmulGrouped, x)) {
      const Tensor xc = x.contiguous(), wc = w.contiguous(), gc = groups.contiguous();
      if (StoragePtr out =
              kernels->matmul_grouped(ops::view_of(xc), ops::view_of(wc), experts, ops::view_of(gc), max_rows))
        return ops::wrap(std::move(out), {p, rows}, x.dtype());
    }
  // The composition (the oracle of the kernels): each group's rows times its expert's weight.
  const std::vector<int64_t> g = ops::host_groups(op, groups, experts, p);
  Tensor out = Tensor::zeros({p, rows}, x.dtype(), x.device());
  for (size_t i = 0; i < g.size(); i += 3) {
    const int64_t e = g[i], first = g[i + 1], end = g[i + 2];
    if (first == end) continue;
    out.slice_set(x.narrow(0, first, end - first).matmul(w.narrow(0, e * rows, rows).t()), 0, first);
  }
  return out;
}

}  // namespace wick::nn
