// The Python module `wick` (pybind11): tensors, their ops and operators, devices, the transformer
// ops (wick.nn), the GGUF block formats (wick.quant), the model runner (wick.Model), wick's errors
// as Python exceptions carrying wick's message, and DLPack to share memory with NumPy and PyTorch.
// Names follow the C++ API (docs/api.md); dtypes and devices are spelled as strings ("f32",
// "cuda:0").
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <sstream>
#include <variant>

#include "bindings.h"
#include "wick/models/engine.h"
#include "wick/models/generate.h"
#include "wick/models/model.h"
#include "wick/models/tensor_parallel.h"
#include "wick/models/tokenizer.h"
#include "wick/wick.h"

namespace wick::python {

DType dtype_arg(const std::string& name) {
  DType dt;
  WICK_CHECK(parse_dtype(name, &dt), DTypeError, "dtype", "unknown dtype \"", name,
             "\" (u8, u32, i16, i32, i64, bf16, f16, f32, f64, f8e4m3)");
  return dt;
}

Device device_arg(const std::string& text) {
  Device d;
  WICK_CHECK(Device::parse(text, &d), DeviceError, "device", "\"", text, "\" is not a device (cpu, cuda, cuda:1, rocm:0)");
  return d;
}

namespace {

// A Python number as a wick Scalar: bool and int as integers, float as a float.
Scalar scalar_arg(const py::handle& v, const char* op) {
  if (py::isinstance<py::bool_>(v)) return Scalar(v.cast<bool>());
  if (py::isinstance<py::int_>(v)) return Scalar(v.cast<int64_t>());
  if (py::isinstance<py::float_>(v)) return Scalar(v.cast<double>());
  throw py::type_error(std::string(op) + ": expected a wick.Tensor or a number, got " +
                       py::str(py::type::of(v)).cast<std::string>());
}

Shape shape_arg(const std::vector<int64_t>& dims) { return Shape(dims); }

// dim=None (every dim), an int, or a sequence of ints.
using DimArg = std::optional<std::variant<int64_t, std::vector<int64_t>>>;
Dims dims_arg(const std::variant<int64_t, std::vector<int64_t>>& d) {
  if (std::holds_alternative<int64_t>(d)) return Dims{std::get<int64_t>(d)};
  return Dims(std::get<std::vector<int64_t>>(d));
}

template <typename All, typename Some>
Tensor reduce(const Tensor& t, const DimArg& dim, bool keepdim, All all, Some some) {
  if (!dim) return keepdim ? some(t, [&] {
    Dims d;
    for (int i = 0; i < t.rank(); ++i) d.push_back(i);
    return d;
  }(), true) : all(t);
  return some(t, dims_arg(*dim), keepdim);
}

// numpy's dtype of a wick dtype that numpy holds, and back.
std::optional<DType> from_numpy_dtype(const py::dtype& d) {
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f' && size == 2) return DType::F16;
  if (kind == 'f' && size == 4) return DType::F32;
  if (kind == 'f' && size == 8) return DType::F64;
  if (kind == 'i' && size == 2) return DType::I16;
  if (kind == 'i' && size == 4) return DType::I32;
  if (kind == 'i' && size == 8) return DType::I64;
  if (kind == 'u' && size == 1) return DType::U8;
  if (kind == 'u' && size == 4) return DType::U32;
  if (kind == 'b') return DType::U8;
  return std::nullopt;
}

// wick.tensor(data, dtype=None, device="cpu"): a copy of a NumPy array, nested list or number.
Tensor tensor_from(const py::object& data, const std::optional<std::string>& dtype, const std::string& device) {
  py::module_ np = py::module_::import("numpy");
  py::array arr = np.attr("ascontiguousarray")(data);
  const std::optional<DType> numpy_dtype = from_numpy_dtype(arr.dtype());
  DType have = numpy_dtype.value_or(DType::F64);
  const DType want = dtype ? dtype_arg(*dtype) : have;
  if (!numpy_dtype || want != have) {
    // Through numpy's f64 or i64, then wick's cast to the dtype asked.
    const bool to_float = dtype ? is_float(want) : arr.dtype().kind() == 'f';
    arr = np.attr("ascontiguousarray")(arr, to_float ? "float64" : "int64");
    have = to_float ? DType::F64 : DType::I64;
  }
  std::vector<int64_t> shape(arr.shape(), arr.shape() + arr.ndim());
  Tensor t = Tensor::from_data(arr.data(), static_cast<int64_t>(arr.size()), have, Shape(shape), device_arg(device));
  return dtype && want != have ? t.to_dtype(want) : t;
}

py::object item(const Tensor& t) {
  if (is_float(t.dtype())) return py::float_(t.to_dtype(DType::F64).item<double>());
  return py::int_(t.to_dtype(DType::I64).item<int64_t>());
}

// t[i], t[a:b:c], t[i, a:b, ...]: select and slice along the leading dims.
Tensor getitem(const Tensor& t, const py::object& key) {
  py::tuple keys = py::isinstance<py::tuple>(key) ? key.cast<py::tuple>() : py::make_tuple(key);
  Tensor r = t;
  int64_t dim = 0;
  for (const py::handle& k : keys) {
    if (py::isinstance<py::slice>(k)) {
      size_t start, stop, step, len;
      if (!k.cast<py::slice>().compute(static_cast<size_t>(r.dim(dim)), &start, &stop, &step, &len))
        throw py::error_already_set();
      WICK_CHECK(static_cast<int64_t>(step) > 0, NotSupportedError, "getitem", "a negative step (wick's strides are >= 0)");
      r = r.slice(dim, static_cast<int64_t>(start), static_cast<int64_t>(start + len * step),
                  static_cast<int64_t>(step));
      ++dim;
    } else {
      int64_t i = k.cast<int64_t>();
      const int64_t n = r.dim(dim);
      if (i < -n || i >= n) throw py::index_error("index " + std::to_string(i) + " out of range for size " + std::to_string(n));
      r = r.select(dim, i < 0 ? i + n : i);
    }
  }
  return r;
}

std::string repr(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

// Sets the Python error of `type`: py::set_error since pybind11 2.12, the call operator before it.
template <typename T>
void raise(py::exception<T>& type, const char* message) {
#if PYBIND11_VERSION_HEX >= 0x020C0000
  py::set_error(type, message);
#else
  type(message);
#endif
}

struct Model {
  std::shared_ptr<const models::Model> model;
  models::Tokenizer tokenizer;
};

}  // namespace
}  // namespace wick::python

using namespace wick;
using namespace wick::python;

PYBIND11_MODULE(_wick, m) {
  m.doc() = "wick: tensors on CPU, CUDA and ROCm with the same ops and answers";

  // Errors: wick.Error (a RuntimeError) and one subclass per wick::Error kind.
  static py::exception<Error> base(m, "Error", PyExc_RuntimeError);
  static py::exception<ShapeError> shape_error(m, "ShapeError", base.ptr());
  static py::exception<DTypeError> dtype_error(m, "DTypeError", base.ptr());
  static py::exception<DeviceError> device_error(m, "DeviceError", base.ptr());
  static py::exception<IndexError> index_error(m, "IndexError", base.ptr());
  static py::exception<OutOfMemoryError> oom_error(m, "OutOfMemoryError", base.ptr());
  static py::exception<NotSupportedError> unsupported_error(m, "NotSupportedError", base.ptr());
  static py::exception<io::FormatError> format_error(m, "FormatError", base.ptr());
  static py::exception<dist::DistError> dist_error(m, "DistError", base.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ShapeError& e) {
      raise(shape_error, e.what());
    } catch (const DTypeError& e) {
      raise(dtype_error, e.what());
    } catch (const DeviceError& e) {
      raise(device_error, e.what());
    } catch (const IndexError& e) {
      raise(index_error, e.what());
    } catch (const OutOfMemoryError& e) {
      raise(oom_error, e.what());
    } catch (const NotSupportedError& e) {
      raise(unsupported_error, e.what());
    } catch (const io::FormatError& e) {
      raise(format_error, e.what());
    } catch (const dist::DistError& e) {
      raise(dist_error, e.what());
    } catch (const Error& e) {
      raise(base, e.what());
    }
  });

  m.def("version", &version);
  m.def("device_count", [](const std::string& type) {
    const Device d = device_arg(type);
    return device_count(d.type());
  }, py::arg("type") = "cuda", "Devices of a type present (\"cpu\", \"cuda\", \"rocm\").");
  m.def("backend_built", [](const std::string& type) { return backend_built(device_arg(type).type()); });
  m.def("available_devices", [] {
    std::vector<std::string> v;
    for (Device d : available_devices()) v.push_back(d.to_string());
    return v;
  });
  m.def("describe_device", [](const std::string& d) { return describe_device(device_arg(d)); });
  m.def("synchronize", [](const std::string& d) { synchronize(device_arg(d)); }, py::arg("device") = "cpu");
  m.def("memory_use", [](const std::string& d) {
    const MemoryUse use = memory_use(device_arg(d));
    py::dict out;
    out["in_use"] = use.in_use;
    out["peak"] = use.peak;
    return out;
  }, py::arg("device") = "cpu", "Bytes wick's allocator has handed out on the device: {'in_use': now, 'peak': the most since the start or reset_peak_memory}.");
  m.def("reset_peak_memory", [](const std::string& d) { reset_peak_memory(device_arg(d)); }, py::arg("device") = "cpu");
  m.def("manual_seed", [](uint64_t seed, const std::string& d) { manual_seed(seed, device_arg(d)); }, py::arg("seed"),
        py::arg("device") = "cpu");
  m.def("set_allow_tf32", &set_allow_tf32);
  m.def("native_stream", [](const std::string& d) { return reinterpret_cast<uintptr_t>(native_stream(device_arg(d))); },
        "The cudaStream_t / hipStream_t wick queues the device's work on, as an int.");

  py::class_<Tensor> t(m, "Tensor");
  t.def_property_readonly("shape", [](const Tensor& x) { return py::tuple(py::cast(x.shape().to_vector())); })
      .def_property_readonly("strides", [](const Tensor& x) { return py::tuple(py::cast(x.strides().to_vector())); })
      .def_property_readonly("offset", &Tensor::offset)
      .def_property_readonly("ndim", &Tensor::rank)
      .def_property_readonly("dtype", [](const Tensor& x) { return std::string(dtype_name(x.dtype())); })
      .def_property_readonly("device", [](const Tensor& x) { return x.device().to_string(); })
      .def_property_readonly("data_ptr", [](const Tensor& x) { return reinterpret_cast<uintptr_t>(x.data_ptr()); })
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("__len__", [](const Tensor& x) { return x.dim(0); })
      .def("__repr__", &repr)
      .def("__getitem__", &getitem)
      .def("__iter__", [](const Tensor& x) {
        py::list l;
        for (int64_t i = 0; i < x.dim(0); ++i) l.append(x.select(0, i));
        return l.attr("__iter__")();
      })
      .def("item", &item)
      .def("tolist", [](const Tensor& x) { return py::module_::import("numpy").attr("from_dlpack")(
                                               x.to_device(Device::cpu()).to_dtype(is_float(x.dtype()) ? DType::F64 : DType::I64)).attr("tolist")(); })
      .def("numpy", [](const Tensor& x) {
        // Shares the memory of a CPU tensor (numpy.from_dlpack); a GPU tensor is copied to the CPU first.
        return py::module_::import("numpy").attr("from_dlpack")(x.to_device(Device::cpu()));
      })
      // DLPack's keywords as of the Python array API: max_version is met with the unversioned
      // capsule (DLPack 0.6, which every consumer takes), copy=True lends a copy, and dl_device
      // must be the tensor's own.
      .def("__dlpack__", [](const Tensor& x, const py::object&, const py::object&, const py::object& dl_device,
                            const py::object& copy) {
        if (!dl_device.is_none() && !dl_device.equal(dlpack_device(x)))
          throw py::buffer_error("__dlpack__: dl_device must be the tensor's own device " +
                                 py::str(dlpack_device(x)).cast<std::string>() + " (copy it with .to() first)");
        return to_dlpack(!copy.is_none() && copy.cast<bool>() ? x.copy() : x);
      }, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
         py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", &dlpack_device)
      // dtype and device
      .def("to", [](const Tensor& x, const std::string& to) {
        DType dt;
        return parse_dtype(to, &dt) ? x.to_dtype(dt) : x.to_device(device_arg(to));
      }, "A dtype (\"bf16\") or a device (\"cuda:0\").")
      .def("to_dtype", [](const Tensor& x, const std::string& dt) { return x.to_dtype(dtype_arg(dt)); })
      .def("to_device", [](const Tensor& x, const std::string& d) { return x.to_device(device_arg(d)); })
      .def("cpu", [](const Tensor& x) { return x.to_device(Device::cpu()); })
      .def("cuda", [](const Tensor& x, int i) { return x.to_device(Device::cuda(i)); }, py::arg("index") = 0)
      .def("contiguous", &Tensor::contiguous)
      .def("copy", &Tensor::copy)
      .def("clone", &Tensor::copy)
      // views
      .def("narrow", &Tensor::narrow)
      .def("slice", &Tensor::slice, py::arg("dim"), py::arg("start"), py::arg("end"), py::arg("step") = 1)
      .def("select", &Tensor::select)
      .def("transpose", &Tensor::transpose)
      .def("t", &Tensor::t)
      .def("permute", [](const Tensor& x, const std::vector<int64_t>& d) { return x.permute(d); })
      .def("broadcast_as", [](const Tensor& x, const std::vector<int64_t>& s) { return x.broadcast_as(shape_arg(s)); })
      .def("expand", [](const Tensor& x, const std::vector<int64_t>& s) { return x.broadcast_as(shape_arg(s)); })
      .def("squeeze", [](const Tensor& x, std::optional<int64_t> d) { return d ? x.squeeze(*d) : x.squeeze(); },
           py::arg("dim") = py::none())
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("reshape", [](const Tensor& x, const std::vector<int64_t>& s) { return x.reshape(shape_arg(s)); })
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("chunk", &Tensor::chunk, py::arg("chunks"), py::arg("dim") = 0)
      .def("split", [](const Tensor& x, int64_t n, int64_t d) { return x.split(n, d); }, py::arg("split_size"),
           py::arg("dim") = 0)
      // elementwise with arguments
      .def("affine", &Tensor::affine)
      .def("powf", &Tensor::powf)
      .def("elu", &Tensor::elu)
      .def("clamp", [](const Tensor& x, const py::object& lo, const py::object& hi) {
        return x.clamp(scalar_arg(lo, "clamp"), scalar_arg(hi, "clamp"));
      })
      .def("where_cond", &Tensor::where_cond)
      // reductions
      .def("var", [](const Tensor& x, const std::variant<int64_t, std::vector<int64_t>>& d, bool k) {
        return x.var(dims_arg(d), k);
      }, py::arg("dim"), py::arg("keepdim") = false)
      .def("argmax", &Tensor::argmax, py::arg("dim"), py::arg("keepdim") = false)
      .def("argmin", &Tensor::argmin, py::arg("dim"), py::arg("keepdim") = false)
      .def("cumsum", &Tensor::cumsum)
      .def("argsort", &Tensor::argsort, py::arg("ascending") = true)
      .def("sort", &Tensor::sort, py::arg("ascending") = true)
      // products, convolution, pooling, upsampling
      .def("matmul", &Tensor::matmul)
      .def("__matmul__", &Tensor::matmul)
      .def("dot", &Tensor::dot)
      .def("mv", &Tensor::mv)
      .def("conv1d", [](const Tensor& x, const Tensor& k, int64_t padding, int64_t stride, int64_t dilation, int64_t groups) {
        return x.conv1d(k, {padding, stride, dilation, 0, groups});
      }, py::arg("kernel"), py::arg("padding") = 0, py::arg("stride") = 1, py::arg("dilation") = 1, py::arg("groups") = 1)
      .def("conv_transpose1d", [](const Tensor& x, const Tensor& k, int64_t padding, int64_t stride, int64_t dilation,
                                  int64_t output_padding, int64_t groups) {
        return x.conv_transpose1d(k, {padding, stride, dilation, output_padding, groups});
      }, py::arg("kernel"), py::arg("padding") = 0, py::arg("stride") = 1, py::arg("dilation") = 1,
         py::arg("output_padding") = 0, py::arg("groups") = 1)
      .def("conv2d", [](const Tensor& x, const Tensor& k, std::pair<int64_t, int64_t> padding, std::pair<int64_t, int64_t> stride,
                        std::pair<int64_t, int64_t> dilation, int64_t groups) {
        Conv2dOptions o;
        o.padding = {padding.first, padding.second};
        o.stride = {stride.first, stride.second};
        o.dilation = {dilation.first, dilation.second};
        o.groups = groups;
        return x.conv2d(k, o);
      }, py::arg("kernel"), py::arg("padding") = std::pair<int64_t, int64_t>{0, 0},
         py::arg("stride") = std::pair<int64_t, int64_t>{1, 1}, py::arg("dilation") = std::pair<int64_t, int64_t>{1, 1},
         py::arg("groups") = 1)
      .def("conv_transpose2d", [](const Tensor& x, const Tensor& k, std::pair<int64_t, int64_t> padding,
                                  std::pair<int64_t, int64_t> stride, std::pair<int64_t, int64_t> dilation,
                                  std::pair<int64_t, int64_t> output_padding, int64_t groups) {
        Conv2dOptions o;
        o.padding = {padding.first, padding.second};
        o.stride = {stride.first, stride.second};
        o.dilation = {dilation.first, dilation.second};
        o.output_padding = {output_padding.first, output_padding.second};
        o.groups = groups;
        return x.conv_transpose2d(k, o);
      }, py::arg("kernel"), py::arg("padding") = std::pair<int64_t, int64_t>{0, 0},
         py::arg("stride") = std::pair<int64_t, int64_t>{1, 1}, py::arg("dilation") = std::pair<int64_t, int64_t>{1, 1},
         py::arg("output_padding") = std::pair<int64_t, int64_t>{0, 0}, py::arg("groups") = 1)
      .def("avg_pool2d", [](const Tensor& x, std::pair<int64_t, int64_t> k, std::optional<std::pair<int64_t, int64_t>> s) {
        const auto st = s.value_or(k);
        return x.avg_pool2d({k.first, k.second}, {st.first, st.second});
      }, py::arg("kernel"), py::arg("stride") = py::none())
      .def("max_pool2d", [](const Tensor& x, std::pair<int64_t, int64_t> k, std::optional<std::pair<int64_t, int64_t>> s) {
        const auto st = s.value_or(k);
        return x.max_pool2d({k.first, k.second}, {st.first, st.second});
      }, py::arg("kernel"), py::arg("stride") = py::none())
      .def("upsample_nearest1d", &Tensor::upsample_nearest1d)
      .def("upsample_nearest2d", &Tensor::upsample_nearest2d)
      .def("upsample_bilinear2d", &Tensor::upsample_bilinear2d, py::arg("height"), py::arg("width"),
           py::arg("align_corners") = false)
      // indexing
      .def("index_select", &Tensor::index_select)
      .def("gather", &Tensor::gather)
      .def("scatter", &Tensor::scatter)
      .def("scatter_add", &Tensor::scatter_add)
      .def("index_add", &Tensor::index_add)
      .def("pad_with_zeros", &Tensor::pad_with_zeros)
      // in place
      .def("fill_", [](Tensor& x, const py::object& v) { x.fill(scalar_arg(v, "fill_")); return x; })
      .def("zero_", [](Tensor& x) { x.zero(); return x; })
      .def("copy_", [](Tensor& x, const Tensor& src) { x.copy_from(src); return x; })
      .def("slice_set", &Tensor::slice_set)
      .def("scatter_set", &Tensor::scatter_set)
      .def("scatter_add_set", &Tensor::scatter_add_set);

  // sum, mean, max, min: over every dim (dim=None), one, or several.
#define WICK_REDUCE(name)                                                                      \
  t.def(#name, [](const Tensor& x, const DimArg& d, bool k) {                                  \
    return reduce(x, d, k, [](const Tensor& a) { return a.name(); },                           \
                  [](const Tensor& a, const Dims& ds, bool kd) { return a.name(ds, kd); });    \
  }, py::arg("dim") = py::none(), py::arg("keepdim") = false);
  WICK_REDUCE(sum) WICK_REDUCE(mean) WICK_REDUCE(max) WICK_REDUCE(min)
