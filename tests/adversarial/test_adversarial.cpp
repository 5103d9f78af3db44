// Hostile numbers against every public function: each case of the tables (this file and the
// other test_adversarial_*.cpp) runs in a child process, so a crash, a std::terminate, a sanitizer
// report or a hang (SIGALRM) is a failure of that case alone and one run lists every failing case.
// A case passes when the call ends as the case expects: a result (checked where it matters) or a
// wick::Error of the expected class whose message starts with the op's name.
// WICK_ADVERSARIAL_IN_PROCESS=1 runs the cases without a child (for a debugger).
#include <cstdlib>
#include <cstring>
#include <set>

#include "adversarial.h"
#include "test_util.h"

namespace wick::adversarial {
namespace {

constexpr int kCaseSeconds = 10;  // a correct case takes milliseconds, under ASan too

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> out;
    for (auto* part : {&shape_layout_cases, &creation_view_cases, &op_cases, &write_join_nn_cases}) {
      std::vector<Case> more = part();
      out.insert(out.end(), more.begin(), more.end());
    }
    return out;
  }();
  return cases;
}

struct Param {
  const Case* c;
  Device device;
};

// How gtest and ctest show a case: by name, not as the bytes of a pointer.
void PrintTo(const Param& p, std::ostream* os) { *os << p.c->name << " on " << p.device; }

std::vector<Param> params() {
  std::vector<Param> out;
  for (Device d : test::devices())
    for (const Case& c : all_cases()) out.push_back({&c, d});
  return out;
}

[[noreturn]] void run_in_child(const Case& c, Device device) {
  limit_process(kCaseSeconds, c.name);
  set_activity(c.name + " on " + device.to_string());
  install_crash_report();
  const std::string why = judge(c, device);
  if (!why.empty()) std::fprintf(stderr, "%s on %s: %s\n", c.name.c_str(), device.to_string().c_str(), why.c_str());
  std::fflush(stderr);
  std::_Exit(why.empty() ? 0 : 1);
}

class Hostile : public ::testing::TestWithParam<Param> {};

TEST_P(Hostile, Input) {
  const Case& c = *GetParam().c;
  const Device device = GetParam().device;
  if (const char* v = std::getenv("WICK_ADVERSARIAL_IN_PROCESS"); v && std::strcmp(v, "0") != 0) {
    EXPECT_EQ(judge(c, device), "") << c.name;
    return;
  }
  // "threadsafe" re-executes the binary for the child: forking a process with OpenMP threads is not.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_in_child(c, device), ::testing::ExitedWithCode(0), "") << c.name << " on " << device;
}

INSTANTIATE_TEST_SUITE_P(Cases, Hostile, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string d = info.param.device.to_string();
                           for (char& ch : d)
                             if (ch == ':') ch = '_';
                           return info.param.c->name + "_" + d;
                         });

TEST(HostileTable, NamesAreUniqueIdentifiers) {
  std::set<std::string> seen;
  for (const Case& c : all_cases()) {
    EXPECT_TRUE(seen.insert(c.name).second) << "duplicate case " << c.name;
    EXPECT_EQ(c.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string::npos) << c.name;
    EXPECT_NE(c.expect, 0u) << c.name;
  }
  EXPECT_GT(all_cases().size(), 200u);
}

TEST(HostileTable, HelperSeesEveryOutcome) {
  EXPECT_EQ(expect_ok_or_wick_error([] { Tensor::zeros({2}).narrow(0, 1, 1); }).kind, kOk);
  EXPECT_EQ(expect_ok_or_wick_error([] { Tensor::zeros({2}).narrow(0, 1, 5); }).kind, kIndex);
  EXPECT_EQ(run_call([] {}).kind, kOk);
  EXPECT_EQ(run_call([] { Tensor::zeros({2}).narrow(0, 1, 5); }).kind, kIndex);
  EXPECT_NE(run_call([] { throw std::bad_alloc(); }).broken, "");
  EXPECT_NE(run_call([] { throw ShapeError("no op name here"); }).broken, "");
  EXPECT_TRUE(message_names_op("conv_transpose2d: x"));
  EXPECT_TRUE(message_names_op("narrow: x", "narrow"));
  EXPECT_FALSE(message_names_op("narrow: x", "split"));
  EXPECT_FALSE(message_names_op("Narrow: x"));
}

// ---- shape.h ------------------------------------------------------------------------------------

