// Hostile cases of the elementwise ops, casts and reads, reductions and index ops (see
// test_adversarial.cpp). Huge operands are broadcast views of one element: they cost no memory,
// and an op whose output would not fit must refuse before it allocates or loops.
#include "adversarial.h"

namespace wick::adversarial {
namespace {

constexpr DType kF32 = DType::F32, kF64 = DType::F64, kU8 = DType::U8, kU32 = DType::U32, kI64 = DType::I64;

Tensor bz(const Shape& s, DType dt, Device d) { return broadcast_zero(s, dt, d); }
Tensor iota32(Device d) { return Tensor::arange(0, 6, 1, kF32, d).reshape({3, 2}); }

std::vector<Case> elementwise_cases() {
  return {
      {"exp_of_2p31_2p31_broadcast", "exp", kShapeOrOom,
       [](Device d) {
         bz({p2(31), p2(31)}, kF32, d).exp();
       }},
      {"neg_of_2p62_i32_broadcast", "neg", kShapeOrOom, [](Device d) { bz({p2(62)}, DType::I32, d).neg(); }},
      {"sqrt_of_2p61_f64_broadcast", "sqrt", kShapeOrOom, [](Device d) { bz({p2(61)}, kF64, d).sqrt(); }},
      {"add_of_broadcasts_2p31_2p31", "add", kShapeOrOom,
       [](Device d) {
         bz({p2(31), 1}, kF32, d).add(bz({1, p2(31)}, kF32, d));
       }},
      {"add_numel_overflow_2p40_2p40", "add", kShape,
       [](Device d) {
         bz({p2(40), 1}, kF32, d).add(bz({1, p2(40)}, kF32, d));
       }},
      {"mul_scalar_of_2p61_f64", "mul", kShapeOrOom, [](Device d) { bz({p2(61)}, kF64, d) * 2; }},
      {"scalar_minus_2p61_f64", "sub", kShapeOrOom, [](Device d) { 2 - bz({p2(61)}, kF64, d); }},
      {"maximum_numel_overflow", "maximum", kShape,
       [](Device d) {
         bz({p2(32), 1, 2}, kU8, d).maximum(bz({p2(32), 1}, kU8, d));
       }},
      {"eq_of_2p62_broadcast", "eq", kShapeOrOom, [](Device d) { bz({p2(62)}, kF32, d).eq(0); }},
      {"lt_numel_overflow", "lt", kShape,
       [](Device d) {
         bz({p2(40), 1}, kF32, d).lt(bz({1, p2(40)}, kF32, d));
       }},
      {"where_of_2p61_f64", "where_cond", kShapeOrOom,
       [](Device d) { where_cond(bz({p2(61)}, kU8, d), bz({p2(61)}, kF64, d), bz({p2(61)}, kF64, d)); }},
      {"where_numel_overflow", "where_cond", kShape,
       [](Device d) {
         where_cond(bz({p2(40), 1}, kU8, d), bz({1, p2(40)}, kF32, d), bz({1}, kF32, d));
       }},
      {"affine_of_2p61_f64", "affine", kShapeOrOom, [](Device d) { bz({p2(61)}, kF64, d).affine(2, 1); }},
      {"powf_of_2p61_f64", "powf", kShapeOrOom, [](Device d) { bz({p2(61)}, kF64, d).powf(2); }},
      {"elu_of_2p61_f64", "elu", kShapeOrOom, [](Device d) { bz({p2(61)}, kF64, d).elu(1); }},
      {"clamp_of_2p61_f64", nullptr, kShapeOrOom, [](Device d) { bz({p2(61)}, kF64, d).clamp(0, 1); }},
      {"to_dtype_of_2p62_u8_to_f64", "to_dtype", kShapeOrOom, [](Device d) { bz({p2(62)}, kU8, d).to_dtype(kF64); }},
      {"contiguous_of_2p62_f32", nullptr, kShapeOrOom, [](Device d) { bz({p2(62)}, kF32, d).contiguous(); }},
      {"copy_of_2p61_f64", "copy", kShapeOrOom, [](Device d) { bz({p2(61)}, kF64, d).copy(); }},
      {"to_vector_of_2p62_u8", "to_vector", kShapeOrOom, [](Device d) { bz({p2(62)}, kU8, d).to_vector<uint8_t>(); }},
      {"to_vector_of_2p61_f64", "to_vector", kShapeOrOom, [](Device d) { bz({p2(61)}, kF64, d).to_vector<double>(); }},
      {"to_device_of_2p62_u8", "to_device", kShapeOrOom,
       [](Device d) { bz({p2(62)}, kU8, d).to_device(reference_device()); }},
      {"item_of_broadcast_ok", nullptr, kOk,
       [](Device d) {
         check(bz({1, 1}, kF32, d).item<float>() == 0, "item");
       }},
      {"u8_plus_int64min", "add", kDType, [](Device d) { Tensor::zeros({2}, kU8, d) + kI64Min; }},
      {"i64_eq_nan", "eq", kDType,
       [](Device d) { Tensor::zeros({2}, kI64, d).eq(std::numeric_limits<double>::quiet_NaN()); }},
  };
}

std::vector<Case> reduce_cases() {
  return {
      {"argmax_dim_over_2p32", "argmax", kShape, [](Device d) { bz({p2(32) + 2}, kF32, d).argmax(0); }},
      {"argmin_dim_over_2p32", "argmin", kShape, [](Device d) { bz({p2(32) + 2}, kF32, d).argmin(0); }},
      {"argmax_rows_over_2p32_keepdim", "argmax", kShape,
       [](Device d) {
         bz({2, p2(32) + 2}, DType::BF16, d).argmax(-1, true);
       }},
      {"argmin_dim_int64max_elements", "argmin", kShape, [](Device d) { bz({kI64Max}, kU8, d).argmin(0); }},
      {"argmax_dim_int64min", "argmax", kShape, [](Device d) { Tensor::zeros({2}, kF32, d).argmax(kI64Min); }},
      // Past 2^32 - 1 (the index width) and past any memory (2^58 bytes of u32 indices).
      {"argsort_last_dim_2p56", "argsort", kShapeOrOom, [](Device d) { bz({p2(56)}, kF32, d).argsort(); }},
      {"sort_last_dim_2p56", nullptr, kShapeOrOom, [](Device d) { bz({p2(56)}, kF32, d).sort(); }},
      {"argsort_output_bytes_wrap", "argsort", kShapeOrOom,
       [](Device d) {
         bz({p2(61), 2}, kF32, d).argsort();
       }},
      {"cumsum_of_2p62_f32", "cumsum", kShapeOrOom, [](Device d) { bz({p2(62)}, kF32, d).cumsum(0); }},
      {"cumsum_dim_int64min", "cumsum", kShape, [](Device d) { Tensor::zeros({2}, kF32, d).cumsum(kI64Min); }},
      {"sum_dim_int64min", "sum", kShape, [](Device d) { Tensor::zeros({2}, kF32, d).sum(Dims{kI64Min}); }},
      {"max_dim_int64max", "max", kShape, [](Device d) { Tensor::zeros({2}, kF32, d).max(Dims{kI64Max}); }},
      {"mean_dim_int64min", "mean", kShape, [](Device d) { Tensor::zeros({2}, kF32, d).mean(kI64Min); }},
      {"var_dim_listed_twice", "var", kShape,
       [](Device d) {
         Tensor::zeros({2, 3}, kF32, d).var(Dims{1, -1});
       }},
      {"sum_output_of_2p61_f32", "sum", kShapeOrOom,
       [](Device d) {
         bz({p2(61), 2}, kF32, d).sum(1);  // 2^61 f32 outputs: 2^63 bytes
       }},
      {"max_output_of_2p61_f32", "max", kShapeOrOom,
       [](Device d) {
         bz({2, p2(61)}, kF32, d).max(0);
       }},
      {"min_keepdim_output_of_2p61_f64", "min", kShapeOrOom,
       [](Device d) {
         bz({p2(61), 3}, kF64, d).min(1, true);
       }},
      {"mean_output_of_2p61_f64", nullptr, kShapeOrOom,
       [](Device d) {
         bz({p2(61), 2}, kF64, d).mean(1);
       }},
      {"sum_of_empty_ok", nullptr, kOk,
       [](Device d) {
         check(Tensor::zeros({0, 3}, kF32, d).sum().item<float>() == 0, "sum of nothing");
       }},
      {"argmax_of_empty_dim", "argmax", kShape,
       [](Device d) {
         Tensor::zeros({3, 0}, kF32, d).argmax(1);
       }},
  };
}

std::vector<Case> index_cases() {
  return {
      {"index_select_ids_int64min", "index_select", kIndex,
       [](Device d) { iota32(d).index_select(Tensor::from_vector<int64_t>({kI64Min}, {1}, d), 0).to_vector<float>(); }},
      {"index_select_ids_int64max_minus_1", "index_select", kIndex,
       [](Device d) {
         iota32(d).index_select(Tensor::from_vector<int64_t>({kI64Max - 1}, {1}, d), 0).to_vector<float>();
       }},
      {"index_select_ids_u32_max_minus_1", "index_select", kIndex,
       [](Device d) {
         iota32(d).index_select(Tensor::from_vector<uint32_t>({0xfffffffeu}, {1}, d), 0).to_vector<float>();
       }},
      {"index_select_ids_int64max_skips_ok", nullptr, kOk,
       [](Device d) {
         Tensor r = iota32(d).index_select(Tensor::from_vector<int64_t>({kI64Max, 2}, {2}, d), 0);
         check(r.to_vector<float>() == std::vector<float>{0, 0, 4, 5}, "values");
       }},
      {"gather_ids_int64min", "gather", kIndex,
       [](Device d) {
         iota32(d).gather(Tensor::from_vector<int64_t>({kI64Min}, {1, 1}, d), 0).to_vector<float>();
       }},
      {"scatter_set_ids_int64min", "scatter_set", kIndex,
       [](Device d) {
         Tensor x = iota32(d);
         x.scatter_set(Tensor::from_vector<int64_t>({kI64Min}, {1, 1}, d), Tensor::ones({1, 1}, kF32, d), 0);
         synchronize(d);
       }},
      {"scatter_add_set_ids_i16_min", "scatter_add_set", kIndex,
       [](Device d) {
         Tensor x = iota32(d);
         x.scatter_add_set(Tensor::from_vector<int16_t>({-32768}, {1, 1}, d), Tensor::ones({1, 1}, kF32, d), 1);
         synchronize(d);
       }},
      {"index_add_ids_int64min", "index_add", kIndex,
       [](Device d) {
         iota32(d)
             .index_add(Tensor::from_vector<int64_t>({kI64Min}, {1}, d), Tensor::ones({1, 2}, kF32, d), 0)
             .to_vector<float>();
       }},
      {"index_select_of_2p62_ids", "index_select", kShapeOrOom,
       [](Device d) {
         Tensor::zeros({3, 4}, kF32, d).index_select(bz({p2(62)}, kU32, d), 0);
       }},
      {"index_select_of_2p61_ids_f64", "index_select", kShapeOrOom,
       [](Device d) { Tensor::zeros({3}, kF64, d).index_select(bz({p2(61)}, kU32, d), 0); }},
      {"gather_of_2p62_ids", "gather", kShapeOrOom,
       [](Device d) {
         Tensor::zeros({3, 1}, kF32, d).gather(bz({p2(62), 1}, kI64, d), 0);
       }},
      {"embedding_of_2p62_ids", "embedding", kShapeOrOom,
       [](Device d) {
         embedding(Tensor::zeros({3, 4}, kF32, d), bz({p2(62)}, kU32, d));
       }},
      {"embedding_of_2p31_2p31_ids", "embedding", kShapeOrOom,
       [](Device d) {
         embedding(Tensor::zeros({3, 4}, kF32, d), bz({p2(31), p2(31)}, kU32, d));
       }},
      {"index_add_dim_int64max", "index_add", kShape,
       [](Device d) {
         iota32(d).index_add(Tensor::zeros({1}, kU32, d), Tensor::ones({1, 2}, kF32, d), kI64Max);
       }},
      {"index_select_dim_int64min", "index_select", kShape,
       [](Device d) { iota32(d).index_select(Tensor::zeros({1}, kU32, d), kI64Min); }},
      {"gather_dim_int64min", "gather", kShape,
       [](Device d) {
         iota32(d).gather(Tensor::zeros({1, 1}, kU32, d), kI64Min);
       }},
      {"scatter_dim_int64min", "scatter", kShape,
       [](Device d) {
         iota32(d).scatter(Tensor::zeros({1, 1}, kU32, d), Tensor::ones({1, 1}, kF32, d), kI64Min);
       }},
      {"pad_with_zeros_right_int64max", "pad_with_zeros", kShape,
       [](Device d) { Tensor::zeros({3}, kF32, d).pad_with_zeros(0, 1, kI64Max); }},
      {"pad_with_zeros_two_2p62", "pad_with_zeros", kShape,
       [](Device d) { Tensor::zeros({3}, kF32, d).pad_with_zeros(0, p2(62), p2(62)); }},
      {"pad_with_zeros_left_int64min", "pad_with_zeros", kShape,
       [](Device d) { Tensor::zeros({3}, kF32, d).pad_with_zeros(0, kI64Min, 0); }},
      {"pad_with_zeros_bytes_wrap_f64", "pad_with_zeros", kShapeOrOom,
       [](Device d) { Tensor::zeros({3}, kF64, d).pad_with_zeros(0, p2(61), 0); }},
      {"pad_with_zeros_dim_int64min", "pad_with_zeros", kShape,
       [](Device d) { Tensor::zeros({3}, kF32, d).pad_with_zeros(kI64Min, 1, 1); }},
      {"pad_with_zeros_of_huge_view", "pad_with_zeros", kShapeOrOom,
       [](Device d) { bz({p2(61)}, kF64, d).pad_with_zeros(0, 1, 1); }},
  };
}

}  // namespace

std::vector<Case> op_cases() {
  std::vector<Case> out = elementwise_cases();
  for (auto* part : {&reduce_cases, &index_cases}) {
    std::vector<Case> more = part();
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

}  // namespace wick::adversarial
