// GGUF files (include/wick/io.h): the reader over mapped or owned bytes, and the writer. The layout
// (version 2 and 3, little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count; the
// metadata (string key, u32 type, value); the tensor infos (string name, u32 dims, u64 dims each,
// u32 ggml type, u64 offset); padding to the alignment; the data section. Strings are a u64 length
// and bytes. Every count and length is checked against the bytes left before anything is sized by
// it, so a hostile file costs no more memory than its own size.
#include <algorithm>
#include <cstring>

#include "core/checked.h"
#include "core/dispatch.h"
#include "io/file_bytes.h"
#include "wick/io.h"

namespace wick::io {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;               // ggml's GGML_MAX_DIMS
constexpr int kMaxDepth = 4;              // arrays of arrays
// Metadata values a file may hold, array items included: each takes about 60 bytes once parsed, so
// that a hostile file of small items cannot ask for 60 times its size. Real files hold a few
// hundred thousand (a tokenizer's tokens, scores and merges).
constexpr int64_t kMaxValues = int64_t{1} << 24;
constexpr int64_t kDefaultAlignment = 32;

// ggml's type numbers of the dtypes GGUF holds.
struct DtypeCode {
  uint32_t ggml;
  DType dtype;
};
constexpr DtypeCode kDtypeCodes[] = {{0, DType::F32},  {1, DType::F16},  {30, DType::BF16}, {25, DType::I16},
                                     {26, DType::I32}, {27, DType::I64}, {28, DType::F64}};

[[noreturn]] void fail(const std::string& file, std::string_view field, std::string_view what) {
  throw FormatError(detail::str_cat("gguf: ", file, ": ", field, ": ", what));
}

// The smallest encoding of a value of each type, to bound counts by the bytes left.
int64_t min_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::Bool: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: case GgufType::String: return 8;
    case GgufType::Array: return 12;
  }
  return 1;
}

bool known(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::F64); }

// Reads little-endian fields, checking each against the bytes left.
class Cursor {
 public:
  Cursor(const uint8_t* data, int64_t size, const std::string& file) : data_(data), size_(size), file_(file) {}

  int64_t at() const { return at_; }
  int64_t left() const { return size_ - at_; }
  const std::string& file() const { return file_; }

  template <typename T>
  T read(std::string_view field) {
    if (left() < static_cast<int64_t>(sizeof(T)))
      fail(file_, field, detail::str_cat("the file ends at byte ", size_, " (", sizeof(T), " bytes needed at ", at_, ")"));
    T v;
    std::memcpy(&v, data_ + at_, sizeof v);
    at_ += static_cast<int64_t>(sizeof v);
    return v;
  }

  // A count of items of at least `each` bytes that must fit in the bytes left.
  int64_t count(std::string_view field, int64_t each) {
    const uint64_t n = read<uint64_t>(field);
    if (n > static_cast<uint64_t>(left() / each))
      fail(file_, field, detail::str_cat("count ", n, " cannot fit in the ", left(), " bytes left"));
    return static_cast<int64_t>(n);
  }

  std::string string(std::string_view field) {
    const int64_t n = count(field, 1);
    std::string s(reinterpret_cast<const char*>(data_ + at_), static_cast<size_t>(n));
    at_ += n;
    return s;
  }