std::vector<Case> shape_cases() {
  return {
      {"dims_rank9", "shape", kShape, [](Device) { Shape s{1, 1, 1, 1, 1, 1, 1, 1, 1}; }},
      {"dims_rank100", "shape", kShape, [](Device) { Shape s(std::vector<int64_t>(100, 1)); }},
      {"dims_insert_past_max_rank", "shape", kShape,
       [](Device) {
         Shape s{1, 1, 1, 1, 1, 1, 1, 1};
         s.insert(0, 2);
       }},
      {"dims_numel_2p32_2p32", nullptr, kShape,
       [](Device) {
         (void)Shape{p2(32), p2(32)}.numel();
       }},
      {"dims_numel_2p21_2p21_2p22", nullptr, kShape,
       [](Device) {
         (void)Shape{p2(21), p2(21), p2(22)}.numel();
       }},
      {"dims_numel_int64max_x2", nullptr, kShape,
       [](Device) {
         (void)Shape{kI64Max, 2}.numel();
       }},
      {"dims_numel_minus1_int64min", nullptr, kOkOrError,
       [](Device) {
         (void)Shape{-1, kI64Min}.numel();
       }},
      // Refused although empty: the strides of such a shape would not fit (docs/numerics.md).
      {"dims_numel_empty_with_huge", "numel", kShape, [](Device) { (void)Shape{0, kI64Max, kI64Max}.numel(); }},
      {"contiguous_strides_2p32_2p32_2", nullptr, kShape,
       [](Device) {
         contiguous_strides({p2(32), p2(32), 2});
       }},
      {"contiguous_strides_empty_huge", nullptr, kOkOrError,
       [](Device) {
         contiguous_strides({0, p2(40), p2(40)});
       }},
      {"contiguous_strides_int64max_ok", nullptr, kOk,
       [](Device) { check(contiguous_strides({kI64Max}) == Strides{1}, "strides of [max] are not [1]"); }},
      {"broadcast_shapes_incompatible", "myop", kShape,
       [](Device) {
         broadcast_shapes({2, 3}, {4}, "myop");
       }},
      {"broadcast_shapes_negative", "myop", kShape, [](Device) { broadcast_shapes({-1}, {1}, "myop"); }},
      {"broadcast_shapes_int64min", "myop", kShape,
       [](Device) {
         broadcast_shapes({kI64Min, 1}, {1, 3}, "myop");
       }},
      {"broadcast_shapes_numel_overflow", "myop", kOkOrError,
       [](Device) {
         broadcast_shapes({p2(40), 1}, {1, p2(40)}, "myop");
       }},
      {"normalize_dim_int64min_negative_rank", "myop", kShape, [](Device) { normalize_dim(kI64Min, -1, "myop"); }},
      {"normalize_dim_int64min_rank_int_min", "myop", kShape,
       [](Device) { normalize_dim(kI64Min, std::numeric_limits<int>::min(), "myop"); }},
      {"normalize_dim_int64max", "myop", kShape, [](Device) { normalize_dim(kI64Max, 3, "myop"); }},
      {"normalize_dim_int64min", "myop", kShape, [](Device) { normalize_dim(kI64Min, 3, "myop"); }},
      {"normalize_dim_rank0", "myop", kShape, [](Device) { normalize_dim(0, 0, "myop"); }},
      {"normalize_dim_ok", nullptr, kOk, [](Device) { check(normalize_dim(-1, 3, "myop") == 2, "-1 of 3 is not 2"); }},
  };
}

// ---- layout.h -----------------------------------------------------------------------------------

