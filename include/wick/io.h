// Model files: GGUF (llama.cpp's format: metadata, then tensors of any dtype or block format) and
// safetensors (the format of Hugging Face checkpoints: a JSON header, then the tensors' bytes), one
// file or a checkpoint sharded over several.
// Files are untrusted input: every count, length, offset and size is checked before it is used, and
// a file that breaks its format is a FormatError naming the file, the field and what is wrong; a
// file that cannot be opened or written is an Error naming the file and the system's reason.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "wick/error.h"
#include "wick/quant.h"
#include "wick/tensor.h"

namespace wick::io {

namespace impl {
struct FileBytes;
}

// A file whose contents break its format: "<format>: <file>: <field>: <what>".
class FormatError : public Error {
 public:
  using Error::Error;
};

// ---- GGUF ---------------------------------------------------------------------------------------

// The types of GGUF metadata values, with GGUF's numbers.
enum class GgufType : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64 };

std::string_view gguf_type_name(GgufType type);

struct GgufValue;

// An array value: its element type and the elements (each of that type).
struct GgufArray {
  GgufType type = GgufType::U8;
  std::vector<GgufValue> items;
};

// One metadata value. Integers are held widened (unsigned in `u`, signed in `i`), floats as double;
// `type` keeps the type the file gave.
struct GgufValue {
  GgufType type = GgufType::U8;
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> value;

  static GgufValue u32(uint32_t v) { return {GgufType::U32, uint64_t{v}}; }
  static GgufValue u64(uint64_t v) { return {GgufType::U64, v}; }
  static GgufValue i32(int32_t v) { return {GgufType::I32, int64_t{v}}; }
  static GgufValue i64(int64_t v) { return {GgufType::I64, v}; }
  static GgufValue f32(float v) { return {GgufType::F32, double{v}}; }
  static GgufValue f64(double v) { return {GgufType::F64, v}; }
  static GgufValue boolean(bool v) { return {GgufType::Bool, v}; }
  static GgufValue string(std::string v) { return {GgufType::String, std::move(v)}; }
  static GgufValue array(GgufArray v) { return {GgufType::Array, std::move(v)}; }

  // The value as a signed integer (any integer type whose value fits int64), a float (F32, F64),
  // a bool, a string or an array; anything else is a FormatError naming `key`.
  int64_t as_int(std::string_view key = "value") const;
  double as_float(std::string_view key = "value") const;
  bool as_bool(std::string_view key = "value") const;
  const std::string& as_string(std::string_view key = "value") const;
  const GgufArray& as_array(std::string_view key = "value") const;
};

// One tensor of a GGUF file. shape is row-major, GGUF's dims reversed: a weight with GGUF dims
// (cols, rows) has shape {rows, cols}. Exactly one of dtype and qtype is set.
struct GgufTensor {
  std::string name;
  Shape shape;
  uint32_t ggml_type = 0;
  std::optional<DType> dtype;
  std::optional<quant::QType> qtype;
  int64_t offset = 0;  // from the start of the data section
  int64_t nbytes = 0;
};

// A parsed GGUF file (version 2 or 3) over its bytes: the file mapped into memory, or a buffer.
class GgufFile {
 public:
  // Maps the file at `path` and parses it.
  static GgufFile open(const std::string& path);
  // Parses `bytes` (kept by the GgufFile); `name` stands for the file in messages.
  static GgufFile parse(std::vector<uint8_t> bytes, std::string name = "<memory>");

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  int64_t alignment() const { return alignment_; }
  // The metadata in file order, and the value of one key (nullptr where the file has none).
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  // The tensors in file order, and one by name (nullptr where the file has none).
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(std::string_view name) const;

  // A tensor's bytes as the file holds them (valid while this GgufFile or a copy lives).
  // data, tensor and qtensor read only this file's own entries: an entry of another file, or a copy
  // whose fields were changed, is an Error naming both (no call reads outside the file).
  std::span<const uint8_t> data(const GgufTensor& t) const;
  // A tensor of a dtype (F32, F16, BF16, F64, I16, I32, I64) on `device`; DTypeError for a block
  // format (use qtensor). On the CPU the tensor aliases the file's mapping without a copy (writes to
  // it stay in this process: the mapping is private) and keeps the mapping alive; two tensors read
  // from one entry share their elements. On a GPU the bytes are copied to the device.
  Tensor tensor(const GgufTensor& t, Device device = Device::cpu()) const;
  // A tensor of a block format as a QTensor on `device` of (rows, cols): cols its last dim, rows the
  // product of the others (1 for rank 1; experts stacked (experts, rows, cols) one after another),
  // its blocks shared with the mapping on the CPU as tensor() does; DTypeError for a dtype.
  quant::QTensor qtensor(const GgufTensor& t, Device device = Device::cpu()) const;

 private:
  GgufFile() = default;
  void parse_all();
  // This file's entry of t's name, where t is it or an equal copy of it; else an Error.
  const GgufTensor& own(const GgufTensor& t) const;

  std::shared_ptr<const impl::FileBytes> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  int64_t alignment_ = 32;
  int64_t data_start_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> key_index_, tensor_index_;  // positions in the vectors
};

