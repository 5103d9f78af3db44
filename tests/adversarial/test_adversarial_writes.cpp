// Hostile cases of the in-place writes (into views whose elements alias each other), the joins,
// the convolutions, pooling and upsampling, and of mismatched, undefined and empty operands (see
// test_adversarial.cpp).
#include <omp.h>

#include "adversarial.h"

namespace wick::adversarial {
namespace {

constexpr DType kF32 = DType::F32, kF64 = DType::F64, kU32 = DType::U32;

Tensor bz(const Shape& s, DType dt, Device d) { return broadcast_zero(s, dt, d); }
Tensor ones(const Shape& s, Device d, DType dt = kF32) { return Tensor::ones(s, dt, d); }
Tensor zeros(const Shape& s, Device d, DType dt = kF32) { return Tensor::zeros(s, dt, d); }
Tensor iota(int64_t n, Device d) { return Tensor::arange(0, n, 1, kF32, d); }

// A view of base's storage with this layout, made through the public constructor.
Tensor view(const Tensor& base, const Layout& l) { return Tensor(base.storage(), l, base.dtype()); }

std::vector<Case> write_cases() {
  const Layout stride0({4}, {0}, 0), diag({3, 3}, {1, 1}, 0), rows({2, 3}, {2, 1}, 0), tall({4, 4}, {2, 1}, 0);
  return {
      {"copy_from_into_stride0_alias", "copy_from", kShape,
       [=](Device d) { view(zeros({16}, d), stride0).copy_from(iota(4, d)); }},
      {"copy_from_into_3x3_strides_1_1", "copy_from", kShape,
       [=](Device d) {
         view(zeros({16}, d), diag).copy_from(iota(9, d).reshape({3, 3}));
       }},
      {"copy_from_into_2x3_strides_2_1", "copy_from", kShape,
       [=](Device d) {
         view(zeros({16}, d), rows).copy_from(iota(6, d).reshape({2, 3}));
       }},
      {"copy_from_scalar_into_3x3_strides_1_1", "copy_from", kShape,
       [=](Device d) { view(zeros({16}, d), diag).copy_from(Tensor::scalar(1, kF32, d)); }},
      {"const_set_into_3x3_strides_1_1", "const_set", kShape,
       [=](Device d) { view(zeros({16}, d), diag).const_set(1); }},
      {"fill_into_2x3_strides_2_1", "const_set", kShape, [=](Device d) { view(zeros({16}, d), rows).fill(2); }},
      {"zero_into_stride0_alias", "const_set", kShape, [=](Device d) { view(zeros({16}, d), stride0).zero(); }},
      {"scatter_set_into_3x3_strides_1_1", "scatter_set", kShape,
       [=](Device d) {
         view(zeros({16}, d), diag).scatter_set(zeros({1, 3}, d, kU32), ones({1, 3}, d), 0);
       }},
      {"scatter_add_set_into_3x3_strides_1_1", "scatter_add_set", kShape,
       [=](Device d) {
         view(zeros({16}, d), diag).scatter_add_set(zeros({3, 1}, d, kU32), ones({3, 1}, d), 1);
       }},
      {"scatter_set_into_stride0_alias", "scatter_set", kShape,
       [=](Device d) { view(zeros({16}, d), stride0).scatter_set(zeros({4}, d, kU32), ones({4}, d), 0); }},
      {"slice_set_into_3x3_strides_1_1", "slice_set", kShape,
       [=](Device d) {
         view(zeros({16}, d), diag).slice_set(ones({3, 3}, d), 0, 0);
       }},
      {"slice_set_into_stride0_alias", "slice_set", kShape,
       [=](Device d) { view(zeros({16}, d), stride0).slice_set(ones({2}, d), 0, 1); }},
      {"slice_set_rows_of_overlapping_4x4", "slice_set", kShape,
       [=](Device d) {
         view(zeros({16}, d), tall).slice_set(ones({2, 4}, d), 0, 1);
       }},
      {"slice_set_start_int64max", "slice_set", kIndex,
       [](Device d) { zeros({4}, d).slice_set(ones({2}, d), 0, kI64Max); }},
      {"slice_set_start_int64max_minus_1", "slice_set", kIndex,
       [](Device d) {
         zeros({4, 3}, d).slice_set(ones({2, 3}, d), 0, kI64Max - 1);
       }},
      {"slice_set_start_int64min", "slice_set", kIndex,
       [](Device d) { zeros({4}, d).slice_set(ones({2}, d), 0, kI64Min); }},
      {"slice_set_dim_int64min", "slice_set", kShape,
       [](Device d) { zeros({4}, d).slice_set(ones({2}, d), kI64Min, 0); }},
      {"copy_from_into_transposed_view_ok", nullptr, kOk,
       [](Device d) {
         Tensor base = zeros({6}, d);
         view(base, Layout({2, 3}, {1, 2}, 0)).copy_from(iota(6, d).reshape({2, 3}));
         check(base.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5}, "values");
       }},
      {"copy_from_into_gapped_view_ok", nullptr, kOk,
       [](Device d) {
         Tensor base = zeros({6}, d);
         view(base, Layout({2, 2}, {3, 1}, 1)).copy_from(iota(4, d).reshape({2, 2}) + 1);
         check(base.to_vector<float>() == std::vector<float>{0, 1, 2, 0, 3, 4}, "values");
       }},
      {"const_set_size1_dim_stride0_ok", nullptr, kOk,
       [](Device d) {
         Tensor base = zeros({5}, d);
         view(base, Layout({1, 4}, {0, 1}, 0)).const_set(7);
         check(base.to_vector<float>() == std::vector<float>{7, 7, 7, 7, 0}, "values");
       }},
      {"copy_from_into_empty_alias_ok", nullptr, kOk,
       [](Device d) {
         view(zeros({4}, d), Layout({0, 4}, {0, 0}, 0)).copy_from(zeros({0, 4}, d));
       }},
      {"copy_from_shifted_self_ok", nullptr, kOk,
       [](Device d) {
         Tensor base = iota(8, d);
         base.narrow(0, 1, 6).copy_from(base.narrow(0, 0, 6));
         check(base.to_vector<float>() == std::vector<float>{0, 0, 1, 2, 3, 4, 5, 7}, "src read before written");
       }},
      {"scatter_of_aliasing_view_ok", nullptr, kOk,
       [=](Device d) {
         Tensor r = view(iota(5, d), diag).scatter(zeros({1, 3}, d, kU32), ones({1, 3}, d) * 9, 0);
         check(r.to_vector<float>() == std::vector<float>{9, 9, 9, 1, 2, 3, 2, 3, 4}, "values");
       }},
  };
}

std::vector<Case> join_cases() {
  return {
      {"cat_total_wraps_four_2p62", "cat", kShape,
       [](Device d) {
         Tensor x = bz({p2(62)}, kF32, d);
         cat({x, x, x, x}, 0);
       }},
      {"cat_int64max_plus_1", "cat", kShape,
       [](Device d) {
         cat({bz({kI64Max}, kF32, d), zeros({1}, d)}, 0);
       }},
      {"cat_three_2p62", "cat", kShape,
       [](Device d) {
         Tensor x = bz({p2(62)}, DType::U8, d);
         cat({x, x, x}, 0);
       }},
      {"cat_total_bytes_wrap_f64", "cat", kShapeOrOom,
       [](Device d) {
         Tensor x = bz({p2(61)}, kF64, d);
         cat({x, x}, 0);
       }},
      {"cat_numel_overflow_2d", "cat", kShape,
       [](Device d) {
         Tensor x = bz({p2(31), p2(31)}, kF32, d);
         cat({x, x}, 0);
       }},
      {"cat_numel_overflow_along_dim1", "cat", kShape,
       [](Device d) {
         Tensor x = bz({p2(62), 1}, kF32, d);
         cat({x, x}, 1);
       }},
      {"cat_dim_int64min", "cat", kShape, [](Device d) { cat({zeros({2}, d)}, kI64Min); }},
      {"stack_numel_overflow", "stack", kShape,
       [](Device d) {
         Tensor x = bz({p2(62)}, kF32, d);
         stack({x, x, x, x}, 0);
       }},
      {"stack_bytes_wrap_f64", "stack", kShapeOrOom,
       [](Device d) {
         Tensor x = bz({p2(61)}, kF64, d);
         stack({x, x}, 0);
       }},
      {"stack_dim_int64max", "stack", kShape, [](Device d) { stack({zeros({2}, d)}, kI64Max); }},
      {"stack_to_rank9", "stack", kShape,
       [](Device d) {
         stack({zeros({1, 1, 1, 1, 1, 1, 1, 1}, d), zeros({1, 1, 1, 1, 1, 1, 1, 1}, d)}, 0);
       }},
      {"cat_of_empties_ok", nullptr, kOk,
       [](Device d) {
         check(cat({zeros({0, 3}, d), zeros({2, 3}, d)}, 0).shape() == Shape{2, 3}, "shape");
       }},
      {"stack_of_empties_ok", nullptr, kOk,
       [](Device d) {
         check(stack({zeros({0}, d), zeros({0}, d)}, 1).shape() == Shape{0, 2}, "shape");
       }},
  };
}

Conv2dOptions conv2d(Pair padding, Pair stride, Pair dilation, Pair output_padding = 0, int64_t groups = 1) {
  return {padding, stride, dilation, output_padding, groups};
}

std::vector<Case> nn_cases() {
  return {
      {"conv2d_dilation_2p62", "conv2d", kShape,
       [](Device d) {
         ones({1, 1, 5, 5}, d).conv2d(ones({1, 1, 3, 3}, d), conv2d(0, 1, p2(62)));
       }},
      {"conv2d_dilation_int64max", "conv2d", kShape,
       [](Device d) {
         ones({1, 1, 5, 5}, d).conv2d(ones({1, 1, 3, 3}, d), conv2d(0, 1, {1, kI64Max}));
       }},
      // An output of 2^31 x 2^31 f32: exactly 2^64 bytes, 0 after a wrap, then filled by im2col.
      {"conv2d_padding_2p30_minus_1", "conv2d", kShapeOrOom,
       [](Device d) {
         ones({1, 1, 2, 2}, d).conv2d(ones({1, 1, 1, 1}, d), conv2d(p2(30) - 1, 1, 1));
       }},
      {"conv2d_padding_2p62", "conv2d", kShape,
       [](Device d) {
         ones({1, 1, 1, 1}, d).conv2d(ones({1, 1, 1, 1}, d), conv2d(p2(62), 1, 1));
       }},
      {"conv2d_padding_int64max", "conv2d", kShape,
       [](Device d) {
         ones({1, 1, 1, 1}, d).conv2d(ones({1, 1, 1, 1}, d), conv2d({kI64Max, 0}, 1, 1));
       }},
      {"conv2d_stride_int64max_ok", nullptr, kOk,
       [](Device d) {
         Tensor y = ones({1, 1, 5, 5}, d).conv2d(ones({1, 1, 3, 3}, d), conv2d(0, kI64Max, 1));
         check(y.shape() == Shape{1, 1, 1, 1} && y.to_vector<float>() == std::vector<float>{9}, "value");
       }},
      {"conv2d_groups_int64min", "conv2d", kShape,
       [](Device d) {
         ones({1, 1, 3, 3}, d).conv2d(ones({1, 1, 1, 1}, d), conv2d(0, 1, 1, 0, kI64Min));
       }},
      {"conv2d_batch0_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({0, 1, 3, 3}, d).conv2d(ones({1, 1, 2, 2}, d)).shape() == Shape{0, 1, 2, 2}, "shape");
       }},
      // One output element from an input of 2^60 bytes that the CPU backend first copies densely:
      // the answer (0) or a clean refusal, never std::bad_alloc.
      {"conv2d_of_broadcast_input_needing_2p60_byte_copy", nullptr, kOkOrError,
       [](Device d) {
         Tensor y = bz({1, p2(20), p2(19), p2(19)}, kF32, d).conv2d(zeros({1, p2(20), 1, 1}, d), conv2d(0, kI64Max, 1));
         check(y.shape() == Shape{1, 1, 1, 1} && y.to_vector<float>() == std::vector<float>{0}, "result");
       }},
      {"conv1d_dilation_2p62", "conv1d", kShape,
       [](Device d) {
         ones({1, 1, 5}, d).conv1d(ones({1, 1, 3}, d), {.dilation = p2(62)});
       }},
      {"conv1d_padding_2p61_f64", "conv1d", kShapeOrOom,
       [](Device d) {
         ones({1, 1, 1}, d, kF64).conv1d(ones({1, 1, 1}, d, kF64), {.padding = p2(61)});
       }},
      {"conv1d_stride_int64max_ok", nullptr, kOk,
       [](Device d) {
         Tensor y = ones({1, 1, 5}, d).conv1d(ones({1, 1, 2}, d), {.stride = kI64Max});
         check(y.to_vector<float>() == std::vector<float>{2}, "value");
       }},
      {"conv_transpose2d_stride_2p61", "conv_transpose2d", kShape,
       [](Device d) {
         ones({1, 1, 3, 3}, d).conv_transpose2d(ones({1, 1, 1, 1}, d), conv2d(0, p2(61), 1));
       }},
      {"conv_transpose2d_stride_2p62", "conv_transpose2d", kShape,
       [](Device d) {
         ones({1, 1, 3, 3}, d).conv_transpose2d(ones({1, 1, 1, 1}, d), conv2d(0, p2(62), 1));
       }},
      {"conv_transpose2d_dilation_2p62", "conv_transpose2d", kShape,
       [](Device d) {
         ones({1, 1, 2, 2}, d).conv_transpose2d(ones({1, 1, 3, 3}, d), conv2d(0, 1, p2(62)));
       }},
      {"conv_transpose1d_output_padding_wraps", "conv_transpose1d", kShape,
       [](Device d) {
         ones({1, 1, 2}, d).conv_transpose1d(ones({1, 1, 1}, d), {.stride = p2(62), .output_padding = p2(62) - 1});
       }},
      {"conv_transpose1d_padding_int64max", "conv_transpose1d", kShape,
       [](Device d) {
         ones({1, 1, 2}, d).conv_transpose1d(ones({1, 1, 1}, d), {.padding = kI64Max});
       }},
      // A correct answer (zeros) or a clean error; today each thread's scratch allocation throws
      // inside an OpenMP region.
      {"conv_transpose2d_scratch_oom_in_parallel_region", nullptr, kOkOrError,
       [](Device d) {
         omp_set_num_threads(2);
         Tensor y = zeros({2, 0, 4096, 4096}, d).conv_transpose2d(zeros({0, 1, 4096, 4096}, d), conv2d(4095, 1, 1));
         check(y.shape() == Shape{2, 1, 1, 1} && y.to_vector<float>() == std::vector<float>(2, 0), "result");
       }},
      // m * n * k = 2^64 wraps to 0, "small", so the batch runs in parallel and a per-thread buffer
      // of m * k floats is allocated inside the OpenMP region.
      {"matmul_f16_inner_2p44_in_parallel_region", "matmul", kAnyError,
       [](Device d) {
         omp_set_num_threads(2);
         bz({2, 1024, p2(44)}, DType::F16, d).matmul(bz({2, p2(44), 1024}, DType::F16, d));
       }},
      {"matmul_inner_2p56_f32", "matmul", kAnyError,
       [](Device d) {
         bz({1, p2(56)}, kF32, d).matmul(bz({p2(56), 1}, kF32, d));
       }},
      {"matmul_out_numel_overflow", "matmul", kShape,
       [](Device d) {
         bz({p2(32), 1}, kF32, d).matmul(bz({1, p2(32)}, kF32, d));
       }},
      {"matmul_batch_numel_overflow", "matmul", kShape,
       [](Device d) {
         bz({p2(32), 1, 1, 1}, kF32, d).matmul(bz({1, p2(32), 1, 1}, kF32, d));
       }},
      {"matmul_out_bytes_wrap", "matmul", kShapeOrOom,
       [](Device d) {
         bz({p2(31), 1}, kF32, d).matmul(bz({1, p2(31)}, kF32, d));
       }},
      {"matmul_empty_inner_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({2, 0}, d).matmul(zeros({0, 3}, d)).to_vector<float>() == std::vector<float>(6, 0), "zeros");
       }},
      {"dot_of_2p56", "dot", kAnyError, [](Device d) { bz({p2(56)}, kF32, d).dot(bz({p2(56)}, kF32, d)); }},
      {"avg_pool2d_kernel_int64max", "avg_pool2d", kShape,
       [](Device d) {
         ones({1, 1, 4, 4}, d).avg_pool2d(kI64Max);
       }},
      {"avg_pool2d_kernel_int64min", "avg_pool2d", kShape,
       [](Device d) {
         ones({1, 1, 4, 4}, d).avg_pool2d({kI64Min, 1});
       }},
      {"max_pool2d_stride_int64max_ok", nullptr, kOk,
       [](Device d) {
         Tensor y = iota(16, d).reshape({1, 1, 4, 4}).max_pool2d(2, kI64Max);
         check(y.to_vector<float>() == std::vector<float>{5}, "value");
       }},
      {"avg_pool2d_output_bytes_wrap", "avg_pool2d", kShapeOrOom,
       [](Device d) {
         bz({1, 1, p2(31), p2(31)}, kF32, d).avg_pool2d(1);
       }},
      {"max_pool2d_output_int64max_rows", "max_pool2d", kShapeOrOom,
       [](Device d) {
         bz({1, 1, kI64Max, 1}, kF32, d).max_pool2d(1);
       }},
      {"max_pool2d_batch0_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({0, 1, 2, 2}, d).max_pool2d(2).shape() == Shape{0, 1, 1, 1}, "shape");
       }},
      {"upsample_nearest1d_int64max", "upsample_nearest1d", kShapeOrOom,
       [](Device d) {
         zeros({1, 1, 2}, d).upsample_nearest1d(kI64Max);
       }},
      {"upsample_nearest1d_2p62", "upsample_nearest1d", kShapeOrOom,
       [](Device d) {
         zeros({1, 1, 2}, d).upsample_nearest1d(p2(62));
       }},
      {"upsample_nearest2d_2p32_2p32", "upsample_nearest2d", kShape,
       [](Device d) {
         zeros({1, 1, 2, 2}, d).upsample_nearest2d(p2(32), p2(32));
       }},
      {"upsample_nearest1d_from_2p61_source_ok", nullptr, kOk,
       [](Device d) {
         check(bz({1, 1, p2(61)}, kF32, d).upsample_nearest1d(4).to_vector<float>() == std::vector<float>(4, 0), "0s");
       }},
      // The source index dst * in / out: 3 * 2^62 does not fit in int64.
      {"upsample_nearest1d_source_index_overflows", "upsample_nearest1d", kShape,
       [](Device d) { bz({1, 1, p2(62)}, kF32, d).upsample_nearest1d(4); }},
      {"upsample_nearest2d_from_2p61_source_ok", nullptr, kOk,
       [](Device d) {
         Tensor y = bz({1, 1, p2(61), 3}, kF32, d).upsample_nearest2d(3, 2);
         check(y.to_vector<float>() == std::vector<float>(6, 0), "zeros");
       }},
      {"upsample_bilinear2d_int64max", "upsample_bilinear2d", kShapeOrOom,
       [](Device d) {
         zeros({1, 1, 2, 2}, d).upsample_bilinear2d(kI64Max, 1);
       }},
      {"upsample_bilinear2d_scale_1e300", "upsample_bilinear2d", kShape,
       [](Device d) {
         zeros({1, 1, 2, 2}, d).upsample_bilinear2d_scale(1e300, 1);
       }},
      {"upsample_bilinear2d_scale_2p40", "upsample_bilinear2d", kShapeOrOom,
       [](Device d) {
         zeros({1, 1, 2, 2}, d).upsample_bilinear2d_scale(0x1p40, 0x1p40);
       }},
      {"upsample_bilinear2d_from_2p61_source_ok", nullptr, kOk,
       [](Device d) {
         Tensor y = bz({1, 1, p2(61), 2}, kF32, d).upsample_bilinear2d(2, 2);
         check(y.to_vector<float>() == std::vector<float>(4, 0), "zeros");
       }},
  };
}

