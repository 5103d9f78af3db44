// safetensors files (include/wick/io.h): the reader over mapped or owned bytes, sharded
// checkpoints, and the writer. The layout: a u64 (little-endian) N, N bytes of JSON (an object:
// "__metadata__" maps strings to strings; every other key is a tensor, {"dtype": "F32", "shape":
// [2, 3], "data_offsets": [begin, end]}, offsets from the start of the data section), then the data
// section, which the tensors must cover exactly: sorted by offset, each starts where the last
// ended, the first at 0 and the last ends at the end of the file. The JSON is read with nlohmann's
// parser, its nesting bounded, before anything is sized by it.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "core/checked.h"
#include "core/dispatch.h"
#include "io/file_bytes.h"
#include "wick/io.h"

namespace wick::io {

namespace {

using Json = nlohmann::ordered_json;

// The header's largest size, as the format's reference reader allows: a header of 100 MB is about
// a million tensors.
constexpr int64_t kMaxHeader = 100'000'000;
// Objects and arrays nest at most this deep: the header, a tensor, its shape.
constexpr int kMaxDepth = 3;
constexpr std::string_view kMetadataKey = "__metadata__";

struct DtypeName {
  std::string_view name;
  int64_t size;
  std::optional<DType> dtype;
};
constexpr DtypeName kDtypes[] = {
    {"BOOL", 1, std::nullopt},   {"U8", 1, DType::U8},   {"I8", 1, std::nullopt},      {"F8_E5M2", 1, std::nullopt},
    {"F8_E4M3", 1, DType::F8E4M3}, {"F8_E8M0", 1, std::nullopt}, {"I16", 2, DType::I16}, {"U16", 2, std::nullopt},
    {"F16", 2, DType::F16},      {"BF16", 2, DType::BF16}, {"I32", 4, DType::I32},     {"U32", 4, DType::U32},
    {"F32", 4, DType::F32},      {"F64", 8, DType::F64},   {"I64", 8, DType::I64},     {"U64", 8, std::nullopt},
};

const DtypeName* find_dtype(std::string_view name) {
  const auto* it = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeName& d) { return d.name == name; });
  return it == std::end(kDtypes) ? nullptr : it;
}

std::string_view safetensors_name(DType dtype) {
  for (const DtypeName& d : kDtypes)
    if (d.dtype == dtype) return d.name;
  throw DTypeError(detail::str_cat("safetensors: no dtype name for ", dtype));
}

[[noreturn]] void fail(const std::string& file, std::string_view field, std::string_view what) {
  throw FormatError(detail::str_cat("safetensors: ", file, ": ", field, ": ", what));
}

// JSON text that the parser takes, bounded in depth: a deeper value is refused as it is met. A
// key that appears twice in one object is refused too (nlohmann's parser keeps the last silently):
// a header naming a tensor twice, or an index mapping one twice.
Json parse_json(const uint8_t* text, int64_t size, const std::string& file, std::string_view what) {
  std::vector<std::unordered_set<std::string>> keys;  // the keys of each object open, innermost last
  const auto depth_limit = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxDepth) fail(file, what, detail::str_cat("objects and arrays nest deeper than ", kMaxDepth));
    if (event == Json::parse_event_t::object_start) keys.emplace_back();
    if (event == Json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == Json::parse_event_t::key && !keys.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second) fail(file, key, "the key appears twice");
    }
    return true;
  };
  try {
    return Json::parse(text, text + size, depth_limit);
  } catch (const Json::exception& e) {
    fail(file, what, detail::str_cat("not JSON: ", e.what()));
  }
}

// A non-negative integer of a JSON value, within int64.
int64_t count_of(const Json& v, const std::string& file, std::string_view field) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(checked::kMax)) return static_cast<int64_t>(v.get<uint64_t>());
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return v.get<int64_t>();
  fail(file, field, detail::str_cat(v.dump(), " is not a count (an integer from 0 to 2^63 - 1)"));
}

}  // namespace

// ---- one file -----------------------------------------------------------------------------------

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.bytes_ = impl::FileBytes::map(path, "safetensors");
  f.name_ = path;
  f.parse_all();
  return f;
}

