// Cases for gather, index_select, scatter_set, scatter_add_set and index_add, with skip
// sentinels, repeated indices, and an out-of-range index that must raise IndexError.
#include "parity/cases.h"

namespace wick::parity {

namespace {

// Index variants over a data tensor of rank 3. Not rank 0: it has no dim to index (the front end
// rejects dim 0 of a rank-0 tensor, which PyTorch accepts).
std::vector<Variant> index_variants(DType dt) {
  std::vector<Variant> out;
  for (const Variant& v : standard_variants(dt))
    if (v.name != "rank0") out.push_back(v);
  out.push_back({"out_of_range", {4, 5, 6}});
  return out;
}

// The index dtypes crossed with a value dtype: all of them for f32, two for the others.
std::vector<DType> index_dtypes_for(DType dt) {
  if (dt == DType::F32) return {std::begin(kIndexDTypes), std::end(kIndexDTypes)};
  return {DType::U32, DType::I64};
}

// `shape` with dim set to n.
Shape with_dim(Shape shape, int dim, int64_t n) {
  shape[dim] = n;
  return shape;
}

void add_gather(std::vector<Case>& cases, DType dt, DType it) {
  for (const Variant& v : index_variants(dt)) {
    for (int dim = 0; dim < v.shape.rank(); ++dim) {
      const bool oob = v.name == "out_of_range";
      const Shape ids_shape = v.name == "empty" ? v.shape : with_dim(v.shape, dim, v.shape.rank() == 1 ? 500 : 7);
      cases.push_back({"gather",
                       label(dt, it),
                       shape_label(v.shape, "dim " + std::to_string(dim)),
                       v.name,
                       OpCode::Gather,
                       {dt, it},
                       Compare::Exact,
                       oob,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, v.shape, v.form(0, 2), v.values);
                         Arg ids = c.indices(it, ids_shape, v.shape[dim], true, oob, v.form(1, 2));
                         return out(c.backend().gather(x.view(), ids.view(), dim), dt);
                       }});
    }
  }
}

void add_index_select(std::vector<Case>& cases, DType dt, DType it) {
  for (const Variant& v : index_variants(dt)) {
    for (int dim = 0; dim < v.shape.rank(); ++dim) {
      const bool oob = v.name == "out_of_range";
      const int64_t n = v.name == "empty" ? 0 : 9;
      cases.push_back({"index_select",
                       label(dt, it),
                       shape_label(v.shape, "dim " + std::to_string(dim)),
                       v.name,
                       OpCode::IndexSelect,
                       {dt, it},
                       Compare::Exact,
                       oob,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, v.shape, v.form(0, 2), v.values);
                         Form f = v.name == "stride2" || v.name == "narrow" ? v.form(1, 2) : Form::Contiguous;
                         Arg ids = c.indices(it, Shape{n}, v.shape[dim], true, oob, f);
                         return out(c.backend().index_select(x.view(), ids.view(), dim), dt);
                       }});
    }
  }
}

// scatter_set / scatter_add_set: dst takes the variant's layout (the guard elements around a
// narrowed or strided dst must stay untouched: the whole storage is compared).
void add_scatter(std::vector<Case>& cases, DType dt, DType it, bool add) {
  const OpCode code = add ? OpCode::ScatterAddSet : OpCode::ScatterSet;
  for (const Variant& v : index_variants(dt)) {
    for (int dim = 0; dim < v.shape.rank(); ++dim) {
      const bool oob = v.name == "out_of_range";
      const Shape src_shape = v.name == "empty" ? v.shape : with_dim(v.shape, dim, v.shape.rank() == 1 ? 700 : 3);
      const Form dst_form = v.name == "broadcast" ? Form::Contiguous : v.form(0, 3);
      cases.push_back({std::string(op_name(code)),
                       label(dt, it),
                       shape_label(v.shape, "dim " + std::to_string(dim)),
                       v.name,
                       code,
                       {dt, it},
                       add && is_float(dt) ? Compare::Float : Compare::Exact,
                       oob,
                       [=](Ctx& c) {
                         Arg dst = c.input(dt, v.shape, dst_form, v.values);
                         Arg ids = c.indices(it, src_shape, v.shape[dim], true, oob, v.form(1, 3));
                         Arg src = c.input(dt, src_shape, v.form(2, 3), v.values);
                         if (add)
                           c.backend().scatter_add_set(dst.mut(), ids.view(), src.view(), dim);
                         else
                           c.backend().scatter_set(dst.mut(), ids.view(), src.view(), dim);
                         return out(dst);
                       }});
    }
  }
}

void add_index_add(std::vector<Case>& cases, DType dt, DType it) {
  for (const Variant& v : index_variants(dt)) {
    for (int dim = 0; dim < v.shape.rank(); ++dim) {
      const bool oob = v.name == "out_of_range";
      const int64_t n = v.name == "empty" ? 0 : (v.shape.rank() == 1 ? 2000 : 8);
      cases.push_back({"index_add",
                       label(dt, it),
                       shape_label(v.shape, "dim " + std::to_string(dim)),
                       v.name,
                       OpCode::IndexAdd,
                       {dt, it},
                       is_float(dt) ? Compare::Float : Compare::Exact,
                       oob,
                       [=](Ctx& c) {
                         Arg x = c.input(dt, v.shape, v.form(0, 3), v.values);
                         Arg ids = c.indices(it, Shape{n}, v.shape[dim], true, oob);
                         Arg src = c.input(dt, with_dim(v.shape, dim, n), v.form(2, 3), v.values);
                         return out(c.backend().index_add(x.view(), ids.view(), src.view(), dim), dt);
                       }});
    }
  }
}

}  // namespace

void add_index_cases(std::vector<Case>& cases) {
  for (DType dt : kAllDTypes)
    for (DType it : index_dtypes_for(dt)) add_gather(cases, dt, it);
  for (DType dt : kAllDTypes)
    for (DType it : index_dtypes_for(dt)) add_index_select(cases, dt, it);
  for (bool add : {false, true})
    for (DType dt : kAllDTypes)
      for (DType it : index_dtypes_for(dt)) add_scatter(cases, dt, it, add);
  for (DType dt : kAllDTypes)
    for (DType it : index_dtypes_for(dt)) add_index_add(cases, dt, it);
}

}  // namespace wick::parity
