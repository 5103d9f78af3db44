// Cases for reduce (sum, min, max, argmin, argmax over dim sets), cumsum and argsort.
#include <algorithm>
#include <sstream>

#include "parity/cases.h"

namespace wick::parity {

namespace {

std::string dims_label(const std::vector<int>& dims) {
  std::ostringstream os;
  os << "over {";
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? "," : "") << dims[i];
  os << "}";
  return os.str();
}

// Layout variants of a reduction. Not rank 0: the backend's reduce and cumsum take at least one
// dim; the front end answers sum/min/max of a rank-0 tensor with a copy (tests/test_ops.cpp).
std::vector<Variant> reduce_variants(DType dt, bool long_runs) {
  std::vector<Variant> out;
  for (const Variant& v : standard_variants(dt))
    if (v.name != "rank0") out.push_back(v);
  // Long enough for the chunked (and parallel) paths of a dense run.
  if (long_runs) out.push_back({"long", {70001}});
  return out;
}

void add_reduce(std::vector<Case>& cases, ReduceOp op, DType dt) {
  const bool arg = op == ReduceOp::ArgMin || op == ReduceOp::ArgMax;
  const std::vector<std::vector<int>> dim_sets = arg ? std::vector<std::vector<int>>{{0}, {1}, {2}}
                                                     : std::vector<std::vector<int>>{{2}, {0}, {1}, {0, 2}, {0, 1, 2}};
  const bool long_runs = dt == DType::F32 || dt == DType::F16 || dt == DType::I32 || dt == DType::F64;
  for (Variant v : reduce_variants(dt, long_runs)) {
    if (op != ReduceOp::Sum && v.values == Values::Normal) v.values = Values::Small;  // ties
    for (std::vector<int> dims : dim_sets) {
      if (v.shape.rank() == 1) {
        if (dims != dim_sets.front()) continue;
        dims = {0};
      }
      // min/max need a non-empty reduced dim: the empty variant reduces over the others.
      if (op != ReduceOp::Sum && v.name == "empty" && std::find(dims.begin(), dims.end(), 1) != dims.end()) continue;
      const DType out_dt = arg ? DType::U32 : dt;
      cases.push_back({OpKey(op).name(),
                       label(dt),
                       shape_label(v.shape, dims_label(dims)),
                       v.name,
                       op,
                       {dt},
                       op == ReduceOp::Sum ? Compare::Float : Compare::Exact,
                       false,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, v.shape, v.form(0, 1), v.values);
                         return out(c.backend().reduce(op, x.view(), dims), out_dt);
                       }});
    }
  }
}

void add_cumsum(std::vector<Case>& cases, DType dt) {
  for (const Variant& v : reduce_variants(dt, false)) {
    for (int dim = 0; dim < v.shape.rank(); ++dim) {
      cases.push_back({"cumsum",
                       label(dt),
                       shape_label(v.shape, dims_label({dim})),
                       v.name,
                       OpCode::Cumsum,
                       {dt},
                       Compare::Float,
                       false,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, v.shape, v.form(0, 1), v.values);
                         return out(c.backend().cumsum(x.view(), dim), dt);
                       }});
    }
  }
}

void add_argsort(std::vector<Case>& cases, DType dt) {
  for (Variant v : standard_variants(dt)) {
    if (v.values == Values::Normal) v.values = Values::Small;  // ties: the sort must be stable
    for (bool ascending : {true, false}) {
      cases.push_back({"argsort",
                       label(dt),
                       shape_label(v.shape, ascending ? "ascending" : "descending"),
                       v.name,
                       OpCode::Argsort,
                       {dt},
                       Compare::Exact,
                       false,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, v.shape, v.form(0, 1), v.values);
                         return out(c.backend().argsort(x.view(), ascending), DType::U32);
                       }});
    }
  }
}

}  // namespace

void add_reduce_cases(std::vector<Case>& cases) {
  for (int op = 0; op < kNumReduceOps; ++op)
    for (DType dt : kAllDTypes) add_reduce(cases, static_cast<ReduceOp>(op), dt);
  for (DType dt : kAllDTypes) add_cumsum(cases, dt);
  for (DType dt : kAllDTypes) add_argsort(cases, dt);
}

}  // namespace wick::parity