SafetensorsFile SafetensorsFile::parse(std::vector<uint8_t> data, std::string name) {
  SafetensorsFile f;
  f.bytes_ = impl::FileBytes::own(std::move(data));
  f.name_ = std::move(name);
  f.parse_all();
  return f;
}

void SafetensorsFile::parse_all() {
  const int64_t size = bytes_->size;
  if (size < 8) fail(name_, "header size", detail::str_cat("the file has ", size, " bytes (8 needed)"));
  uint64_t n = 0;
  std::memcpy(&n, bytes_->data, sizeof n);
  if (n > static_cast<uint64_t>(kMaxHeader)) fail(name_, "header size", detail::str_cat(n, " bytes (at most ", kMaxHeader, ")"));
  const auto header_size = static_cast<int64_t>(n);
  if (header_size > size - 8)
    fail(name_, "header size", detail::str_cat(header_size, " bytes, past the end of the file at ", size));
  if (header_size < 2 || bytes_->data[8] != '{') fail(name_, "header", "not a JSON object");
  data_start_ = 8 + header_size;
  const Json header = parse_json(bytes_->data + 8, header_size, name_, "header");
  if (!header.is_object()) fail(name_, "header", "not a JSON object");

  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) fail(name_, kMetadataKey, "not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(name_, detail::str_cat(kMetadataKey, ".", k), "not a string");
        metadata_.emplace_back(k, v.get<std::string>());
      }
      continue;
    }
    SafetensorsTensor t;
    t.name = key;
    const std::string& f = t.name;
    if (!value.is_object()) fail(name_, f, "not an object");
    const auto dtype = value.find("dtype"), shape = value.find("shape"), offsets = value.find("data_offsets");
    if (dtype == value.end() || !dtype->is_string()) fail(name_, f, "no \"dtype\" string");
    if (shape == value.end() || !shape->is_array()) fail(name_, f, "no \"shape\" array");
    if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2)
      fail(name_, f, "no \"data_offsets\" pair [begin, end]");
    t.dtype_name = dtype->get<std::string>();
    const DtypeName* d = find_dtype(t.dtype_name);
    if (d == nullptr) fail(name_, f, detail::str_cat("unknown dtype \"", t.dtype_name, "\""));
    t.dtype = d->dtype;
    if (shape->size() > static_cast<size_t>(kMaxRank))
      fail(name_, f,
           detail::str_cat("shape of rank ", shape->size(), " (wick's tensors have at most ", kMaxRank, " dims)"));
    std::vector<int64_t> dims;
    for (const Json& dim : *shape) dims.push_back(count_of(dim, name_, f));
    t.shape = Shape(dims);
    if (!checked::numel_fits(t.shape)) fail(name_, f, detail::str_cat("shape ", t.shape, " has too many elements"));
    t.nbytes = checked::mul(t.shape.numel(), d->size, "safetensors", " (", name_, ": ", f, ")");
    const int64_t begin = count_of((*offsets)[0], name_, f), end = count_of((*offsets)[1], name_, f);
    if (end < begin) fail(name_, f, detail::str_cat("data_offsets [", begin, ", ", end, "] end before they begin"));
    if (end - begin != t.nbytes)
      fail(name_, f, detail::str_cat("data_offsets [", begin, ", ", end, "] hold ", end - begin, " bytes; shape ", t.shape, " of ",
                                     t.dtype_name, " needs ", t.nbytes));
    t.offset = begin;
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The tensors cover the data section exactly, in some order.
  std::vector<const SafetensorsTensor*> by_offset;
  for (const SafetensorsTensor& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsTensor* a, const SafetensorsTensor* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->nbytes < b->nbytes;
  });
  int64_t at = 0;
  std::string_view last = "the start of the data section";
  for (const SafetensorsTensor* t : by_offset) {
    if (t->offset != at)
      fail(name_, t->name, detail::str_cat("its bytes begin at ", t->offset, ", not where ", last, " ends (", at, "): ",
                                           t->offset < at ? "they overlap" : "a gap"));
    at = t->offset + t->nbytes;
    last = t->name;
  }
  if (at != size - data_start_)
    fail(name_, "data section", detail::str_cat("the tensors end at byte ", at, " of it, but it holds ", size - data_start_));
}