  GgufValue value(GgufType type, std::string_view field, int depth) {
    if (++values_ > kMaxValues) fail(file_, field, detail::str_cat("more than ", kMaxValues, " metadata values in the file"));
    switch (type) {
      case GgufType::U8: return {type, uint64_t{read<uint8_t>(field)}};
      case GgufType::I8: return {type, int64_t{read<int8_t>(field)}};
      case GgufType::U16: return {type, uint64_t{read<uint16_t>(field)}};
      case GgufType::I16: return {type, int64_t{read<int16_t>(field)}};
      case GgufType::U32: return {type, uint64_t{read<uint32_t>(field)}};
      case GgufType::I32: return {type, int64_t{read<int32_t>(field)}};
      case GgufType::F32: return {type, double{read<float>(field)}};
      case GgufType::U64: return {type, read<uint64_t>(field)};
      case GgufType::I64: return {type, read<int64_t>(field)};
      case GgufType::F64: return {type, read<double>(field)};
      case GgufType::Bool: {
        const uint8_t b = read<uint8_t>(field);
        if (b > 1) fail(file_, field, detail::str_cat("bool byte ", int{b}, " is neither 0 nor 1"));
        return {type, b == 1};
      }
      case GgufType::String: return {type, string(field)};
      case GgufType::Array: {
        if (depth >= kMaxDepth) fail(file_, field, detail::str_cat("arrays nested deeper than ", kMaxDepth));
        const uint32_t t = read<uint32_t>(field);
        if (!known(t)) fail(file_, field, detail::str_cat("unknown array element type ", t));
        GgufArray a{static_cast<GgufType>(t), {}};
        const int64_t n = count(field, min_bytes(a.type));
        if (n > kMaxValues - values_) fail(file_, field, detail::str_cat("more than ", kMaxValues, " metadata values in the file"));
        a.items.reserve(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) a.items.push_back(value(a.type, field, depth + 1));
        return {type, std::move(a)};
      }
    }
    fail(file_, field, detail::str_cat("unknown value type ", static_cast<uint32_t>(type)));
  }

 private:
  const uint8_t* data_;
  int64_t size_;
  int64_t at_ = 0;
  int64_t values_ = 0;
  const std::string& file_;
};

int64_t align_up(int64_t v, int64_t a, const std::string& file) {
  const int64_t r = checked::add(v, a - 1, "gguf", " (", file, ")");
  return r / a * a;
}

}  // namespace

// ---- values -------------------------------------------------------------------------------------

std::string_view gguf_type_name(GgufType type) {
  static constexpr std::string_view names[] = {"u8",  "i8",  "u16",    "i16",   "u32", "i32", "f32",
                                               "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(names) ? names[i] : "unknown";
}

namespace {
[[noreturn]] void wrong_type(std::string_view key, GgufType have, std::string_view want) {
  throw FormatError(detail::str_cat("gguf: ", key, ": a ", gguf_type_name(have), " where ", want, " was expected"));
}
}  // namespace

int64_t GgufValue::as_int(std::string_view key) const {
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&value)) {
    if (*u > static_cast<uint64_t>(checked::kMax)) wrong_type(key, type, "an integer below 2^63");
    return static_cast<int64_t>(*u);
  }
  wrong_type(key, type, "an integer");
}

double GgufValue::as_float(std::string_view key) const {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  wrong_type(key, type, "f32 or f64");
}

bool GgufValue::as_bool(std::string_view key) const {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  wrong_type(key, type, "bool");
}

const std::string& GgufValue::as_string(std::string_view key) const {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  wrong_type(key, type, "string");
}

const GgufArray& GgufValue::as_array(std::string_view key) const {
  if (const auto* a = std::get_if<GgufArray>(&value)) return *a;
  wrong_type(key, type, "array");
}

// ---- reading ------------------------------------------------------------------------------------

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.bytes_ = impl::FileBytes::map(path, "gguf");
  f.name_ = path;
  f.parse_all();
  return f;
}

GgufFile GgufFile::parse(std::vector<uint8_t> data, std::string name) {
  GgufFile f;
  f.bytes_ = impl::FileBytes::own(std::move(data));
  f.name_ = std::move(name);
  f.parse_all();
  return f;
}

