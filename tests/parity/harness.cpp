#include "parity/harness.h"

#include <cmath>
#include <cstring>
#include <iomanip>
#include <map>
#include <ostream>
#include <regex>
#include <sstream>

#include "core/dispatch.h"
#include "kernels/cast.h"
#include "wick/error.h"

namespace wick::parity {

namespace {

// The layout of `shape` in `form`, and how many elements its storage needs.
Layout build_layout(const Shape& shape, Form form, int64_t* storage_numel) {
  const int r = shape.rank();
  Layout l(shape);
  if (form == Form::Transposed && r >= 2) {
    Layout stored(Layout(shape).transpose(-2, -1).shape());
    l = stored.transpose(-2, -1);
  } else if (form == Form::Narrow) {
    if (r == 0) {
      l = Layout(shape, 2);
    } else {
      Shape wide = shape;
      wide[r - 1] += 3;
      l = Layout(wide).narrow(-1, 2, shape[r - 1]);
    }
  } else if (form == Form::Stride2) {
    if (r == 0) {
      l = Layout(shape, 1);
    } else {
      Shape wide = shape;
      wide[r - 1] = 2 * shape[r - 1] + 1;
      l = Layout(wide).slice(-1, 1, wide[r - 1], 2);
    }
  } else if (form == Form::Broadcast && r >= 1) {
    Shape small = shape;
    small[0] = 1;
    small[r - 1] = 1;
    l = Layout(small).broadcast_as(shape);
  } else if (form == Form::Permuted && r >= 2) {
    // The view's first dim is the storage's innermost (stride 1): a general permutation, not a swap.
    Shape stored;
    std::vector<int64_t> dims = {r - 1};
    for (int d = 1; d < r; ++d) {
      stored.push_back(shape[d]);
      dims.push_back(d - 1);
    }
    stored.push_back(shape[0]);
    l = Layout(stored).permute(dims);
  }
  *storage_numel = std::max<int64_t>(l.extent(), 1);
  return l;
}

double special_value(std::mt19937_64& rng) {
  static const double kSpecials[] = {NAN, INFINITY, -INFINITY, 0.0,  -0.0,    1e-40,   6e-8,  1e30, -1e30,
                                     0.5, -0.5,     2.5,       -2.5, 65504.0, 70000.0, 448.0, 500.0};
  return kSpecials[std::uniform_int_distribution<size_t>(0, std::size(kSpecials) - 1)(rng)];
}

template <typename T>
T random_value(std::mt19937_64& rng, Values values) {
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto integer = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto chance = [&](double p) { return uniform(0, 1) < p; };
  if constexpr (kernels::is_float_v<T>) {
    double v = 0;
    switch (values) {
      case Values::Normal: v = uniform(-3, 3); break;
      case Values::Positive: v = uniform(0.1, 4); break;
      case Values::Small: v = static_cast<double>(integer(-8, 8)); break;
      case Values::Wide: v = chance(0.1) ? uniform(-1e6, 1e6) : uniform(-1000, 1000); break;
      case Values::Special: v = chance(0.25) ? special_value(rng) : uniform(-3, 3); break;
      case Values::Cond: v = static_cast<double>(integer(0, 1)); break;
    }
    return kernels::cast<T>(v);
  } else {
    using L = std::numeric_limits<T>;
    const int64_t lo = static_cast<int64_t>(L::min()), hi = static_cast<int64_t>(L::max());
    int64_t v = 0;
    switch (values) {
      case Values::Normal:
        v = sizeof(T) == 1 ? integer(lo, hi) : integer(std::max<int64_t>(lo, -3000), std::min<int64_t>(hi, 3000));
        break;
      case Values::Positive: v = integer(1, 50); break;
      case Values::Small: v = integer(std::max<int64_t>(lo, -8), 8); break;
      case Values::Wide: v = static_cast<int64_t>(static_cast<T>(rng())); break;
      case Values::Special: {
        const int64_t picks[] = {lo, hi, 0, -1, 1, lo + 1, hi - 1};
        v = chance(0.3) ? picks[integer(0, 6)] : static_cast<int64_t>(static_cast<T>(rng()));
        break;
      }
      case Values::Cond: v = chance(0.1) ? integer(2, 7) : integer(0, 1); break;
    }
    return static_cast<T>(v);
  }
}

Arg upload(Backend& b, DType dtype, const Layout& layout, const std::vector<unsigned char>& host) {
  return {b.from_host(host.data(), host.size()), layout, dtype};
}

}  // namespace

Arg Ctx::input(DType dtype, const Shape& shape, Form form, Values values) {
  int64_t n;
  Layout layout = build_layout(shape, form, &n);
  std::vector<unsigned char> host(static_cast<size_t>(n * dtype_size(dtype)));
  dispatch(dtype, [&]<typename T>() {
    T* p = reinterpret_cast<T*>(host.data());
    for (int64_t i = 0; i < n; ++i) p[i] = random_value<T>(rng_, values);
  });
  return upload(backend_, dtype, layout, host);
}

Arg Ctx::indices(DType dtype, const Shape& shape, int64_t size, bool skips, bool out_of_range, Form form) {
  int64_t n;
  Layout layout = build_layout(shape, form, &n);
  std::vector<unsigned char> host(static_cast<size_t>(n * dtype_size(dtype)));
  dispatch(dtype, [&]<typename T>() {
    if constexpr (std::is_integral_v<T>) {
      T* p = reinterpret_cast<T*>(host.data());
      std::uniform_int_distribution<int64_t> pick(0, std::max<int64_t>(size - 1, 0));
      std::uniform_real_distribution<double> u(0, 1);
      for (int64_t i = 0; i < n; ++i) {
        p[i] = static_cast<T>(pick(rng_));
        if (skips && u(rng_) < 0.1) p[i] = std::numeric_limits<T>::max();
      }
      // Put the bad index on an element the view reads: the one at the view's middle.
      if (out_of_range && layout.numel() > 0)
        p[layout.offset() + (layout.extent() - 1 - layout.offset()) / 2] = static_cast<T>(size);
    }
  });
  return upload(backend_, dtype, layout, host);
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F64: return 1e-20;
    case DType::F32: return 1e-10;
    case DType::F16: return 1e-5;
    case DType::BF16: return 3e-4;
    case DType::F8E4M3: return 5e-2;
    default: return 0;
  }
}