const std::string* SafetensorsFile::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const SafetensorsTensor* SafetensorsFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor& SafetensorsFile::own(const SafetensorsTensor& t) const {
  const SafetensorsTensor* mine = find_tensor(t.name);
  if (mine == nullptr)
    throw Error(detail::str_cat("safetensors: ", name_, ": no tensor named ", t.name, " (an entry of another file?)"));
  if (mine != &t && (mine->shape != t.shape || mine->dtype_name != t.dtype_name || mine->dtype != t.dtype ||
                     mine->offset != t.offset || mine->nbytes != t.nbytes))
    throw Error(detail::str_cat("safetensors: ", name_, ": ", t.name, ": the entry (shape ", t.shape, ", offset ",
                                t.offset, ", ", t.nbytes, " bytes) is not this file's (shape ", mine->shape,
                                ", offset ", mine->offset, ", ", mine->nbytes,
                                " bytes): an entry of another file, or one changed since"));
  return *mine;
}

std::span<const uint8_t> SafetensorsFile::data(const SafetensorsTensor& entry) const {
  const SafetensorsTensor& t = own(entry);
  return {bytes_->data + data_start_ + t.offset, static_cast<size_t>(t.nbytes)};
}

Tensor SafetensorsFile::tensor(const SafetensorsTensor& entry, Device device) const {
  const SafetensorsTensor& t = own(entry);
  if (!t.dtype) throw DTypeError(detail::str_cat("safetensors: ", name_, ": ", t.name, ": wick has no dtype for ", t.dtype_name));
  return impl::tensor_over(bytes_, data(t).data(), *t.dtype, t.shape, device);
}

// ---- checkpoints --------------------------------------------------------------------------------

namespace {

bool is_directory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool ends_with(std::string_view s, std::string_view tail) { return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail; }

}  // namespace

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& path) {
  std::string index = path, single;
  if (is_directory(path)) {
    const std::string dir = ends_with(path, "/") ? path : path + "/";
    index = dir + "model.safetensors.index.json";
    single = dir + "model.safetensors";
    if (!is_file(index)) {
      if (!is_file(single))
        throw Error(detail::str_cat("safetensors: ", path, " holds neither model.safetensors.index.json nor model.safetensors"));
      index.clear();
    }
  } else if (!ends_with(path, ".json")) {
    single = path;
    index.clear();
  }

  SafetensorsCheckpoint c;
  c.name_ = index.empty() ? single : index;
  auto add_file = [&](SafetensorsFile file) {
    const size_t at = c.files_.size();
    for (size_t i = 0; i < file.tensors().size(); ++i) {
      const std::string& name = file.tensors()[i].name;
      if (const auto it = c.index_.find(name); it != c.index_.end())
        fail(c.name_, name, detail::str_cat("in two shards: ", c.files_[it->second.first].name(), " and ", file.name()));
      c.index_.emplace(name, std::make_pair(at, i));
    }
    c.files_.push_back(std::move(file));
  };
  if (index.empty()) {
    add_file(SafetensorsFile::open(single));
    return c;
  }

  const auto text = impl::FileBytes::map(index, "safetensors");
  const Json j = parse_json(text->data, text->size, index, "index");
  const auto map = j.is_object() ? j.find("weight_map") : j.end();
  if (map == j.end() || !map->is_object()) fail(index, "weight_map", "the index has no \"weight_map\" object");
  const size_t slash = index.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : index.substr(0, slash + 1);
  std::vector<std::string> shards;  // in the order the weight map first names them
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string()) fail(index, tensor, "its shard is not a string");
    const std::string s = shard.get<std::string>();
    if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos || s.find('\\') != std::string::npos ||
        s.find('\0') != std::string::npos)
      fail(index, tensor, detail::str_cat("shard \"", s, "\" is not a file name of the index's directory"));
    if (std::find(shards.begin(), shards.end(), s) == shards.end()) shards.push_back(s);
  }
  for (const std::string& s : shards) add_file(SafetensorsFile::open(dir + s));
  for (const auto& [tensor, shard] : map->items()) {
    const auto it = c.index_.find(tensor);
    if (it == c.index_.end() || c.files_[it->second.first].name() != dir + shard.get<std::string>())
      fail(index, tensor, detail::str_cat("the weight map puts it in ", shard.get<std::string>(), ", which does not hold it"));
  }
  return c;
}