std::vector<Case> layout_cases() {
  return {
      {"layout_rank_mismatch", "layout", kShape,
       [](Device) {
         Layout({2, 3}, {1}, 0);
       }},
      {"layout_negative_stride", "layout", kShape, [](Device) { Layout({2}, {-1}, 0); }},
      {"layout_int64min_stride", "layout", kShape, [](Device) { Layout({2}, {kI64Min}, 0); }},
      {"layout_negative_offset", "layout", kShape, [](Device) { Layout({2}, {1}, -1); }},
      {"layout_dense_negative_size", "layout", kShape, [](Device) { Layout(Shape{-3}); }},
      {"layout_dense_negative_offset", "layout", kShape, [](Device) { Layout(Shape{2}, -5); }},
      {"layout_dense_numel_overflow", "layout", kShape,
       [](Device) {
         Layout(Shape{p2(32), p2(32)});
       }},
      {"layout_extent_overflow_stride", "layout", kShape, [](Device) { Layout({3}, {p2(62)}, 0); }},
      {"layout_extent_overflow_offset", "layout", kShape, [](Device) { Layout({2}, {1}, kI64Max); }},
      {"layout_extent_overflow_two_dims", "layout", kShape,
       [](Device) {
         Layout({2, 2}, {p2(62), p2(62)}, 0);
       }},
      {"layout_extent_overflow_size", "layout", kShape,
       [](Device) {
         Layout({kI64Max, 2}, {2, 1}, 0);
       }},
      {"layout_extent_at_int64max_ok", nullptr, kOk,
       [](Device) { check(Layout({2}, {p2(62)}, p2(62) - 2).extent() == kI64Max, "extent is not 2^63 - 1"); }},
      {"layout_empty_huge_stride_ok", nullptr, kOk,
       [](Device) {
         check(Layout({0, 5}, {kI64Max, kI64Max}, 7).extent() == 7, "extent of an empty layout");
       }},
      {"layout_narrow_start_plus_len_wraps", "narrow", kIndex, [](Device) { Layout(Shape{5}).narrow(0, kI64Max, 2); }},
      {"layout_narrow_len_int64max", "narrow", kIndex, [](Device) { Layout(Shape{5}).narrow(0, 1, kI64Max); }},
      {"layout_narrow_start_int64min", "narrow", kIndex, [](Device) { Layout(Shape{5}).narrow(0, kI64Min, 1); }},
      {"layout_narrow_dim_int64min", "narrow", kShape, [](Device) { Layout(Shape{5}).narrow(kI64Min, 0, 1); }},
      {"layout_slice_step_int64max", nullptr, kOk,
       [](Device) {
         Layout l = Layout({5}, {3}, 0).slice(0, 0, 5, kI64Max);
         check(l.shape() == Shape{1} && l.offset() == 0, "slice(0, 0, 5, max) of [5] is " + l.to_string());
       }},
      {"layout_slice_step_zero", "slice", kShape, [](Device) { Layout(Shape{5}).slice(0, 0, 5, 0); }},
      {"layout_slice_step_int64min", "slice", kShape, [](Device) { Layout(Shape{5}).slice(0, 0, 5, kI64Min); }},
      {"layout_slice_bounds_int64", nullptr, kOk,
       [](Device) {
         check(Layout(Shape{5}).slice(0, kI64Min, kI64Max, 1).shape() == Shape{5}, "slice(min, max) is not whole");
         check(Layout(Shape{5}).slice(0, kI64Max, kI64Min, 1).shape() == Shape{0}, "slice(max, min) is not empty");
       }},
      {"layout_slice_step2_of_int64max_dim", nullptr, kOk,
       [](Device) {
         Layout l = Layout({kI64Max}, {0}, 0).slice(0, 0, kI64Max, 2);
         check(l.shape() == Shape{p2(62)}, "slice step 2 of [2^63 - 1] is " + l.to_string());
       }},
      {"layout_transpose_dim_int64min", "transpose", kShape,
       [](Device) {
         Layout(Shape{2, 3}).transpose(kI64Min, 0);
       }},
      {"layout_permute_dim_int64max", "permute", kShape,
       [](Device) {
         const int64_t dims[] = {kI64Max, 0};
         Layout(Shape{2, 3}).permute(dims);
       }},
      {"layout_unsqueeze_stride_overflow", nullptr, kOkOrError, [](Device) { Layout({2}, {p2(62)}, 0).unsqueeze(0); }},
      {"layout_broadcast_2p40_2p40", "broadcast_as", kShape,
       [](Device) {
         Layout(Shape{1}).broadcast_as({p2(40), p2(40)});
       }},
      {"layout_broadcast_negative", nullptr, kShape, [](Device) { Layout(Shape{1}).broadcast_as({-1}); }},
      {"layout_reshape_empty_to_2p32_2p32", "reshape", kShape,
       [](Device) {
         (void)Layout(Shape{0}).reshape({p2(32), p2(32)});
       }},
      {"layout_reshape_numel_wraps_to_equal", "reshape", kShape,
       [](Device) {
         (void)Layout(Shape{4}).reshape({p2(62) + 1, 4});
       }},
      {"layout_reshape_strided_numel_wraps", "reshape", kShape,
       [](Device) {
         (void)Layout({2, 2}, {1, 2}, 0).reshape({p2(62) + 1, 4});
       }},
  };
}