uint64_t case_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name, keyed by the seed
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

namespace {

std::vector<unsigned char> download(Backend& b, const Output& out) {
  std::vector<unsigned char> bytes(out.storage->nbytes());
  b.to_host(*out.storage, 0, bytes.size(), bytes.data());
  return bytes;
}

double element(const std::vector<unsigned char>& bytes, DType dt, size_t i) {
  return dispatch(dt, [&]<typename T>() {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return static_cast<double>(v);
  });
}

// Compares got (backend) with want (reference); fills nmse, max_abs and a message on failure.
bool compare(const std::vector<unsigned char>& got, const std::vector<unsigned char>& want, DType dt, Compare mode,
             double limit, Record& r) {
  if (got.size() != want.size()) {
    r.message = detail::str_cat("output has ", got.size(), " bytes, the reference ", want.size());
    return false;
  }
  const size_t n = got.size() / static_cast<size_t>(dtype_size(dt));
  if (is_int(dt)) {
    for (size_t i = 0; i < n; ++i) {
      double a = element(got, dt, i), b = element(want, dt, i);
      if (a != b) {
        r.max_abs = std::fabs(a - b);
        r.message = detail::str_cat("element ", i, ": got ", a, ", expected ", b);
        return false;
      }
    }
    return true;
  }
  double err = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    double a = element(got, dt, i), b = element(want, dt, i);
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
      bool same = (std::isnan(a) && std::isnan(b)) || a == b;
      if (!same) {
        r.message = detail::str_cat("element ", i, ": got ", a, ", expected ", b, " (NaN/Inf positions differ)");
        return false;
      }
      continue;
    }
    if (mode == Compare::Exact && a != b) {
      r.max_abs = std::fabs(a - b);
      r.message = detail::str_cat("element ", i, ": got ", a, ", expected ", b, " (exact comparison)");
      return false;
    }
    err += (a - b) * (a - b);
    norm += b * b;
    r.max_abs = std::max(r.max_abs, std::fabs(a - b));
  }
  r.nmse = norm > 0 ? err / norm : err;
  if (r.nmse > limit) {
    r.message = detail::str_cat("normalised error ", r.nmse, " above ", limit, " for ", dt, " (max abs ",
                                r.max_abs, ")");
    return false;
  }
  return true;
}