std::vector<Case> mismatch_cases() {
  const Device other = reference_device();
  std::vector<Case> out = {
      {"matmul_dtypes_differ", "matmul", kDType,
       [](Device d) {
         ones({2, 2}, d).matmul(ones({2, 2}, d, kF64));
       }},
      {"conv2d_dtypes_differ", "conv2d", kDType,
       [](Device d) {
         ones({1, 1, 3, 3}, d).conv2d(ones({1, 1, 1, 1}, d, DType::F16));
       }},
      {"conv_transpose1d_dtypes_differ", "conv_transpose1d", kDType,
       [](Device d) {
         ones({1, 1, 3}, d).conv_transpose1d(ones({1, 1, 1}, d, kF64));
       }},
      {"index_add_dtypes_differ", "index_add", kDType,
       [](Device d) { zeros({3}, d).index_add(zeros({1}, d, kU32), ones({1}, d, kF64), 0); }},
      {"scatter_add_dtypes_differ", "scatter_add", kDType,
       [](Device d) { zeros({3}, d).scatter_add(zeros({1}, d, kU32), ones({1}, d, kF64), 0); }},
      {"matmul_across_devices", "matmul", kDevice,
       [other](Device d) {
         ones({2, 2}, d).matmul(ones({2, 2}, other));
       }},
      {"conv2d_across_devices", "conv2d", kDevice,
       [other](Device d) {
         ones({1, 1, 3, 3}, d).conv2d(ones({1, 1, 1, 1}, other));
       }},
      {"where_cond_across_devices", "where_cond", kDevice,
       [other](Device d) { where_cond(ones({2}, d, DType::U8), ones({2}, d), ones({2}, other)); }},
      {"copy_from_across_devices", "copy_from", kDevice,
       [other](Device d) { zeros({2}, d).copy_from(ones({2}, other)); }},
      {"index_add_across_devices", "index_add", kDevice,
       [other](Device d) { zeros({3}, d).index_add(zeros({1}, d, kU32), ones({1}, other), 0); }},
      {"embedding_across_devices", "embedding", kDevice,
       [other](Device d) {
         embedding(ones({3, 2}, d), zeros({1}, other, kU32));
       }},
      {"dot_across_devices", "dot", kDevice, [other](Device d) { ones({2}, d).dot(ones({2}, other)); }},
      {"mv_across_devices", "mv", kDevice,
       [other](Device d) {
         ones({2, 2}, d).mv(ones({2}, other));
       }},
  };
  // Each op on an undefined tensor, in either operand.
  struct Undefined {
    const char* name;
    const char* op;
    std::function<void(Device)> run;
  };
  const Undefined undefined[] = {
      {"matmul_lhs", "matmul",
       [](Device d) {
         Tensor().matmul(ones({2, 2}, d));
       }},
      {"matmul_rhs", "matmul",
       [](Device d) {
         ones({2, 2}, d).matmul(Tensor());
       }},
      {"dot", "dot", [](Device d) { Tensor().dot(ones({2}, d)); }},
      {"mv", "mv",
       [](Device d) {
         ones({2, 2}, d).mv(Tensor());
       }},
      {"conv1d_kernel", "conv1d",
       [](Device d) {
         ones({1, 1, 3}, d).conv1d(Tensor());
       }},
      {"conv2d", "conv2d",
       [](Device d) {
         Tensor().conv2d(ones({1, 1, 1, 1}, d));
       }},
      {"conv_transpose1d", "conv_transpose1d",
       [](Device d) {
         Tensor().conv_transpose1d(ones({1, 1, 1}, d));
       }},
      {"conv_transpose2d_kernel", "conv_transpose2d",
       [](Device d) {
         ones({1, 1, 3, 3}, d).conv_transpose2d(Tensor());
       }},
      {"avg_pool2d", "avg_pool2d", [](Device) { Tensor().avg_pool2d(2); }},
      {"max_pool2d", "max_pool2d", [](Device) { Tensor().max_pool2d(2); }},
      {"upsample_nearest1d", "upsample_nearest1d", [](Device) { Tensor().upsample_nearest1d(2); }},
      {"upsample_nearest2d", "upsample_nearest2d", [](Device) { Tensor().upsample_nearest2d(2, 2); }},
      {"upsample_bilinear2d", "upsample_bilinear2d", [](Device) { Tensor().upsample_bilinear2d(2, 2); }},
      {"upsample_bilinear2d_scale", "upsample_bilinear2d", [](Device) { Tensor().upsample_bilinear2d_scale(2, 2); }},
      {"slice", "slice", [](Device) { Tensor().slice(0, 0, 1); }},
      {"t", "t", [](Device) { Tensor().t(); }},
      {"permute", "permute", [](Device) { Tensor().permute({0}); }},
      {"dim", "dim", [](Device) { (void)Tensor().dim(0); }},
      {"scatter_add", "scatter_add", [](Device d) { Tensor().scatter_add(zeros({1}, d, kU32), ones({1}, d), 0); }},
      {"scatter_add_set_src", "scatter_add_set",
       [](Device d) { zeros({2}, d).scatter_add_set(zeros({1}, d, kU32), Tensor(), 0); }},
      {"copy_from_src", "copy_from", [](Device d) { zeros({2}, d).copy_from(Tensor()); }},
      {"embedding_ids", "embedding",
       [](Device d) {
         embedding(ones({3, 2}, d), Tensor());
       }},
      {"split_sizes", "split",
       [](Device) {
         std::vector<int64_t> sizes = {1};
         Tensor().split(sizes);
       }},
      {"rand_normal_like", "rand_normal_like", [](Device) { Tensor().rand_normal_like(); }},
      {"add_null_storage", "add", [](Device d) { Tensor(nullptr, Layout(Shape{4}), kF32).add(ones({4}, d)); }},
  };
  for (const Undefined& u : undefined) out.push_back({std::string("undefined_") + u.name, u.op, kPlainError, u.run});
  return out;
}