void GgufFile::parse_all() {
  Cursor c(bytes_->data, bytes_->size, name_);
  if (c.read<uint32_t>("magic") != kMagic) fail(name_, "magic", "not a GGUF file (the first 4 bytes are not \"GGUF\")");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    fail(name_, "version", detail::str_cat(version_, " (wick reads versions 2 and 3)"));
  // A tensor info takes at least 8 (name) + 4 (dims) + 4 (type) + 8 (offset) bytes; a metadata
  // entry at least 8 (key) + 4 (type) + 1.
  const int64_t tensor_count = c.count("tensor count", 24);
  const int64_t kv_count = c.count("metadata count", 13);

  metadata_.reserve(static_cast<size_t>(kv_count));
  for (int64_t i = 0; i < kv_count; ++i) {
    const std::string field = detail::str_cat("metadata entry ", i);
    std::string key = c.string(field);
    if (!key_index_.emplace(key, metadata_.size()).second) fail(name_, key, "the key appears twice");
    const uint32_t t = c.read<uint32_t>(key);
    if (!known(t)) fail(name_, key, detail::str_cat("unknown value type ", t));
    GgufValue v = c.value(static_cast<GgufType>(t), key, 0);
    metadata_.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::U32) fail(name_, "general.alignment", detail::str_cat("a ", gguf_type_name(a->type), ", not u32"));
    alignment_ = a->as_int();
    if (alignment_ == 0 || (alignment_ & (alignment_ - 1)) != 0)
      fail(name_, "general.alignment", detail::str_cat(alignment_, " is not a power of two"));
  }

  tensors_.reserve(static_cast<size_t>(tensor_count));
  for (int64_t i = 0; i < tensor_count; ++i) {
    GgufTensor t;
    t.name = c.string(detail::str_cat("tensor ", i, " name"));
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) fail(name_, t.name, "the tensor name appears twice");
    const std::string& f = t.name;
    const uint32_t dims = c.read<uint32_t>(f);
    if (dims < 1 || dims > kMaxDims) fail(name_, f, detail::str_cat(dims, " dims (1 to ", kMaxDims, " allowed)"));
    std::vector<int64_t> ne(dims);
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t n = c.read<uint64_t>(f);
      if (n > static_cast<uint64_t>(checked::kMax)) fail(name_, f, detail::str_cat("dim ", d, " is ", n));
      ne[d] = static_cast<int64_t>(n);
    }
    const std::vector<int64_t> rows_first(ne.rbegin(), ne.rend());
    t.shape = Shape(rows_first);
    if (!checked::numel_fits(t.shape)) fail(name_, f, detail::str_cat("shape ", t.shape, " has too many elements"));
    t.ggml_type = c.read<uint32_t>(f);
    const uint64_t offset = c.read<uint64_t>(f);
    if (offset > static_cast<uint64_t>(checked::kMax) || static_cast<int64_t>(offset) % alignment_ != 0)
      fail(name_, f, detail::str_cat("offset ", offset, " is not a multiple of the alignment ", alignment_));
    t.offset = static_cast<int64_t>(offset);
    const int64_t numel = t.shape.numel();
    if (const auto q = quant::from_ggml_type(static_cast<int>(t.ggml_type))) {
      t.qtype = q;
      if (ne[0] == 0 || ne[0] % quant::block_values(*q) != 0)
        fail(name_, f, detail::str_cat("a row of ", ne[0], " values is not a whole number of ", quant::qtype_name(*q), " blocks"));
      t.nbytes = checked::mul(numel / ne[0], quant::row_bytes(*q, ne[0]), "gguf", " (", name_, ": ", f, ")");
    } else {
      const auto* code = std::find_if(std::begin(kDtypeCodes), std::end(kDtypeCodes),
                                      [&](const DtypeCode& d) { return d.ggml == t.ggml_type; });
      if (code == std::end(kDtypeCodes)) fail(name_, f, detail::str_cat("ggml type ", t.ggml_type, " is not one wick holds"));
      t.dtype = code->dtype;
      t.nbytes = checked::mul(numel, static_cast<int64_t>(dtype_size(code->dtype)), "gguf", " (", name_, ": ", f, ")");
    }
    tensors_.push_back(std::move(t));
  }

  data_start_ = align_up(c.at(), alignment_, name_);
  if (tensors_.empty()) return;
  if (data_start_ > bytes_->size) fail(name_, "data section", detail::str_cat("starts at ", data_start_, ", past the end at ", bytes_->size));
  const int64_t data_size = bytes_->size - data_start_;
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail(name_, t.name, detail::str_cat("bytes [", t.offset, ", ", t.offset, " + ", t.nbytes, ") of the data section pass its end at ", data_size));
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensor& a = *by_offset[i - 1];
    const GgufTensor& b = *by_offset[i];
    if (a.offset + a.nbytes > b.offset)
      fail(name_, b.name, detail::str_cat("its bytes from ", b.offset, " overlap ", a.name, "'s, which end at ", a.offset + a.nbytes));
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = key_index_.find(std::string(key));
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::own(const GgufTensor& t) const {
  const GgufTensor* mine = find_tensor(t.name);
  if (mine == nullptr)
    throw Error(detail::str_cat("gguf: ", name_, ": no tensor named ", t.name, " (an entry of another file?)"));
  if (mine != &t && (mine->shape != t.shape || mine->ggml_type != t.ggml_type || mine->dtype != t.dtype ||
                     mine->qtype != t.qtype || mine->offset != t.offset || mine->nbytes != t.nbytes))
    throw Error(detail::str_cat("gguf: ", name_, ": ", t.name, ": the entry (shape ", t.shape, ", offset ", t.offset,
                                ", ", t.nbytes, " bytes) is not this file's (shape ", mine->shape, ", offset ",
                                mine->offset, ", ", mine->nbytes,
                                " bytes): an entry of another file, or one changed since"));
  return *mine;
}