// Runs the case on one backend; returns the output bytes, or sets *index_error.
std::vector<unsigned char> run_on(Backend& b, const Case& c, uint64_t seed, DType* dt, bool* index_error) {
  *index_error = false;
  try {
    b.set_seed(seed);
    Ctx ctx(b, seed);
    Output out = c.run(ctx);
    b.synchronize();
    *dt = out.dtype;
    return download(b, out);
  } catch (const IndexError&) {
    *index_error = true;
    return {};
  }
}

}  // namespace

void run_cases(Backend& backend, Backend& reference, const std::vector<Case>& cases, const Options& options,
               std::vector<Record>& records) {
  std::regex op_re(options.op_regex.empty() ? ".*" : options.op_regex);
  for (const Case& c : cases) {
    if (!options.case_name.empty() && c.name() != options.case_name) continue;
    if (!std::regex_search(c.op, op_re)) continue;
    if (!options.dtypes.empty() &&
        std::find(options.dtypes.begin(), options.dtypes.end(), c.main_dtype()) == options.dtypes.end())
      continue;
    Record r{&c, backend.name(), Status::Pass, 0, 0, {}};
    // The nn and quant ops run on every backend (fused, or composed by the front end where the
    // backend has no kernel); the other ops only where the backend supports them.
    const bool everywhere = c.key.code == OpCode::Nn || c.key.code == OpCode::Quant;
    const bool runs = everywhere ? op_defined(c.key, c.dtypes) : backend.supports(c.key, c.dtypes);
    if (!runs) {
      r.status = Status::Unsupported;
      records.push_back(r);
      continue;
    }
    const uint64_t seed = case_seed(options.seed, c.name());
    const int64_t violations = backend.guard_violations();
    backend.set_alloc_check({.poison = true, .guard_bytes = 64});
    try {
      DType dt_got = DType::U8, dt_want = DType::U8;
      bool err_got, err_want;
      std::vector<unsigned char> got = run_on(backend, c, seed, &dt_got, &err_got);
      std::vector<unsigned char> want = run_on(reference, c, seed, &dt_want, &err_want);
      if (c.expect_index_error) {
        if (!err_got || !err_want) {
          r.status = Status::Fail;
          r.message = detail::str_cat("expected IndexError from both; ", backend.name(), ": ",
                                      err_got ? "raised" : "none", ", reference: ", err_want ? "raised" : "none");
        }
      } else if (err_got || err_want) {
        r.status = Status::Fail;
        r.message = detail::str_cat("unexpected IndexError from ", err_got ? backend.name() : "the reference");
      } else if (dt_got != dt_want) {
        r.status = Status::Fail;
        r.message = detail::str_cat("output dtype ", dt_got, ", the reference ", dt_want);
      } else if (!compare(got, want, dt_got, c.compare, c.tolerance > 0 ? c.tolerance : tolerance(dt_got), r)) {
        r.status = Status::Fail;
      }
    } catch (const std::exception& e) {
      r.status = Status::Fail;
      r.message = detail::str_cat("exception: ", e.what());
    }
    backend.set_alloc_check({});
    if (backend.guard_violations() != violations && r.status == Status::Pass) {
      r.status = Status::Fail;
      r.message = "wrote outside its output (guard bytes changed)";
    }
    records.push_back(r);
  }
}

