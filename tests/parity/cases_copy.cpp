// Cases for copy_strided, copy2d, const_set, cast, rand_uniform and rand_normal.
#include "backend/scalar_cast.h"
#include "parity/cases.h"

namespace wick::parity {

namespace {

// The destination layout of a copy_strided variant (the source takes the variant's first form:
// a permuted source is copied into a contiguous destination, as `contiguous()` does).
Form dst_form(const Variant& v) {
  if (v.name == "narrow") return Form::Narrow;
  if (v.name == "stride2") return Form::Stride2;
  if (v.name == "size1" || v.name == "broadcast") return Form::Transposed;
  return Form::Contiguous;
}

void add_copy_strided(std::vector<Case>& cases, DType dt) {
  for (const Variant& v : standard_variants(dt)) {
    Form src_form = v.name == "broadcast" ? Form::Broadcast : v.form(0, 2);
    cases.push_back({"copy_strided",
                     label(dt),
                     shape_label(v.shape),
                     v.name,
                     OpCode::CopyStrided,
                     {dt},
                     Compare::Exact,
                     false,
                     [=](Ctx& c) {
                       Arg src = c.input(dt, v.shape, src_form, v.values);
                       Arg dst = c.input(dt, v.shape, dst_form(v), v.values);
                       c.backend().copy_strided(src.view(), dst.mut());
                       return out(dst);
                     }});
  }
}

void add_copy2d(std::vector<Case>& cases, DType dt) {
  struct P {
    const char* name;
    Copy2dParams p;
  };
  const P params[] = {
      {"strided", {3, 5, 7, 9, 2, 1}},
      {"dense", {4, 6, 6, 6, 0, 0}},
      {"empty", {0, 5, 7, 9, 2, 1}},
      {"prime", {7, 149, 151, 160, 1, 3}},
  };
  for (const P& p : params) {
    cases.push_back({"copy2d",
                     label(dt),
                     shape_label(Shape{p.p.rows, p.p.cols}),
                     p.name,
                     OpCode::Copy2d,
                     {dt},
                     Compare::Exact,
                     false,
                     [=](Ctx& c) {
                       const Copy2dParams& q = p.p;
                       Arg src = c.input(dt, Shape{q.src_offset + q.rows * q.src_stride + q.cols});
                       Arg dst = c.input(dt, Shape{q.dst_offset + q.rows * q.dst_stride + q.cols});
                       c.backend().copy2d(*src.storage, *dst.storage, dt, q);
                       return out(dst);
                     }});
  }
}

void add_const_set(std::vector<Case>& cases, DType dt) {
  for (const Variant& v : standard_variants(dt)) {
    if (v.name == "special") continue;
    Scalar value = is_float(dt) ? Scalar(-2.75) : Scalar(7);
    cases.push_back({"const_set",
                     label(dt),
                     shape_label(v.shape),
                     v.name,
                     OpCode::ConstSet,
                     {dt},
                     Compare::Exact,
                     false,
                     [=](Ctx& c) {
                       Arg dst = c.input(dt, v.shape, v.name == "permuted" ? v.form(0, 1) : dst_form(v));
                       c.backend().const_set(dst.mut(), value);
                       return out(dst);
                     }});
  }
}

void add_cast(std::vector<Case>& cases, DType from) {
  for (DType to : kAllDTypes) {
    for (Variant v : standard_variants(from)) {
      if (v.name != "special") v.values = Values::Wide;  // saturation, rounding, overflow
      cases.push_back({"cast",
                       label(from) + "->" + label(to),
                       shape_label(v.shape),
                       v.name,
                       OpCode::Cast,
                       {from, to},
                       Compare::Exact,
                       false,
                       [=](Ctx& c) {
                         Arg x = c.input(from, v.shape, v.form(0, 1), v.values);
                         return out(c.backend().cast(x.view(), to), to);
                       }});
    }
  }
}

void add_rand(std::vector<Case>& cases, DType dt) {
  const Shape shapes[] = {{4, 5, 6}, {7}, {1031}, {}, {0}};
  const char* names[] = {"contiguous", "tail", "prime", "rank0", "empty"};
  for (int i = 0; i < 5; ++i) {
    Shape s = shapes[i];
    cases.push_back({"rand_uniform",
                     label(dt),
                     shape_label(s),
                     names[i],
                     OpCode::RandUniform,
                     {dt},
                     Compare::Float,
                     false,
                     [=](Ctx& c) { return out(c.backend().rand_uniform(s, dt, -1.5, 2.5), dt); }});
    cases.push_back({"rand_normal",
                     label(dt),
                     shape_label(s),
                     names[i],
                     OpCode::RandNormal,
                     {dt},
                     Compare::Float,
                     false,
                     [=](Ctx& c) { return out(c.backend().rand_normal(s, dt, 0.5, 2.0), dt); }});
  }
}

}  // namespace

void add_copy_cases(std::vector<Case>& cases) {
  for (DType dt : kAllDTypes) add_copy_strided(cases, dt);
  for (DType dt : kAllDTypes) add_copy2d(cases, dt);
  for (DType dt : kAllDTypes) add_const_set(cases, dt);
  for (DType dt : kAllDTypes) add_cast(cases, dt);
  for (DType dt : kAllDTypes)
    if (is_float(dt)) add_rand(cases, dt);
}

}  // namespace wick::parity