std::span<const uint8_t> GgufFile::data(const GgufTensor& entry) const {
  const GgufTensor& t = own(entry);
  return {bytes_->data + data_start_ + t.offset, static_cast<size_t>(t.nbytes)};
}

Tensor GgufFile::tensor(const GgufTensor& entry, Device device) const {
  const GgufTensor& t = own(entry);
  if (!t.dtype) throw DTypeError(detail::str_cat("gguf: ", name_, ": ", t.name, ": a ", quant::qtype_name(*t.qtype), " tensor (read it with qtensor)"));
  return impl::tensor_over(bytes_, data(t).data(), *t.dtype, t.shape, device);
}

quant::QTensor GgufFile::qtensor(const GgufTensor& entry, Device device) const {
  const GgufTensor& t = own(entry);
  if (!t.qtype) throw DTypeError(detail::str_cat("gguf: ", name_, ": ", t.name, ": a ", *t.dtype, " tensor (read it with tensor)"));
  // A tensor of more dims (a model's experts stacked) is its rows one after another.
  const int64_t cols = t.shape.back(), rows = cols == 0 ? 0 : t.shape.numel() / cols;
  return quant::QTensor(*t.qtype, rows, cols, impl::tensor_over(bytes_, data(t).data(), DType::U8, Shape({t.nbytes}), device));
}

// ---- writing ------------------------------------------------------------------------------------