void print_report(const std::vector<Record>& records, std::ostream& os, uint64_t seed) {
  std::vector<std::string> backends, ops;
  for (const Record& r : records) {
    if (std::find(backends.begin(), backends.end(), r.backend) == backends.end()) backends.push_back(r.backend);
    if (std::find(ops.begin(), ops.end(), r.c->op) == ops.end()) ops.push_back(r.c->op);
  }
  for (const std::string& backend : backends) {
    std::map<std::pair<std::string, int>, std::array<int, 3>> cells;  // pass, fail, unsupported
    int n = 0;
    for (const Record& r : records) {
      if (r.backend != backend) continue;
      ++n;
      cells[{r.c->op, static_cast<int>(r.c->main_dtype())}][static_cast<int>(r.status)]++;
    }
    os << "backend " << backend << ": " << n << " cases, seed " << seed << "\n";
    // The dtypes of the cases run: a --dtype filter leaves out the others' columns.
    std::vector<DType> dtypes;
    for (DType dt : kAllDTypes)
      for (const Record& r : records)
        if (r.backend == backend && r.c->main_dtype() == dt) {
          dtypes.push_back(dt);
          break;
        }
    os << std::left << std::setw(22) << "op";
    for (DType dt : dtypes) os << std::setw(8) << dtype_name(dt);
    os << "\n";
    for (const std::string& op : ops) {
      os << std::setw(22) << op;
      for (DType dt : dtypes) {
        auto it = cells.find({op, static_cast<int>(dt)});
        std::string cell = ".";
        if (it != cells.end()) {
          auto [pass, fail, unsup] = it->second;
          cell = fail ? "FAIL" + std::to_string(fail) : pass ? std::to_string(pass) : "--";
          if (fail == 0 && pass && unsup) cell += "*";
        }
        os << std::setw(8) << cell;
      }
      os << "\n";
    }
  }
  os << "(cells: cases passed; FAILn: n failed; --: unsupported; *: some unsupported; .: no case run (the op is "
        "not defined for the dtype, or --case left it out))\n";
  int pass = 0, fail = 0, unsup = 0;
  for (const Record& r : records) {
    if (r.status == Status::Fail) {
      ++fail;
      os << "FAIL " << r.backend << " " << r.c->name() << ": " << r.message << "\n";
    } else if (r.status == Status::Pass) {
      ++pass;
    } else {
      ++unsup;
    }
  }
  if (fail) os << "rerun one case: wick parity --seed " << seed << " --case NAME\n";
  os << pass << " passed, " << fail << " failed, " << unsup << " unsupported\n";
}

std::string to_json(const std::vector<Record>& records) {
  auto quote = [](const std::string& s) {
    std::string out = "\"";
    for (char ch : s) {
      if (ch == '"' || ch == '\\') out += '\\';
      if (static_cast<unsigned char>(ch) < 0x20) continue;
      out += ch;
    }
    return out + "\"";
  };
  auto number = [](double v) {
    if (!std::isfinite(v)) return std::string("null");
    std::ostringstream os;
    os << std::setprecision(6) << v;
    return os.str();
  };
  static const char* kStatus[] = {"pass", "fail", "unsupported"};
  std::ostringstream os;
  os << "[\n";
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    os << "  {\"op\": " << quote(r.c->op) << ", \"dtype\": " << quote(r.c->dtype)
       << ", \"shape\": " << quote(r.c->shape) << ", \"layout\": " << quote(r.c->layout)
       << ", \"backend\": " << quote(r.backend) << ", \"status\": \"" << kStatus[static_cast<int>(r.status)]
       << "\", \"nmse\": " << number(r.nmse) << ", \"max_abs\": " << number(r.max_abs)
       << ", \"name\": " << quote(r.c->name());
    if (!r.message.empty()) os << ", \"message\": " << quote(r.message);
    os << "}" << (i + 1 < records.size() ? "," : "") << "\n";
  }
  os << "]\n";
  return os.str();
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  add_copy_cases(cases);
  add_elementwise_cases(cases);
  add_reduce_cases(cases);
  add_index_cases(cases);
  add_nn_cases(cases);
  add_fused_cases(cases);
  add_paged_cases(cases);
  add_quant_cases(cases);
  return cases;
}

}  // namespace wick::parity