std::vector<std::string> SafetensorsCheckpoint::tensor_names() const {
  std::vector<std::string> names;
  for (const SafetensorsFile& f : files_)
    for (const SafetensorsTensor& t : f.tensors()) names.push_back(t.name);
  return names;
}

const SafetensorsTensor* SafetensorsCheckpoint::find_tensor(std::string_view name, const SafetensorsFile** file) const {
  const auto it = index_.find(std::string(name));
  if (it == index_.end()) return nullptr;
  if (file != nullptr) *file = &files_[it->second.first];
  return &files_[it->second.first].tensors()[it->second.second];
}

Tensor SafetensorsCheckpoint::tensor(std::string_view name, Device device) const {
  const SafetensorsFile* file = nullptr;
  const SafetensorsTensor* t = find_tensor(name, &file);
  if (t == nullptr) throw Error(detail::str_cat("safetensors: ", name_, ": no tensor named ", name));
  return file->tensor(*t, device);
}

// ---- writing ------------------------------------------------------------------------------------

namespace {

// JSON holds UTF-8 text only: a tensor name or metadata entry of other bytes is refused when it is
// given, named with its bytes outside printable ASCII written as \xNN.
void check_utf8(std::string_view what, const std::string& text) {
  try {
    (void)Json(text).dump();
  } catch (const Json::exception&) {
    std::string shown;
    for (const char c : text) {
      const auto b = static_cast<unsigned char>(c);
      if (b >= 0x20 && b < 0x7f) {
        shown += c;
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        shown += {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
      }
    }
    throw FormatError(detail::str_cat("safetensors: ", what, " \"", shown, "\" is not UTF-8, which JSON needs"));
  }
}

}  // namespace

void SafetensorsWriter::set(std::string key, std::string value) {
  check_utf8("metadata key", key);
  check_utf8(detail::str_cat("metadata ", key, "'s value"), value);
  for (auto& [k, v] : metadata_)
    if (k == key) {
      v = std::move(value);
      return;
    }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void SafetensorsWriter::add(std::string name, const Tensor& t) {
  if (name == kMetadataKey) throw ShapeError(detail::str_cat("safetensors: a tensor cannot be named ", kMetadataKey));
  check_utf8("tensor name", name);
  for (const Entry& e : tensors_)
    if (e.name == name) throw ShapeError(detail::str_cat("safetensors: tensor ", name, " added twice"));
  Entry e{std::move(name), std::string(safetensors_name(t.dtype())), t.shape().to_vector(), {}};
  e.data.resize(static_cast<size_t>(t.numel() * dtype_size(t.dtype())));
  dispatch(t.dtype(), [&]<typename T>() {
    const std::vector<T> v = t.to_vector<T>();
    if (!v.empty()) std::memcpy(e.data.data(), v.data(), e.data.size());
  });
  tensors_.push_back(std::move(e));
}

std::vector<uint8_t> SafetensorsWriter::bytes() const {
  Json header = Json::object();
  if (!metadata_.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    header[std::string(kMetadataKey)] = std::move(m);
  }
  int64_t offset = 0;
  for (const Entry& e : tensors_) {
    const auto n = static_cast<int64_t>(e.data.size());
    header[e.name] = {{"dtype", e.dtype_name}, {"shape", e.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  std::vector<uint8_t> out(8 + text.size() + static_cast<size_t>(offset));
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, sizeof n);
  std::memcpy(out.data() + 8, text.data(), text.size());
  size_t at = 8 + text.size();
  for (const Entry& e : tensors_) {
    if (!e.data.empty()) std::memcpy(out.data() + at, e.data.data(), e.data.size());
    at += e.data.size();
  }
  return out;
}

void SafetensorsWriter::write(const std::string& path) const { impl::write_file(path, bytes(), "safetensors"); }

}  // namespace wick::io