void GgufWriter::set(std::string key, GgufValue value) {
  for (auto& [k, v] : metadata_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add(std::string name, const Tensor& t) {
  for (const Entry& e : tensors_)
    if (e.name == name) throw ShapeError(detail::str_cat("gguf: tensor ", name, " added twice"));
  const auto* code = std::find_if(std::begin(kDtypeCodes), std::end(kDtypeCodes), [&](const DtypeCode& d) { return d.dtype == t.dtype(); });
  if (code == std::end(kDtypeCodes)) throw DTypeError(detail::str_cat("gguf: tensor ", name, ": GGUF has no ", t.dtype(), " type"));
  if (t.rank() < 1 || t.rank() > kMaxDims) throw ShapeError(detail::str_cat("gguf: tensor ", name, ": rank ", t.rank(), " (1 to 4 allowed)"));
  Entry e{std::move(name), {}, code->ggml, {}};
  const std::vector<int64_t> dims = t.shape().to_vector();
  e.dims.assign(dims.rbegin(), dims.rend());
  e.data.resize(static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  dispatch(t.dtype(), [&]<typename T>() {
    const std::vector<T> v = t.to_vector<T>();
    if (!v.empty()) std::memcpy(e.data.data(), v.data(), e.data.size());
  });
  tensors_.push_back(std::move(e));
}

void GgufWriter::add(std::string name, const quant::QTensor& t) {
  add(std::move(name), t, Shape({t.rows(), t.cols()}));
}

void GgufWriter::add(std::string name, const quant::QTensor& t, const Shape& shape) {
  for (const Entry& e : tensors_)
    if (e.name == name) throw ShapeError(detail::str_cat("gguf: tensor ", name, " added twice"));
  if (shape.rank() < 2 || shape.rank() > kMaxDims || shape.back() != t.cols() || shape.numel() != t.rows() * t.cols())
    throw ShapeError(detail::str_cat("gguf: tensor ", name, ": shape ", shape, " for blocks of ", t.rows(), " rows of ",
                                     t.cols(), " (rank 2 to 4, the last dim the columns)"));
  const std::vector<int64_t> dims = shape.to_vector();
  Entry e{std::move(name), {dims.rbegin(), dims.rend()}, static_cast<uint32_t>(quant::ggml_type(t.qtype())), {}};
  e.data = t.plain().bytes().reshape({t.nbytes()}).to_vector<uint8_t>();
  tensors_.push_back(std::move(e));
}

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// The C++ value a GgufValue of v.type holds; a FormatError naming `key` where it holds another
// (GgufValue is an aggregate, so {GgufType::U32, std::string("x")} can be made).
template <typename T>
const T& held(const GgufValue& v, std::string_view key) {
  if (const T* p = std::get_if<T>(&v.value)) return *p;
  static constexpr std::string_view kinds[] = {
      "an unsigned integer", "a signed integer", "a float", "a bool", "a string", "an array"};
  throw FormatError(
      detail::str_cat("gguf: ", key, ": a ", gguf_type_name(v.type), " value that holds ", kinds[v.value.index()]));
}

void put_value(std::vector<uint8_t>& out, const GgufValue& v, std::string_view key) {
  auto u = [&] { return held<uint64_t>(v, key); };
  auto i = [&] { return held<int64_t>(v, key); };
  switch (v.type) {
    case GgufType::U8: return put<uint8_t>(out, static_cast<uint8_t>(u()));
    case GgufType::I8: return put<int8_t>(out, static_cast<int8_t>(i()));
    case GgufType::U16: return put<uint16_t>(out, static_cast<uint16_t>(u()));
    case GgufType::I16: return put<int16_t>(out, static_cast<int16_t>(i()));
    case GgufType::U32: return put<uint32_t>(out, static_cast<uint32_t>(u()));
    case GgufType::I32: return put<int32_t>(out, static_cast<int32_t>(i()));
    case GgufType::F32: return put<float>(out, static_cast<float>(held<double>(v, key)));
    case GgufType::U64: return put<uint64_t>(out, u());
    case GgufType::I64: return put<int64_t>(out, i());
    case GgufType::F64: return put<double>(out, held<double>(v, key));
    case GgufType::Bool: return put<uint8_t>(out, held<bool>(v, key) ? 1 : 0);
    case GgufType::String: return put_string(out, held<std::string>(v, key));
    case GgufType::Array: {
      const GgufArray& a = held<GgufArray>(v, key);
      put<uint32_t>(out, static_cast<uint32_t>(a.type));
      put<uint64_t>(out, a.items.size());
      for (const GgufValue& item : a.items) {
        if (item.type != a.type)
          throw FormatError(detail::str_cat("gguf: ", key, ": an array of ", gguf_type_name(a.type), " holds a ",
                                            gguf_type_name(item.type)));
        put_value(out, item, key);
      }
      return;
    }
  }
  throw FormatError(
      detail::str_cat("gguf: ", key, ": value type ", static_cast<uint32_t>(v.type), " is not a GGUF type"));
}

}  // namespace

std::vector<uint8_t> GgufWriter::bytes() const {
  int64_t alignment = kDefaultAlignment;
  for (const auto& [k, v] : metadata_)
    if (k == "general.alignment") alignment = v.as_int(k);
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    throw FormatError(detail::str_cat("gguf: general.alignment ", alignment, " is not a power of two"));
  std::vector<uint8_t> out;
  put<uint32_t>(out, kMagic);
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, metadata_.size());
  for (const auto& [k, v] : metadata_) {
    put_string(out, k);
    put<uint32_t>(out, static_cast<uint32_t>(v.type));
    put_value(out, v, k);
  }
  const std::string file = "<writer>";
  int64_t offset = 0;
  for (const Entry& e : tensors_) {
    put_string(out, e.name);
    put<uint32_t>(out, static_cast<uint32_t>(e.dims.size()));
    for (int64_t d : e.dims) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, e.ggml_type);
    put<uint64_t>(out, static_cast<uint64_t>(offset));
    offset = align_up(offset + static_cast<int64_t>(e.data.size()), alignment, file);
  }
  out.resize(static_cast<size_t>(align_up(static_cast<int64_t>(out.size()), alignment, file)), 0);
  for (const Entry& e : tensors_) {
    out.insert(out.end(), e.data.begin(), e.data.end());
    out.resize(static_cast<size_t>(align_up(static_cast<int64_t>(out.size()), alignment, file)), 0);
  }
  return out;
}

void GgufWriter::write(const std::string& path) const { impl::write_file(path, bytes(), "gguf"); }

}  // namespace wick::io