#undef WICK_REDUCE

#define WICK_UNARY(name) t.def(#name, &Tensor::name);
  WICK_UNARY(exp) WICK_UNARY(log) WICK_UNARY(sin) WICK_UNARY(cos) WICK_UNARY(tanh) WICK_UNARY(abs) WICK_UNARY(neg)
  WICK_UNARY(recip) WICK_UNARY(sqr) WICK_UNARY(sqrt) WICK_UNARY(gelu) WICK_UNARY(gelu_erf) WICK_UNARY(erf)
  WICK_UNARY(relu) WICK_UNARY(silu) WICK_UNARY(sigmoid) WICK_UNARY(floor) WICK_UNARY(ceil) WICK_UNARY(round)
  WICK_UNARY(sign)
#undef WICK_UNARY
  t.def("__neg__", &Tensor::neg).def("__abs__", &Tensor::abs);

  // Binary ops with a tensor or a number, as methods and operators.
#define WICK_BINARY(name, dunder)                                                                       \
  t.def(#name, [](const Tensor& a, const py::object& b) {                                              \
    return py::isinstance<Tensor>(b) ? a.name(b.cast<const Tensor&>()) : a.name(scalar_arg(b, #name)); \
  });                                                                                                  \
  if (*dunder) t.def(dunder, [](const Tensor& a, const py::object& b) {                                \
    return py::isinstance<Tensor>(b) ? a.name(b.cast<const Tensor&>()) : a.name(scalar_arg(b, #name)); \
  });
  WICK_BINARY(add, "__add__") WICK_BINARY(sub, "__sub__") WICK_BINARY(mul, "__mul__") WICK_BINARY(div, "__truediv__")
  WICK_BINARY(maximum, "") WICK_BINARY(minimum, "") WICK_BINARY(eq, "__eq__") WICK_BINARY(ne, "__ne__")
  WICK_BINARY(lt, "__lt__") WICK_BINARY(le, "__le__") WICK_BINARY(gt, "__gt__") WICK_BINARY(ge, "__ge__")
#undef WICK_BINARY
  t.def("__radd__", [](const Tensor& a, const py::object& b) { return scalar_arg(b, "add") + a; })
      .def("__rsub__", [](const Tensor& a, const py::object& b) { return scalar_arg(b, "sub") - a; })
      .def("__rmul__", [](const Tensor& a, const py::object& b) { return scalar_arg(b, "mul") * a; })
      .def("__rtruediv__", [](const Tensor& a, const py::object& b) { return scalar_arg(b, "div") / a; });
  // Tensors compare elementwise (__eq__ gives a tensor), so they are not hashable, as in PyTorch.
  t.attr("__hash__") = py::none();

  // ---- creation ----
  m.def("tensor", &tensor_from, py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = "cpu",
        "A copy of a NumPy array, nested list or number; dtype: numpy's unless given.");
  m.def("from_dlpack", &from_dlpack, py::arg("obj"),
        "A tensor over the memory of a DLPack producer (NumPy, PyTorch, ...), no copy.");
  m.def("zeros", [](const std::vector<int64_t>& s, const std::string& dt, const std::string& d) {
    return Tensor::zeros(shape_arg(s), dtype_arg(dt), device_arg(d));
  }, py::arg("shape"), py::arg("dtype") = "f32", py::arg("device") = "cpu");
  m.def("ones", [](const std::vector<int64_t>& s, const std::string& dt, const std::string& d) {
    return Tensor::ones(shape_arg(s), dtype_arg(dt), device_arg(d));
  }, py::arg("shape"), py::arg("dtype") = "f32", py::arg("device") = "cpu");
  m.def("full", [](const std::vector<int64_t>& s, const py::object& v, const std::string& dt, const std::string& d) {
    return Tensor::full(shape_arg(s), scalar_arg(v, "full"), dtype_arg(dt), device_arg(d));
  }, py::arg("shape"), py::arg("value"), py::arg("dtype") = "f32", py::arg("device") = "cpu");
  m.def("arange", [](const py::object& start, const py::object& end, const py::object& step, const std::string& dt,
                     const std::string& d) {
    return Tensor::arange(scalar_arg(start, "arange"), scalar_arg(end, "arange"), scalar_arg(step, "arange"),
                          dtype_arg(dt), device_arg(d));
  }, py::arg("start"), py::arg("end"), py::arg("step") = 1, py::arg("dtype") = "i64", py::arg("device") = "cpu");
  m.def("eye", [](int64_t n, const std::string& dt, const std::string& d) {
    return Tensor::eye(n, dtype_arg(dt), device_arg(d));
  }, py::arg("n"), py::arg("dtype") = "f32", py::arg("device") = "cpu");
  m.def("rand", [](const std::vector<int64_t>& s, double lo, double up, const std::string& dt, const std::string& d) {
    return Tensor::rand_uniform(shape_arg(s), lo, up, dtype_arg(dt), device_arg(d));
  }, py::arg("shape"), py::arg("lo") = 0.0, py::arg("up") = 1.0, py::arg("dtype") = "f32", py::arg("device") = "cpu");
  m.def("randn", [](const std::vector<int64_t>& s, double mean, double std, const std::string& dt, const std::string& d) {
    return Tensor::rand_normal(shape_arg(s), mean, std, dtype_arg(dt), device_arg(d));
  }, py::arg("shape"), py::arg("mean") = 0.0, py::arg("std") = 1.0, py::arg("dtype") = "f32", py::arg("device") = "cpu");
  m.def("cat", &cat, py::arg("tensors"), py::arg("dim") = 0);
  m.def("stack", &stack, py::arg("tensors"), py::arg("dim") = 0);
  m.def("embedding", &embedding);
  m.def("where", &where_cond);

  // ---- wick.nn ----
  py::module_ nnm = m.def_submodule("nn", "Transformer ops (wick/nn.h)");
  nnm.def("softmax", &nn::softmax, py::arg("x"), py::arg("dim") = -1);
  nnm.def("log_softmax", &nn::log_softmax, py::arg("x"), py::arg("dim") = -1);
  nnm.def("rms_norm", &nn::rms_norm, py::arg("x"), py::arg("weight"), py::arg("eps") = 1e-5);
  nnm.def("add_rms_norm", [](const Tensor& x, const Tensor& residual, const Tensor& w, double eps) {
    nn::AddRmsNorm r = nn::add_rms_norm(x, residual, w, eps);
    return py::make_tuple(r.sum, r.normed);
  }, py::arg("x"), py::arg("residual"), py::arg("weight"), py::arg("eps") = 1e-5);
  nnm.def("silu_mul", &nn::silu_mul, py::arg("gate"), py::arg("up"));
  nnm.def("layer_norm", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, double eps) {
    return b ? nn::layer_norm(x, w, *b, eps) : nn::layer_norm(x, w, eps);
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  nnm.def("rope", &nn::rope);
  nnm.def("rope_i", &nn::rope_i);
  nnm.def("rope_thd", &nn::rope_thd);
  nnm.def("rope_tables", [](int64_t head_dim, int64_t tokens, double theta, int64_t offset, const std::string& dt,
                           const std::string& d) {
    nn::RopeTables r = nn::rope_tables(head_dim, tokens, theta, offset, dtype_arg(dt), device_arg(d));
    return py::make_tuple(r.cos, r.sin);
  }, py::arg("head_dim"), py::arg("tokens"), py::arg("theta") = 10000.0, py::arg("offset") = 0, py::arg("dtype") = "f32",
     py::arg("device") = "cpu", "(cos, sin), each (tokens, head_dim / 2).");
  nnm.def("scaled_dot_product_attention", [](const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                            std::optional<double> scale, const std::optional<Tensor>& mask, int64_t window) {
    nn::AttentionOptions o;
    o.causal = causal;
    o.scale = scale;
    if (mask) o.mask = *mask;
    o.window = window;
    return nn::scaled_dot_product_attention(q, k, v, o);
  }, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal") = false, py::arg("scale") = py::none(),
     py::arg("mask") = py::none(), py::arg("window") = 0);

  // ---- wick.quant ----
  py::module_ qm = m.def_submodule("quant", "GGUF block formats (wick/quant.h)");
  auto qtype_arg = [](const std::string& name) {
    const std::optional<quant::QType> q = quant::parse_qtype(name);
    WICK_CHECK(q.has_value(), DTypeError, "quant", "unknown block format \"", name, "\" (q4_0, q8_0, q4_k, q6_k, ...)");
    return *q;
  };
  py::class_<quant::QTensor>(qm, "QTensor")
      .def_property_readonly("qtype", [](const quant::QTensor& q) { return std::string(quant::qtype_name(q.qtype())); })
      .def_property_readonly("rows", &quant::QTensor::rows)
      .def_property_readonly("cols", &quant::QTensor::cols)
      .def_property_readonly("device", [](const quant::QTensor& q) { return q.device().to_string(); })
      .def_property_readonly("nbytes", &quant::QTensor::nbytes)
      .def("bytes", &quant::QTensor::bytes, "The packed blocks, a u8 tensor (GGUF's bytes).")
      .def("to_device", [](const quant::QTensor& q, const std::string& d) { return q.to_device(device_arg(d)); });
  qm.def("from_blocks", [qtype_arg](const std::string& qtype, int64_t rows, int64_t cols, const py::bytes& data,
                                    const std::string& d) {
    const std::string_view b = data;
    return quant::QTensor::from_blocks(qtype_arg(qtype), rows, cols, b.data(), static_cast<int64_t>(b.size()), device_arg(d));
  }, py::arg("qtype"), py::arg("rows"), py::arg("cols"), py::arg("data"), py::arg("device") = "cpu");
  qm.def("quantize", [qtype_arg](const Tensor& w, const std::string& qtype) { return quant::quantize(w, qtype_arg(qtype)); });
  qm.def("dequantize", [](const quant::QTensor& q, const std::string& dt) { return quant::dequantize(q, dtype_arg(dt)); },
         py::arg("w"), py::arg("dtype") = "f32");
  qm.def("qmatmul", &quant::qmatmul);

  // ---- the model runner ----
  py::class_<Model>(m, "Model", "A model and its tokenizer, from a GGUF file or a checkpoint folder.")
      .def(py::init([](const std::string& path, const std::string& device, const std::optional<std::string>& dtype,
                       const std::optional<std::vector<std::string>>& devices) {
        const models::ModelFile file = models::ModelFile::open(path);
        models::LoadOptions o;
        o.device = device_arg(device);
        if (dtype) o.dtype = dtype_arg(*dtype);
        if (!devices) return Model{file.load(o), file.tokenizer()};
        std::vector<Device> ds;
        for (const std::string& d : *devices) ds.push_back(device_arg(d));
        return Model{models::TensorParallelModel::load(file, ds, o), file.tokenizer()};
      }), py::arg("path"), py::arg("device") = "cpu", py::arg("dtype") = py::none(), py::arg("devices") = py::none(),
      "dtype: the activations' (f32, f16, bf16); None: bf16 on a GPU; on the CPU f16 or bf16 for a file stored so, else f32. devices: a list of at least "
      "2 devices (which may repeat) to split the model over (tensor parallel), run as one model; device is then "
      "unused.")
      .def("encode", [](const Model& w, const std::string& text) { return w.tokenizer.encode(text); })
      .def("decode", [](const Model& w, const std::vector<int32_t>& ids) { return w.tokenizer.decode(ids); })
      .def("generate", [](const Model& w, const std::string& prompt, int64_t max_tokens, double temperature,
                          int64_t top_k, double top_p, double min_p, double repetition_penalty, uint64_t seed,
                          const std::optional<py::function>& on_token) {
        models::GenerateOptions g;
        g.max_tokens = max_tokens;
        g.sampling = {temperature, top_k, top_p, min_p, repetition_penalty, 64, seed};
        const std::vector<std::vector<int32_t>> prompts{w.tokenizer.encode(prompt)};
        models::TextStream stream(w.tokenizer);
        std::string text;
        auto each = [&](int64_t, int32_t token) {
          std::string piece = stream.push(token);
          text += piece;
          if (!on_token) return true;
          py::gil_scoped_acquire gil;
          py::object r = (*on_token)(py::bytes(piece).attr("decode")("utf-8", "replace"), token);
          return r.is_none() || r.cast<bool>();
        };
        {
          py::gil_scoped_release nogil;
          models::generate(*w.model, prompts, g, each, &w.tokenizer);
        }
        return text + stream.finish();
      }, py::arg("prompt"), py::arg("max_tokens") = 128, py::arg("temperature") = 0.0, py::arg("top_k") = 0,
         py::arg("top_p") = 1.0, py::arg("min_p") = 0.0, py::arg("repetition_penalty") = 1.0, py::arg("seed") = 0,
         py::arg("on_token") = py::none(),
         "The text generated after `prompt`; on_token(text, token), where given, sees each piece as it comes and "
         "stops generation by returning False.");

  // ---- the engine ----
  py::class_<models::Piece>(m, "Piece", "What a request made since its last piece (Engine.next).")
      .def_readonly("request", &models::Piece::request)
      .def_readonly("token", &models::Piece::token, "the new token, or -1")
      .def_property_readonly(
          "text", [](const models::Piece& p) { return py::bytes(p.text).attr("decode")("utf-8", "replace"); })
      .def_property_readonly(
          "finish",
          [](const models::Piece& p) -> py::object {
            if (p.finish == models::Finish::None) return py::none();
            return py::str(models::finish_name(p.finish));
          },
          "None, or in a request's last piece: \"length\", \"stop\", \"cancelled\" or \"error\"")
      .def_readonly("error", &models::Piece::error)
      .def_readonly("logprob", &models::Piece::logprob,
                    "the token's log-probability, where the request asked for logprobs")
      .def_readonly("top_logprobs", &models::Piece::top_logprobs,
                    "[(token, log-probability)] of the likeliest tokens, likeliest first, where asked")
      .def("__repr__", [](const models::Piece& p) {
        return "Piece(request=" + std::to_string(p.request) + ", token=" + std::to_string(p.token) + ", text=" +
               py::repr(py::bytes(p.text).attr("decode")("utf-8", "replace")).cast<std::string>() +
               (p.finish == models::Finish::None ? std::string() : std::string(", finish=") + models::finish_name(p.finish)) + ")";
      });
  py::class_<models::Engine, std::shared_ptr<models::Engine>>(
      m, "Engine", "Many requests served at once by one model (continuous batching over a paged KV cache).")
      .def(py::init([](const Model& w, int64_t block_size, int64_t blocks, int64_t kv_memory, int64_t step_tokens,
                       int64_t max_running, bool prefix_cache, bool deterministic, double kv_fraction,
                       const std::string& kv_type) {
             models::EngineOptions o;
             o.block_size = block_size;
             o.blocks = blocks;
             o.kv_memory = kv_memory;
             o.step_tokens = step_tokens;
             o.max_running = max_running;
             o.prefix_cache = prefix_cache;
             o.deterministic = deterministic;
             o.kv_fraction = kv_fraction;
             if (!models::parse_kv_type(kv_type, o.kv_type))
               throw ShapeError("Engine: kv_type '" + kv_type + "' is neither 'model' nor 'q8_0'");
             return std::make_shared<models::Engine>(w.model, o);
           }),
           py::arg("model"), py::arg("block_size") = 16, py::arg("blocks") = 0, py::arg("kv_memory") = 0,
           py::arg("step_tokens") = 512, py::arg("max_running") = 64, py::arg("prefix_cache") = true,
           py::arg("deterministic") = false, py::arg("kv_fraction") = 0.0, py::arg("kv_type") = "model",
           "blocks: the KV pool's; 0: as many as kv_memory bytes hold, else kv_fraction of the device's free memory, "
           "else 1 GiB on the CPU and a quarter of a GPU's free memory. "
           "deterministic: batch-invariant steps, each request's tokens and logits the same bits as alone. "
           "kv_type: 'model' (keys and values in the model's dtype) or 'q8_0' (in Q8_0 rows, about half the bytes).")
      .def(
          "submit",
          [](models::Engine& e, const std::optional<std::string>& prompt,
             const std::optional<std::vector<int32_t>>& ids, int64_t max_tokens, double temperature, int64_t top_k,
             double top_p, double min_p, double repetition_penalty, uint64_t seed, const std::vector<std::string>& stop,
             bool stop_at_end, double presence_penalty, double frequency_penalty, int64_t logprobs) {
            WICK_CHECK(prompt.has_value() != ids.has_value(), Error, "Engine.submit",
                       "give one of prompt (text) and ids");
            models::Request r;
            if (prompt) r.text = *prompt;
            if (ids) r.prompt = *ids;
            r.max_tokens = max_tokens;
            r.sampling = {temperature,      top_k, top_p, min_p, repetition_penalty, 64, seed, presence_penalty,
                          frequency_penalty};
            r.stop_strings = stop;
            r.stop_at_end = stop_at_end;
            r.logprobs = logprobs;
            return e.submit(std::move(r));
          },
          py::arg("prompt") = py::none(), py::kw_only(), py::arg("ids") = py::none(), py::arg("max_tokens") = 128,
          py::arg("temperature") = 0.0, py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("min_p") = 0.0,
          py::arg("repetition_penalty") = 1.0, py::arg("seed") = 0, py::arg("stop") = std::vector<std::string>{},
          py::arg("stop_at_end") = true, py::arg("presence_penalty") = 0.0, py::arg("frequency_penalty") = 0.0,
          py::arg("logprobs") = -1,
          "Queues a request (text, or token ids) and returns its id. logprobs: -1 none; 0..20: each piece's "
          "logprob, and that many likeliest tokens' in its top_logprobs.")
      .def(
          "next",
          [](models::Engine& e, int64_t id, std::optional<double> timeout) -> std::optional<models::Piece> {
            models::Piece p;
            bool got;
            {
              py::gil_scoped_release nogil;
              const auto wait = timeout ? std::chrono::milliseconds(static_cast<int64_t>(*timeout * 1000))
                                        : std::chrono::milliseconds::max();
              got = e.next(id, p, wait);
            }
            if (!got) return std::nullopt;
            return p;
          },
          py::arg("id"), py::arg("timeout") = py::none(),
          "The request's next piece, waiting up to timeout seconds (None: until it comes; the GIL is released "
          "meanwhile); None where none came, or the request is unknown or finished.")
      .def("cancel", &models::Engine::cancel, py::arg("id"), "Stops a request; False if unknown or finished.")
      .def(
          "stats",
          [](const models::Engine& e) {
            const models::EngineStats s = e.stats();
            py::dict d;
            d["running"] = s.running, d["waiting"] = s.waiting, d["finished"] = s.finished;
            d["blocks"] = s.blocks, d["blocks_used"] = s.blocks_used, d["blocks_cached"] = s.blocks_cached;
            d["blocks_free"] = s.blocks_free, d["prompt_tokens"] = s.prompt_tokens;
            d["prefix_hit_tokens"] = s.prefix_hit_tokens, d["computed_tokens"] = s.computed_tokens;
            d["generated_tokens"] = s.generated_tokens, d["steps"] = s.steps, d["preemptions"] = s.preemptions;
            d["first_token_seconds"] = s.first_token_seconds, d["first_tokens"] = s.first_tokens;
            d["between_tokens_seconds"] = s.between_tokens_seconds, d["token_gaps"] = s.token_gaps;
            return d;
          },
          "The engine's counters, as a dict.");
}