// Builds a GGUF file (version 3): metadata in the order set, tensors in the order added.
class GgufWriter {
 public:
  // Sets `key` (replacing an earlier value of it). "general.alignment" (U32, a power of two) sets
  // the data alignment, 32 by default.
  void set(std::string key, GgufValue value);
  // Adds a tensor (any dtype GGUF has: F32, F16, BF16, F64, I8, I16, I32, I64; rank 1 to 4) or a
  // block-format weight; the bytes are copied now. ShapeError for a name used twice.
  void add(std::string name, const Tensor& t);
  void add(std::string name, const quant::QTensor& t);
  // A block-format weight stored as `shape` (rank 2 to 4): its last dim the columns, the others'
  // product the rows (a model's experts stacked, (experts, rows, cols)); ShapeError otherwise.
  void add(std::string name, const quant::QTensor& t, const Shape& shape);
  // The file's bytes, and the file written to `path`.
  std::vector<uint8_t> bytes() const;
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    std::vector<int64_t> dims;  // GGUF order (ne0 first)
    uint32_t ggml_type;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Entry> tensors_;
};

// ---- safetensors --------------------------------------------------------------------------------

// One tensor of a safetensors file. `dtype_name` is the file's ("F32", "BF16", "I8", ...); `dtype`
// is wick's, where wick has that dtype (BOOL, I8, U16, U64 and F8_E5M2 tensors are listed and
// checked, but tensor() refuses them).
struct SafetensorsTensor {
  std::string name;
  Shape shape;
  std::string dtype_name;
  std::optional<DType> dtype;
  int64_t offset = 0;  // from the start of the data section
  int64_t nbytes = 0;
};

// A parsed safetensors file over its bytes: the file mapped into memory, or a buffer.
class SafetensorsFile {
 public:
  // Maps the file at `path` and parses it.
  static SafetensorsFile open(const std::string& path);
  // Parses `bytes` (kept by the SafetensorsFile); `name` stands for the file in messages.
  static SafetensorsFile parse(std::vector<uint8_t> bytes, std::string name = "<memory>");

  const std::string& name() const { return name_; }
  // The header's "__metadata__" (string to string) in file order, and one key's value (nullptr
  // where there is none).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  const std::string* find(std::string_view key) const;
  // The tensors in header order, and one by name (nullptr where the file has none).
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find_tensor(std::string_view name) const;

  // A tensor's bytes as the file holds them (valid while this SafetensorsFile or a copy lives).
  // data and tensor read only this file's own entries, as GgufFile's do.
  std::span<const uint8_t> data(const SafetensorsTensor& t) const;
  // The tensor on `device`: on the CPU it aliases the mapping as GgufFile::tensor does (where the
  // bytes are aligned for the dtype; else a copy), on a GPU the bytes are copied. DTypeError for a
  // dtype wick does not have.
  Tensor tensor(const SafetensorsTensor& t, Device device = Device::cpu()) const;

 private:
  SafetensorsFile() = default;
  void parse_all();
  const SafetensorsTensor& own(const SafetensorsTensor& t) const;

  std::shared_ptr<const impl::FileBytes> bytes_;
  std::string name_;
  int64_t data_start_ = 0;
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// A checkpoint: one safetensors file, or the shards that a "model.safetensors.index.json" names
// in its "weight_map".
class SafetensorsCheckpoint {
 public:
  // `path` is a .safetensors file, an index (.json), or a directory holding
  // model.safetensors.index.json or model.safetensors. An index's shards are files of the index's
  // directory (a shard named with a path, "." or ".." is a FormatError); each shard must hold the
  // tensors the weight map assigns to it, and no tensor may appear in two shards.
  static SafetensorsCheckpoint open(const std::string& path);

  const std::string& name() const { return name_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // Every tensor's name, shard by shard in header order.
  std::vector<std::string> tensor_names() const;
  // A tensor's entry and its file (nullptr where no shard has it).
  const SafetensorsTensor* find_tensor(std::string_view name, const SafetensorsFile** file = nullptr) const;
  // The tensor on `device`, as SafetensorsFile::tensor gives it; an Error naming the checkpoint
  // where no shard has it.
  Tensor tensor(std::string_view name, Device device = Device::cpu()) const;

 private:
  std::string name_;
  std::vector<SafetensorsFile> files_;
  std::unordered_map<std::string, std::pair<size_t, size_t>> index_;  // file, tensor
};

// Builds a safetensors file: "__metadata__" entries in the order set, tensors in the order added,
// the header padded with spaces to a multiple of 8 bytes.
class SafetensorsWriter {
 public:
  // Sets a "__metadata__" entry (replacing an earlier value of `key`).
  void set(std::string key, std::string value);
  // Adds a tensor of any dtype and rank (the bytes are copied now). ShapeError for a name used
  // twice or the name "__metadata__".
  void add(std::string name, const Tensor& t);
  // The file's bytes, and the file written to `path`.
  std::vector<uint8_t> bytes() const;
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    std::string dtype_name;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, std::string>> metadata_;
  std::vector<Entry> tensors_;
};

}  // namespace wick::io