// ---- device.h, dtype.h ----------------------------------------------------------------------------

constexpr DType kInvalidDType = static_cast<DType>(kNumDTypes);  // one past the last dtype

std::vector<Case> device_dtype_cases() {
  std::vector<Case> out;
  const std::pair<const char*, std::string> rejected[] = {
      {"huge", "cuda:huge"},
      {"11_digits", "cuda:99999999999"},
      {"int_max_plus_1", "cuda:2147483648"},
      {"2p32", "rocm:4294967296"},
      {"minus_1", "cuda:-1"},
      {"empty_index", "cuda:"},
      {"trailing_x", "cuda:1x"},
      {"upper_case", "CPU"},
      {"empty", ""},
      {"plus_sign", "cuda:+1"},
      {"leading_space", " cuda:0"},
      {"nul_inside", std::string("cuda:0\0"
                                 "1",
                                 8)},
      {"colon_only", ":"},
      {"two_colons", "cuda:0:1"},
  };
  for (const auto& [label, text] : rejected) {
    out.push_back({std::string("device_parse_rejects_") + label, nullptr, kOk, [text = text](Device) {
                     Device d = Device::cpu();
                     check(!Device::parse(text, &d), "Device::parse(\"" + text + "\") accepted it as " + d.to_string());
                   }});
  }
  out.push_back({"device_parse_max_index_ok", nullptr, kOk, [](Device) {
                   Device d;
                   check(Device::parse("cuda:1023", &d) && d == Device::cuda(1023), "cuda:1023");
                   check(!Device::parse("cuda:1024", &d) && !Device::parse("cuda:2147483647", &d), "cuda:1024");
                   check(Device::parse("rocm", &d) && d == Device::rocm(0), "rocm alone is rocm:0");
                 }});
  // The header: "Parses what to_string prints".
  out.push_back({"device_parse_round_trips_to_string", nullptr, kOk, [](Device) {
                   for (Device d : {Device::cpu(), Device(DeviceType::Cpu, 1), Device::cuda(7), Device::rocm(0)}) {
                     Device back = Device::rocm(5);
                     check(Device::parse(d.to_string(), &back) && back == d, "parse(\"" + d.to_string() + "\")");
                   }
                 }});
  const std::pair<const char*, Device> bad_devices[] = {
      {"cpu_minus_1", Device(DeviceType::Cpu, -1)},
      {"cpu_int_min", Device(DeviceType::Cpu, std::numeric_limits<int>::min())},
      {"cuda_int_min", Device(DeviceType::Cuda, std::numeric_limits<int>::min())},
      {"rocm_int_max", Device(DeviceType::Rocm, std::numeric_limits<int>::max())},
      {"type_7", Device(static_cast<DeviceType>(7), 0)},
  };
  for (const auto& [label, bad] : bad_devices) {
    out.push_back({std::string("device_zeros_on_") + label, "zeros", kDevice,
                   [bad = bad](Device) { Tensor::zeros({2}, DType::F32, bad); }});
    out.push_back({std::string("device_manual_seed_on_") + label, "manual_seed", kDevice,
                   [bad = bad](Device) { manual_seed(1, bad); }});
    out.push_back({std::string("device_to_device_") + label, "to_device", kDevice,
                   [bad = bad](Device d) { Tensor::zeros({2}, DType::F32, d).to_device(bad); }});
    out.push_back({std::string("device_synchronize_") + label, "synchronize", kDevice,
                   [bad = bad](Device) { synchronize(bad); }});
    if (!bad.is_cpu())  // describe_device describes the CPU whatever its index
      out.push_back({std::string("device_describe_") + label, "describe_device", kDevice,
                     [bad = bad](Device) { describe_device(bad); }});
  }
  out.push_back({"dtype_parse_rejects_lookalikes", nullptr, kOk, [](Device) {
                   DType dt = DType::U8;
                   for (std::string_view s :
                        {std::string_view("F32"), std::string_view(""), std::string_view("f32 "),
                         std::string_view("f32\0", 4), std::string_view("f"), std::string_view("f8e4m3fn")})
                     check(!parse_dtype(s, &dt), "parse_dtype accepted \"" + std::string(s) + "\"");
                   check(parse_dtype("f8e4m3", &dt) && dt == DType::F8E4M3, "f8e4m3");
                 }});
  out.push_back({"dtype_invalid_zeros", "zeros", kAnyError, [](Device d) { Tensor::zeros({2}, kInvalidDType, d); }});
  out.push_back({"dtype_invalid_to_dtype", "to_dtype", kAnyError,
                 [](Device d) { Tensor::zeros({2}, DType::F32, d).to_dtype(kInvalidDType).contiguous(); }});
  out.push_back({"dtype_invalid_tensor_ctor", "tensor", kAnyError, [](Device d) {
                   Tensor real = Tensor::zeros({4}, DType::F32, d);
                   Tensor(real.storage(), Layout(Shape{4}), kInvalidDType).copy();
                 }});
  return out;
}