std::vector<Case> empty_cases() {
  return {
      {"argsort_of_empty_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({3, 0}, d).argsort().numel() == 0, "numel");
       }},
      {"argsort_of_rank0_ok", nullptr, kOk,
       [](Device d) {
         check(Tensor::scalar(2, kF32, d).argsort().to_vector<uint32_t>() == std::vector<uint32_t>{0}, "");
       }},
      {"cumsum_of_empty_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({0, 2}, d).cumsum(0).numel() == 0, "numel");
       }},
      {"index_select_empty_ids_ok", nullptr, kOk,
       [](Device d) {
         check(ones({3, 2}, d).index_select(zeros({0}, d, kU32), 0).shape() == Shape{0, 2}, "shape");
       }},
      {"gather_empty_ids_ok", nullptr, kOk,
       [](Device d) {
         check(ones({3, 2}, d).gather(zeros({0, 2}, d, kU32), 0).numel() == 0, "numel");
       }},
      {"conv1d_batch0_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({0, 2, 5}, d).conv1d(ones({3, 2, 2}, d)).shape() == Shape{0, 3, 4}, "shape");
       }},
      {"upsample_nearest2d_batch0_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({0, 1, 2, 2}, d).upsample_nearest2d(3, 3).shape() == Shape{0, 1, 3, 3}, "shape");
       }},
      {"narrow_of_empty_at_offset_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({0, 5}, d).narrow(1, 2, 2).shape() == Shape{0, 2}, "shape");
       }},
      {"slice_of_empty_stride2_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({0, 5}, d).slice(1, 1, 5, 2).shape() == Shape{0, 2}, "shape");
       }},
      {"const_set_of_empty_3x0_ok", nullptr, kOk,
       [](Device d) {
         zeros({3, 0}, d).const_set(1);
       }},
      {"copy_from_into_empty_2x0_ok", nullptr, kOk,
       [](Device d) {
         zeros({2, 0}, d).copy_from(zeros({2, 0}, d));
       }},
      {"scatter_into_empty_3x0_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({3, 0}, d).scatter(zeros({1, 0}, d, kU32), zeros({1, 0}, d), 0).shape() == Shape{3, 0}, "shape");
       }},
      {"matmul_empty_batch_ok", nullptr, kOk,
       [](Device d) {
         check(zeros({0, 2, 3}, d).matmul(zeros({3, 4}, d)).shape() == Shape{0, 2, 4}, "shape");
       }},
  };
}

}  // namespace

std::vector<Case> write_join_nn_cases() {
  std::vector<Case> out = write_cases();
  for (auto* part : {&join_cases, &nn_cases, &mismatch_cases, &empty_cases}) {
    std::vector<Case> more = part();
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

}  // namespace wick::adversarial
