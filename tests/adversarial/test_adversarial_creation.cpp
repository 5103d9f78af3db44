// Hostile cases of the creation functions and the views (see test_adversarial.cpp).
#include <cmath>
#include <limits>

#include "adversarial.h"

namespace wick::adversarial {
namespace {

constexpr DType kF32 = DType::F32, kF64 = DType::F64, kU8 = DType::U8, kI64 = DType::I64;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A view that was accepted is read through when small, so that an out-of-bounds one crashes here.
void read_through(const Tensor& t) {
  if (t.numel() >= 0 && t.numel() <= 64) (void)t.contiguous().to_dtype(kF64).to_vector<double>();
}

template <typename T>
void expect_values(const Tensor& t, const std::vector<T>& want, const std::string& what) {
  const std::vector<T> got = t.to_vector<T>();
  check(got == want, what + ": wrong values");
}

std::vector<Case> creation_cases() {
  return {
      {"zeros_2p61_f64", "zeros", kShapeOrOom, [](Device d) { Tensor::zeros({p2(61)}, kF64, d); }},
      {"zeros_2p60_plus_1_f64", "zeros", kShapeOrOom, [](Device d) { Tensor::zeros({p2(60) + 1}, kF64, d); }},
      {"zeros_int64max_u8", "zeros", kShapeOrOom, [](Device d) { Tensor::zeros({kI64Max}, kU8, d); }},
      {"zeros_int64max_minus_63_u8", "zeros", kShapeOrOom, [](Device d) { Tensor::zeros({kI64Max - 63}, kU8, d); }},
      {"zeros_2p62_u8", "zeros", kShapeOrOom, [](Device d) { Tensor::zeros({p2(62)}, kU8, d); }},
      {"zeros_2p31_2p31_f32", "zeros", kShapeOrOom,
       [](Device d) {
         Tensor::zeros({p2(31), p2(31)}, kF32, d);
       }},
      {"zeros_2p32_2p32", "zeros", kShape,
       [](Device d) {
         Tensor::zeros({p2(32), p2(32)}, kU8, d);
       }},
      {"zeros_int64min", "zeros", kShape, [](Device d) { Tensor::zeros({kI64Min}, kF32, d); }},
      {"zeros_negative_times_negative", "zeros", kShape,
       [](Device d) {
         Tensor::zeros({-2, -3}, kF32, d);
       }},
      {"zeros_empty_with_huge_dims_ok", nullptr, kOk,
       [](Device d) {
         check(Tensor::zeros({0, kI64Max}, kF64, d).numel() == 0, "numel");
       }},
      {"ones_2p61_f64", "ones", kShapeOrOom, [](Device d) { Tensor::ones({p2(61)}, kF64, d); }},
      {"full_2p62_f32", "full", kShapeOrOom, [](Device d) { Tensor::full({p2(62)}, 1.5, kF32, d); }},
      {"scalar_300_into_u8", "scalar", kDType, [](Device d) { Tensor::scalar(300, kU8, d); }},
      {"full_nan_into_int", "full", kDType, [](Device d) { Tensor::full({2}, kNaN, DType::I32, d); }},
      {"full_int64min_into_u32", "full", kDType, [](Device d) { Tensor::full({2}, kI64Min, DType::U32, d); }},
      {"from_data_count_times_size_wraps", "from_vector", kShapeOrOom,
       [](Device d) {
         std::vector<double> four(4, 1.0);  // 2^61 doubles are 2^64 bytes: 0 after a wrap
         read_through(Tensor::from_data(four.data(), p2(61), kF64, {p2(61)}, d));
       }},
      {"from_data_negative_count", "from_vector", kShape,
       [](Device d) {
         float one = 1;
         Tensor::from_data(&one, -1, kF32, {-1}, d);
       }},
      {"from_data_null_empty_ok", nullptr, kOk,
       [](Device d) {
         check(Tensor::from_data(nullptr, 0, kF32, {0, 3}, d).shape() == Shape{0, 3}, "shape");
       }},
      {"arange_count_int64max", "arange", kShapeOrOom, [](Device d) { Tensor::arange(0, kI64Max, 1, kI64, d); }},
      {"arange_end_overload_int64max", "arange", kShapeOrOom, [](Device d) { Tensor::arange(kI64Max, kF32, d); }},
      {"arange_span_wraps", "arange", kShapeOrOom, [](Device d) { Tensor::arange(kI64Min, kI64Max, 1, kI64, d); }},
      {"arange_descending_span_wraps", "arange", kShapeOrOom,
       [](Device d) { Tensor::arange(kI64Max, kI64Min, -1, kI64, d); }},
      {"arange_u8_count_2p58", "arange", kShapeOrOom, [](Device d) { Tensor::arange(0, p2(58), 1, kU8, d); }},
      {"arange_f32_count_1e18", "arange", kShapeOrOom, [](Device d) { Tensor::arange(0.0, 1e18, 1.0, kF32, d); }},
      {"arange_f64_count_inf", "arange", kShapeOrOom, [](Device d) { Tensor::arange(0.0, 1e308, 1e-308, kF64, d); }},
      {"arange_f64_count_past_int64", "arange", kShapeOrOom,
       [](Device d) { Tensor::arange(-1e300, 1e300, 1e280, kF64, d); }},
      {"arange_nan_end", "arange", kShape, [](Device d) { Tensor::arange(0.0, kNaN, 1.0, kF32, d); }},
      {"arange_step_int64min_ok", nullptr, kOk,
       [](Device d) { expect_values<int64_t>(Tensor::arange(0, -5, kI64Min, kI64, d), {0}, "arange(0, -5, min)"); }},
      {"arange_step_int64max_ok", nullptr, kOk,
       [](Device d) { expect_values<int64_t>(Tensor::arange(0, 5, kI64Max, kI64, d), {0}, "arange(0, 5, max)"); }},
      {"arange_two_steps_of_2p62_ok", nullptr, kOk,
       [](Device d) {
         expect_values<int64_t>(Tensor::arange(0, kI64Max, p2(62), kI64, d), {0, p2(62)}, "arange(0, max, 2^62)");
       }},
      {"arange_near_int64max_ok", nullptr, kOk,
       [](Device d) {
         expect_values<int64_t>(Tensor::arange(kI64Max - 2, kI64Max, 1, kI64, d), {kI64Max - 2, kI64Max - 1},
                                "near max");
         expect_values<int64_t>(Tensor::arange(kI64Min + 2, kI64Min, -1, kI64, d), {kI64Min + 2, kI64Min + 1},
                                "near min");
       }},
      {"arange_end_int64min_step_int64max_ok", nullptr, kOk,
       [](Device d) { check(Tensor::arange(0, kI64Min, kI64Max, kI64, d).numel() == 0, "not empty"); }},
      {"eye_3037000499_f64", "eye", kShapeOrOom, [](Device d) { Tensor::eye(3037000499, kF64, d); }},
      {"eye_2p31_f32", "eye", kShapeOrOom, [](Device d) { Tensor::eye(p2(31), kF32, d); }},
      {"eye_2p32", "eye", kShape, [](Device d) { Tensor::eye(p2(32), kU8, d); }},
      {"eye_int64max", "eye", kShape, [](Device d) { Tensor::eye(kI64Max, kU8, d); }},
      {"eye_int64min", "eye", kShape, [](Device d) { Tensor::eye(kI64Min, kF32, d); }},
      {"rand_uniform_2p61_f64", "rand_uniform", kShapeOrOom,
       [](Device d) { Tensor::rand_uniform({p2(61)}, 0.0, 1.0, kF64, d); }},
      {"rand_uniform_2p31_2p31_f32", "rand_uniform", kShapeOrOom,
       [](Device d) {
         Tensor::rand_uniform({p2(31), p2(31)}, 0.0, 1.0, kF32, d);
       }},
      {"rand_normal_2p61_f64", "rand_normal", kShapeOrOom,
       [](Device d) { Tensor::rand_normal({p2(61)}, 0.0, 1.0, kF64, d); }},
      {"rand_uniform_lo_equals_up", "rand_uniform", kAnyError,
       [](Device d) { Tensor::rand_uniform({2}, 1.0, 1.0, kF32, d); }},
      {"rand_uniform_lo_above_up", "rand_uniform", kAnyError,
       [](Device d) { Tensor::rand_uniform({2}, 2.0, 1.0, kF32, d); }},
      {"rand_uniform_lo_minus_inf", "rand_uniform", kAnyError,
       [](Device d) { Tensor::rand_uniform({2}, -kInf, 0.0, kF32, d); }},
      {"rand_uniform_up_inf", "rand_uniform", kAnyError,
       [](Device d) { Tensor::rand_uniform({2}, 0.0, kInf, kF64, d); }},
      {"rand_uniform_lo_nan", "rand_uniform", kAnyError,
       [](Device d) { Tensor::rand_uniform({2}, kNaN, 1.0, kF32, d); }},
      {"rand_uniform_up_nan", "rand_uniform", kAnyError,
       [](Device d) { Tensor::rand_uniform({2}, 0.0, kNaN, kF32, d); }},
      {"rand_uniform_span_overflows_to_inf", "rand_uniform", kOkOrError,
       [](Device d) {
         Tensor t = Tensor::rand_uniform({64}, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max(),
                                         kF64, d);
         for (double v : t.to_vector<double>()) check(std::isfinite(v), "a value is not finite");
       }},
      {"rand_normal_mean_inf", "rand_normal", kAnyError,
       [](Device d) { Tensor::rand_normal({2}, kInf, 1.0, kF32, d); }},
      {"rand_normal_mean_nan", "rand_normal", kAnyError,
       [](Device d) { Tensor::rand_normal({2}, kNaN, 1.0, kF32, d); }},
      {"rand_normal_std_inf", "rand_normal", kAnyError, [](Device d) { Tensor::rand_normal({2}, 0.0, kInf, kF32, d); }},
      {"rand_normal_std_nan", "rand_normal", kAnyError, [](Device d) { Tensor::rand_normal({2}, 0.0, kNaN, kF32, d); }},
      {"rand_normal_std_negative", "rand_normal", kAnyError,
       [](Device d) { Tensor::rand_normal({2}, 0.0, -1.0, kF32, d); }},
      {"rand_normal_std_zero_ok", nullptr, kOk,
       [](Device d) {
         expect_values<float>(Tensor::rand_normal({3}, 2.0, 0.0, kF32, d), {2, 2, 2}, "std 0");
       }},
      {"rand_uniform_like_of_huge_view", nullptr, kShapeOrOom,
       [](Device d) {
         broadcast_zero({p2(31), p2(31)}, kF32, d).rand_uniform_like();
       }},
      {"zeros_like_of_huge_view", nullptr, kShapeOrOom,
       [](Device d) { broadcast_zero({p2(62)}, kF32, d).zeros_like(); }},
      {"full_like_of_huge_view", nullptr, kShapeOrOom,
       [](Device d) { broadcast_zero({p2(61)}, kF64, d).full_like(3); }},
  };
}

std::vector<Case> view_cases() {
  return {
      {"narrow_start_plus_len_wraps", "narrow", kIndex,
       [](Device d) { Tensor::zeros({5}, kF32, d).narrow(0, kI64Max, 2); }},
      {"narrow_len_int64max", "narrow", kIndex, [](Device d) { Tensor::zeros({5}, kF32, d).narrow(0, 1, kI64Max); }},
      {"narrow_start_int64min", "narrow", kIndex,
       [](Device d) { read_through(Tensor::zeros({5}, kF32, d).narrow(0, kI64Min, 1)); }},
      {"narrow_len_int64min", "narrow", kIndex, [](Device d) { Tensor::zeros({5}, kF32, d).narrow(0, 1, kI64Min); }},
      {"narrow_dim_int64min", "narrow", kShape, [](Device d) { Tensor::zeros({5}, kF32, d).narrow(kI64Min, 0, 1); }},
      {"narrow_huge_dim_one_past_end", "narrow", kIndex,
       [](Device d) { broadcast_zero({kI64Max}, kF32, d).narrow(0, kI64Max - 1, 2); }},
      {"narrow_huge_dim_last_ok", nullptr, kOk,
       [](Device d) { read_through(broadcast_zero({kI64Max}, kF32, d).narrow(0, kI64Max - 1, 1)); }},
      {"slice_step_int64max_ok", nullptr, kOk,
       [](Device d) {
         expect_values<float>(Tensor::arange(0, 5, 1, kF32, d).slice(0, 0, 5, kI64Max), {0}, "slice step max");
       }},
      {"slice_step_int64max_on_transposed_ok", nullptr, kOk,
       [](Device d) {
         Tensor x = Tensor::arange(0, 6, 1, kF32, d).reshape({2, 3}).t();
         expect_values<float>(x.slice(0, 1, 3, kI64Max), {1, 4}, "slice of a transposed view");
       }},
      {"slice_bounds_int64_ok", nullptr, kOk,
       [](Device d) {
         Tensor x = Tensor::arange(0, 5, 1, kF32, d);
         check(x.slice(0, kI64Min, kI64Max).numel() == 5, "slice(min, max) is not whole");
         check(x.slice(0, kI64Max, kI64Min).numel() == 0, "slice(max, min) is not empty");
         check(x.slice(0, -kI64Max, 2).numel() == 2, "slice(-max, 2)");
       }},
      {"slice_step_zero", "slice", kShape, [](Device d) { Tensor::zeros({5}, kF32, d).slice(0, 0, 5, 0); }},
      {"slice_step_int64min", "slice", kShape, [](Device d) { Tensor::zeros({5}, kF32, d).slice(0, 0, 5, kI64Min); }},
      {"slice_step2_of_int64max_dim_ok", nullptr, kOk,
       [](Device d) {
         Tensor s = broadcast_zero({kI64Max}, kF32, d).slice(0, 0, kI64Max, 2);
         check(s.shape() == Shape{p2(62)}, "shape " + s.shape().to_string());
       }},
      {"slice_near_end_of_int64max_dim_ok", nullptr, kOk,
       [](Device d) {
         check(broadcast_zero({kI64Max}, kF32, d).slice(0, kI64Max - 3, kI64Max, 2).numel() == 2, "numel");
       }},
      {"select_int64min", "select", kIndex, [](Device d) { Tensor::zeros({5}, kF32, d).select(0, kI64Min); }},
      {"select_int64max", "select", kIndex, [](Device d) { Tensor::zeros({5}, kF32, d).select(0, kI64Max); }},
      {"get_int64min", "select", kIndex, [](Device d) { Tensor::zeros({5}, kF32, d).get(kI64Min); }},
      {"select_huge_dim_last_ok", nullptr, kOk,
       [](Device d) { read_through(broadcast_zero({kI64Max}, kF32, d).select(0, -1)); }},
      {"dim_int64min", "dim", kShape, [](Device d) { (void)Tensor::zeros({5}, kF32, d).dim(kI64Min); }},
      {"transpose_dim_int64min", "transpose", kShape,
       [](Device d) {
         Tensor::zeros({2, 3}, kF32, d).transpose(kI64Min, 0);
       }},
      {"transpose_dim_int64max", "transpose", kShape,
       [](Device d) {
         Tensor::zeros({2, 3}, kF32, d).transpose(0, kI64Max);
       }},
      {"t_of_rank1", "t", kShape, [](Device d) { Tensor::zeros({5}, kF32, d).t(); }},
      {"permute_dim_int64max", "permute", kShape,
       [](Device d) {
         Tensor::zeros({2, 3}, kF32, d).permute({kI64Max, 0});
       }},
      {"permute_repeated_dim", "permute", kShape,
       [](Device d) {
         Tensor::zeros({2, 3}, kF32, d).permute({1, -1});
       }},
      {"permute_nine_dims", "permute", kShape,
       [](Device d) {
         std::vector<int64_t> dims(9, 0);
         Tensor::zeros({2, 3}, kF32, d).permute(dims);
       }},
      {"squeeze_dim_int64min", "squeeze", kShape,
       [](Device d) {
         Tensor::zeros({1, 3}, kF32, d).squeeze(kI64Min);
       }},
      {"unsqueeze_dim_int64max", "unsqueeze", kShape,
       [](Device d) {
         Tensor::zeros({1, 3}, kF32, d).unsqueeze(kI64Max);
       }},
      {"unsqueeze_rank8", "unsqueeze", kShape,
       [](Device d) {
         Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 1}, kF32, d).unsqueeze(0);
       }},
      {"broadcast_as_2p40_2p40", "broadcast_as", kShape,
       [](Device d) {
         Tensor::zeros({1}, kF32, d).broadcast_as({p2(40), p2(40)});
       }},
      {"broadcast_as_2p62_4", "broadcast_as", kShape,
       [](Device d) {
         Tensor::zeros({1}, kF32, d).broadcast_as({p2(62), 4});
       }},
      {"broadcast_as_int64max_2", "broadcast_as", kShape,
       [](Device d) {
         Tensor::zeros({1}, kF32, d).broadcast_as({kI64Max, 2});
       }},
      {"broadcast_as_three_2p22", "broadcast_as", kShape,
       [](Device d) {
         Tensor::zeros({1}, kF32, d).broadcast_as({p2(22), p2(21), p2(21)});
       }},
      {"broadcast_as_int64max_ok", nullptr, kOk,
       [](Device d) { check(Tensor::zeros({1}, kF32, d).broadcast_as({kI64Max}).numel() == kI64Max, "numel"); }},
      {"expand_negative", "broadcast_as", kShape, [](Device d) { Tensor::zeros({1}, kF32, d).expand({-1}); }},
      {"expand_int64min", "broadcast_as", kShape,
       [](Device d) {
         Tensor::zeros({1}, kF32, d).expand({kI64Min, 1});
       }},
      {"reshape_empty_to_2p32_2p32", "reshape", kShape,
       [](Device d) {
         Tensor::zeros({0}, kF32, d).reshape({p2(32), p2(32)});
       }},
      {"reshape_numel_wraps_to_equal", "reshape", kShape,
       [](Device d) {
         read_through(Tensor::zeros({4}, kF32, d).reshape({p2(62) + 1, 4}));
       }},
      {"reshape_transposed_numel_wraps_to_equal", "reshape", kShape,
       [](Device d) {
         read_through(Tensor::zeros({2, 2}, kF32, d).t().reshape({p2(62) + 1, 4}));
       }},
      {"reshape_infer_with_overflowing_known", "reshape", kShape,
       [](Device d) {
         Tensor::zeros({0}, kF32, d).reshape({p2(32), p2(32), -1});
       }},
      {"reshape_infer_known_wraps_to_divisor", "reshape", kShape,
       [](Device d) {
         read_through(Tensor::zeros({4}, kF32, d).reshape({p2(62) + 1, 4, -1}));
       }},
      {"reshape_int64min", "reshape", kShape,
       [](Device d) {
         Tensor::zeros({4}, kF32, d).reshape({kI64Min, -1});
       }},
      {"reshape_empty_ok", nullptr, kOk,
       [](Device d) {
         check(Tensor::zeros({0}, kF32, d).reshape({3, 0, 5}).shape() == Shape{3, 0, 5}, "shape");
       }},
      {"flatten_of_empty_with_huge_dims", nullptr, kShape,
       [](Device d) {
         Tensor::zeros({0}, kF32, d).reshape({0, p2(40), p2(40)}).flatten(1, 2);
       }},
      {"flatten_dims_int64", "flatten", kShape,
       [](Device d) {
         Tensor::zeros({2, 3}, kF32, d).flatten(kI64Min, kI64Max);
       }},
      {"flatten_of_huge_broadcast", nullptr, kShape,
       [](Device d) {
         broadcast_zero({p2(32), p2(31), 2}, kU8, d).flatten();
       }},
      {"chunk_int64max_ok", nullptr, kOk,
       [](Device d) {
         std::vector<Tensor> pieces = Tensor::zeros({5}, kF32, d).chunk(kI64Max);
         check(pieces.size() == 5, std::to_string(pieces.size()) + " pieces");
       }},
      {"chunk_of_int64max_dim_ok", nullptr, kOk,
       [](Device d) {
         std::vector<Tensor> pieces = broadcast_zero({kI64Max}, kF32, d).chunk(2);
         check(pieces.size() == 2 && pieces[0].numel() == p2(62) && pieces[1].numel() == p2(62) - 1, "pieces");
       }},
      {"chunk_negative", "chunk", kShape, [](Device d) { Tensor::zeros({5}, kF32, d).chunk(kI64Min); }},
      {"split_size_2p62_of_int64max_dim_ok", nullptr, kOk,
       [](Device d) {
         std::vector<Tensor> pieces = broadcast_zero({kI64Max}, kF32, d).split(p2(62));
         check(pieces.size() == 2 && pieces[1].numel() == p2(62) - 1, std::to_string(pieces.size()) + " pieces");
       }},
      {"split_size_int64max_ok", nullptr, kOk,
       [](Device d) { check(Tensor::zeros({5}, kF32, d).split(kI64Max).size() == 1, "pieces"); }},
      {"split_size_int64min", "split", kShape, [](Device d) { Tensor::zeros({5}, kF32, d).split(kI64Min); }},
      {"split_sizes_total_wraps_to_dim", "split", kShape,
       [](Device d) {
         std::vector<int64_t> sizes = {kI64Max, kI64Max, 3};  // 2^64 + 1: 1 after a wrap
         Tensor::zeros({1}, kF32, d).split(sizes);
       }},
      {"split_sizes_four_2p62_wrap_to_dim", "split", kShape,
       [](Device d) {
         std::vector<int64_t> sizes = {p2(62), p2(62), p2(62), p2(62) + 4};
         broadcast_zero({4}, kF32, d).split(sizes);
       }},
      {"split_sizes_int64min", "split", kShape,
       [](Device d) {
         std::vector<int64_t> sizes = {kI64Min, 5};
         Tensor::zeros({5}, kF32, d).split(sizes);
       }},
      {"split_sizes_dim_int64min", "split", kShape,
       [](Device d) {
         std::vector<int64_t> sizes = {5};
         Tensor::zeros({5}, kF32, d).split(sizes, kI64Min);
       }},
  };
}

}  // namespace

std::vector<Case> creation_view_cases() {
  std::vector<Case> out = creation_cases();
  std::vector<Case> more = view_cases();
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

}  // namespace wick::adversarial