// ---- Tensor(storage, layout, dtype) ---------------------------------------------------------------

// A view the constructor accepted is read through, so that an out-of-bounds one crashes here.
void read_through(const Tensor& t) {
  if (t.numel() <= 64) (void)t.contiguous().to_dtype(DType::F64).to_vector<double>();
}

std::vector<Case> tensor_ctor_cases() {
  return {
      {"tensor_ctor_offset_bytes_wrap_f32", "tensor", kShape,
       [](Device d) {
         Tensor real = Tensor::zeros({4}, DType::F32, d);  // 16 bytes; 4 * (2^62 + 1) wraps to 4
         read_through(Tensor(real.storage(), Layout({1}, {1}, p2(62)), DType::F32));
       }},
      {"tensor_ctor_stride_bytes_wrap_f64", "tensor", kShape,
       [](Device d) {
         Tensor real = Tensor::zeros({4}, DType::F64, d);  // 32 bytes; 8 * (2^61 + 1) wraps to 8
         read_through(Tensor(real.storage(), Layout({2}, {p2(61)}, 0), DType::F64));
       }},
      {"tensor_ctor_offset_and_stride_wrap_i16", "layout", kShape,
       [](Device d) {
         Tensor real = Tensor::zeros({8}, DType::I16, d);  // 2 * (2^62 + 2^62 + 1) wraps to 2
         read_through(Tensor(real.storage(), Layout({2}, {p2(62)}, p2(62) - 1), DType::I16));
       }},
      {"tensor_ctor_extent_overflow", nullptr, kShape,
       [](Device d) {
         Tensor real = Tensor::zeros({4}, DType::U8, d);
         read_through(Tensor(real.storage(), Layout({3}, {p2(62)}, 0), DType::U8));
       }},
      {"tensor_ctor_huge_dense_shape", nullptr, kShape,
       [](Device d) {
         Tensor real = Tensor::zeros({4}, DType::U8, d);
         read_through(Tensor(real.storage(), Layout(Shape{p2(62) + 1, 4}), DType::U8));
       }},
      {"tensor_ctor_past_end", "tensor", kShape,
       [](Device d) {
         Tensor real = Tensor::zeros({4}, DType::F32, d);
         read_through(Tensor(real.storage(), Layout({2}, {1}, 3), DType::F32));
       }},
      {"tensor_ctor_wider_dtype_past_end", "tensor", kShape,
       [](Device d) {
         Tensor real = Tensor::zeros({4}, DType::U8, d);
         read_through(Tensor(real.storage(), Layout(Shape{2}), DType::F32));
       }},
      {"tensor_ctor_aliasing_view_reads_ok", nullptr, kOk,
       [](Device d) {
         Tensor real = Tensor::arange(0, 5, 1, DType::F32, d);
         Tensor v(real.storage(), Layout({3, 3}, {1, 1}, 0), DType::F32);  // reading an overlap is fine
         check(v.contiguous().to_vector<float>() == std::vector<float>{0, 1, 2, 1, 2, 3, 2, 3, 4}, "values");
       }},
      {"tensor_ctor_broadcast_of_last_element_ok", nullptr, kOk,
       [](Device d) {
         Tensor real = Tensor::arange(0, 4, 1, DType::I64, d);
         Tensor v(real.storage(), Layout({kI64Max}, {0}, 3), DType::I64);
         check(v.narrow(0, kI64Max - 2, 2).contiguous().to_vector<int64_t>() == std::vector<int64_t>{3, 3}, "values");
       }},
  };
}

}  // namespace

std::vector<Case> shape_layout_cases() {
  std::vector<Case> out = shape_cases();
  for (auto* part : {&layout_cases, &device_dtype_cases, &tensor_ctor_cases}) {
    std::vector<Case> more = part();
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

}  // namespace wick::adversarial
