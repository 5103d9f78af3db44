// Model files (include/wick/io.h), GGUF and safetensors: written and read back (mapped and from
// memory), every metadata type, tensors of every dtype each format has (and GGUF's block formats),
// sharded safetensors checkpoints; and hostile files (every truncation, and each field broken on
// purpose) as FormatErrors that name the file and the field.
#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/dispatch.h"
#include "test_util.h"
#include "wick/io.h"

namespace wick::test {
namespace {

using io::FormatError;
using io::GgufArray;
using io::GgufFile;
using io::GgufType;
using io::GgufValue;
using io::GgufWriter;

// A file name under the temp dir, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& stem, const std::string& ext = ".gguf")
      : path_(testing::TempDir() + stem + "-" + std::to_string(getpid()) + ext) {}
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((i * 7919) % 1000) / 1000.f - scale / 2;
  return v;
}

GgufWriter sample_writer() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("u8", {GgufType::U8, uint64_t{200}});
  w.set("i8", {GgufType::I8, int64_t{-100}});
  w.set("u16", {GgufType::U16, uint64_t{60000}});
  w.set("i16", {GgufType::I16, int64_t{-30000}});
  w.set("u32", GgufValue::u32(4000000000u));
  w.set("i32", GgufValue::i32(-2000000000));
  w.set("f32", GgufValue::f32(0.1f));
  w.set("bool", GgufValue::boolean(true));
  w.set("u64", GgufValue::u64(uint64_t{1} << 63));
  w.set("i64", GgufValue::i64(-(int64_t{1} << 62)));
  w.set("f64", GgufValue::f64(-2.5e300));
  GgufArray tokens{GgufType::String, {}};
  for (const char* s : {"<s>", "</s>", "\xe2\x96\x81hello", ""}) tokens.items.push_back(GgufValue::string(s));
  w.set("tokenizer.ggml.tokens", GgufValue::array(tokens));
  GgufArray nested{GgufType::Array, {GgufValue::array({GgufType::I32, {GgufValue::i32(1), GgufValue::i32(-2)}})}};
  w.set("nested", GgufValue::array(nested));
  w.add("a.weight", Tensor::from_vector(ramp(6 * 64, 2.f), {6, 64}));
  w.add("b.bias", Tensor::from_vector(ramp(5, 1.f), {5}).to_dtype(DType::F16));
  w.add("c.cube", Tensor::from_vector(ramp(2 * 3 * 4, 1.f), {2, 3, 4}).to_dtype(DType::BF16));
  w.add("d.ids", Tensor::from_vector(std::vector<int32_t>{1, -2, 3}, {3}));
  w.add("e.q4k", quant::quantize(Tensor::from_vector(ramp(3 * 256, 1.f), {3, 256}), quant::QType::Q4_K));
  w.add("f.q8", quant::quantize(Tensor::from_vector(ramp(2 * 64, 1.f), {2, 64}), quant::QType::Q8_0));
  return w;
}

void expect_sample(const GgufFile& f) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32);
  ASSERT_EQ(f.metadata().size(), 14u);
  EXPECT_EQ(f.metadata()[0].first, "general.architecture");
  EXPECT_EQ(f.find("general.architecture")->as_string(), "llama");
  EXPECT_EQ(f.find("u8")->as_int(), 200);
  EXPECT_EQ(f.find("i8")->as_int(), -100);
  EXPECT_EQ(f.find("u16")->as_int(), 60000);
  EXPECT_EQ(f.find("i16")->as_int(), -30000);
  EXPECT_EQ(f.find("u32")->as_int(), 4000000000);
  EXPECT_EQ(f.find("i32")->as_int(), -2000000000);
  EXPECT_EQ(f.find("f32")->as_float(), static_cast<double>(0.1f));
  EXPECT_EQ(f.find("f32")->type, GgufType::F32);
  EXPECT_TRUE(f.find("bool")->as_bool());
  EXPECT_EQ(std::get<uint64_t>(f.find("u64")->value), uint64_t{1} << 63);
  WICK_EXPECT_ERROR(f.find("u64")->as_int("u64"), FormatError, "u64", "2^63");
  EXPECT_EQ(f.find("i64")->as_int(), -(int64_t{1} << 62));
  EXPECT_EQ(f.find("f64")->as_float(), -2.5e300);
  const GgufArray& tokens = f.find("tokenizer.ggml.tokens")->as_array();
  ASSERT_EQ(tokens.items.size(), 4u);
  EXPECT_EQ(tokens.items[2].as_string(), "\xe2\x96\x81hello");
  EXPECT_EQ(tokens.items[3].as_string(), "");
  EXPECT_EQ(f.find("nested")->as_array().items[0].as_array().items[1].as_int(), -2);
  WICK_EXPECT_ERROR(f.find("u8")->as_string("u8"), FormatError, "u8", "string");
  EXPECT_EQ(f.find("missing"), nullptr);

  ASSERT_EQ(f.tensors().size(), 6u);
  for (const io::GgufTensor& t : f.tensors()) EXPECT_EQ(t.offset % f.alignment(), 0) << t.name;
  const io::GgufTensor* a = f.find_tensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, Shape({6, 64}));
  EXPECT_EQ(a->dtype, DType::F32);
  EXPECT_EQ(f.tensor(*a).to_vector<float>(), ramp(6 * 64, 2.f));
  const Tensor bias = f.tensor(*f.find_tensor("b.bias"));
  EXPECT_EQ(bias.dtype(), DType::F16);
  EXPECT_EQ(bias.to_dtype(DType::F32).to_vector<float>(), Tensor::from_vector(ramp(5, 1.f), {5}).to_dtype(DType::F16).to_dtype(DType::F32).to_vector<float>());
  const Tensor cube = f.tensor(*f.find_tensor("c.cube"));
  EXPECT_EQ(cube.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(cube.dtype(), DType::BF16);
  EXPECT_EQ(f.tensor(*f.find_tensor("d.ids")).to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3}));
  const io::GgufTensor* q = f.find_tensor("e.q4k");
  EXPECT_EQ(q->qtype, quant::QType::Q4_K);
  EXPECT_EQ(q->ggml_type, 12u);
  EXPECT_EQ(q->shape, Shape({3, 256}));
  const quant::QTensor qt = f.qtensor(*q);
  const quant::QTensor want = quant::quantize(Tensor::from_vector(ramp(3 * 256, 1.f), {3, 256}), quant::QType::Q4_K);
  EXPECT_EQ(qt.bytes().to_vector<uint8_t>(), want.bytes().to_vector<uint8_t>());
  WICK_EXPECT_ERROR(f.tensor(*q), DTypeError, "e.q4k", "q4_k", "qtensor");
  WICK_EXPECT_ERROR(f.qtensor(*a), DTypeError, "a.weight", "f32");
}

TEST(Gguf, WrittenFilesReadBackMappedAndFromMemory) {
  const GgufWriter w = sample_writer();
  TempFile file("wick-io");
  w.write(file.path());
  expect_sample(GgufFile::open(file.path()));
  expect_sample(GgufFile::parse(w.bytes(), "sample"));
}

// On the CPU a tensor aliases the file's mapping: two reads of one entry share their elements, a
// write reaches neither the file nor a later mapping of it, and the tensors outlive the GgufFile.
TEST(Gguf, CpuTensorsAliasThePrivateMapping) {
  TempFile file("wick-alias");
  sample_writer().write(file.path());
  Tensor first, second;
  quant::QTensor blocks;
  {
    const GgufFile f = GgufFile::open(file.path());
    first = f.tensor(*f.find_tensor("a.weight"));
    second = f.tensor(*f.find_tensor("a.weight"));
    blocks = f.qtensor(*f.find_tensor("f.q8"));
  }
  first.copy_from(Tensor::full({6, 64}, 3.f));
  EXPECT_EQ(second.to_vector<float>(), std::vector<float>(6 * 64, 3.f));
  EXPECT_EQ(blocks.bytes().to_vector<uint8_t>(),
            quant::quantize(Tensor::from_vector(ramp(2 * 64, 1.f), {2, 64}), quant::QType::Q8_0).bytes().to_vector<uint8_t>());
  const GgufFile again = GgufFile::open(file.path());
  EXPECT_EQ(again.tensor(*again.find_tensor("a.weight")).to_vector<float>(), ramp(6 * 64, 2.f));
}

TEST(Gguf, AlignmentIsKept) {
  GgufWriter w;
  w.set("general.alignment", GgufValue::u32(256));
  w.add("x", Tensor::from_vector(ramp(3, 1.f), {3}));
  w.add("y", Tensor::from_vector(ramp(5, 1.f), {5}));
  const GgufFile f = GgufFile::parse(w.bytes());
  EXPECT_EQ(f.alignment(), 256);
  EXPECT_EQ(f.find_tensor("y")->offset, 256);
  EXPECT_EQ(f.tensor(*f.find_tensor("y")).to_vector<float>(), ramp(5, 1.f));
  GgufWriter bad;
  bad.set("general.alignment", GgufValue::u32(48));
  WICK_EXPECT_ERROR(bad.bytes(), FormatError, "general.alignment", "48");
}

// GgufValue is an aggregate: a value whose C++ type is not its GGUF type's, an array item of
// another type, or a type past GGUF's are FormatErrors naming the key when the file is written.
TEST(Gguf, WriterRefusesValuesOfAnotherType) {
  const auto refused = [](const std::string& key, GgufValue v, auto... words) {
    GgufWriter w;
    w.set(key, std::move(v));
    WICK_EXPECT_ERROR(w.bytes(), FormatError, key, words...);
  };
  refused("a.string", GgufValue{GgufType::U32, std::string("x")}, "a u32 value that holds a string");
  refused("a.float", GgufValue{GgufType::F32, uint64_t{3}}, "a f32 value that holds an unsigned integer");
  refused("a.bool", GgufValue{GgufType::Bool, 1.5}, "a bool value that holds a float");
  refused("a.array", GgufValue::array({GgufType::I32, {GgufValue::u32(1)}}), "an array of i32 holds a u32");
  refused("a.item", GgufValue::array({GgufType::I32, {GgufValue{GgufType::I32, true}}}),
          "a i32 value that holds a bool");
  refused("a.type", GgufValue{static_cast<GgufType>(99), uint64_t{1}}, "value type 99");
}

TEST(Gguf, EveryTruncationIsAFormatError) {
  GgufWriter w = sample_writer();
  w.add("z.last", Tensor::from_vector(ramp(8, 1.f), {8}));  // 32 bytes: the file ends with its data
  const std::vector<uint8_t> whole = w.bytes();
  EXPECT_EQ(GgufFile::parse(whole).tensors().size(), 7u);
  for (size_t n = 0; n < whole.size(); ++n) {
    WICK_EXPECT_ERROR(GgufFile::parse(std::vector<uint8_t>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n)), "cut.gguf"),
                      FormatError, "gguf: cut.gguf: ");
  }
}

// Builds GGUF bytes field by field, for files broken on purpose.
struct Builder {
  std::vector<uint8_t> b;
  template <typename T>
  Builder& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Builder& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Builder& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    return put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(tensors).put<uint64_t>(kvs);
  }
  // A tensor info: name, dims (GGUF order), ggml type, offset.
  Builder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  // Zero padding to 32, then `n` data bytes.
  Builder& data(size_t n) {
    b.resize((b.size() + 31) / 32 * 32 + n, 7);
    return *this;
  }
  GgufFile parse() const { return GgufFile::parse(b, "bad.gguf"); }
};

TEST(Gguf, BrokenFieldsAreNamed) {
  EXPECT_EQ(Builder().header(1, 0).tensor("t", {4}, 0, 0).data(16).parse().tensors().size(), 1u);
  WICK_EXPECT_ERROR(Builder().put<uint32_t>(0x46554746).put<uint32_t>(3).parse(), FormatError, "bad.gguf", "magic");
  WICK_EXPECT_ERROR(Builder().header(0, 0, 1).parse(), FormatError, "version", "1");
  WICK_EXPECT_ERROR(Builder().header(0, 0, 4).parse(), FormatError, "version", "4");
  WICK_EXPECT_ERROR(Builder().header(uint64_t{1} << 62, 0).parse(), FormatError, "tensor count", "cannot fit");
  WICK_EXPECT_ERROR(Builder().header(0, ~uint64_t{0}).parse(), FormatError, "metadata count", "cannot fit");
  WICK_EXPECT_ERROR(Builder().header(0, 1).put<uint64_t>(uint64_t{1} << 40).put<uint64_t>(0).parse(), FormatError, "metadata entry 0",
                    "cannot fit");
  WICK_EXPECT_ERROR(Builder().header(0, 1).str("k").put<uint32_t>(13).put<uint32_t>(0).parse(), FormatError, "k", "unknown value type 13");
  WICK_EXPECT_ERROR(Builder().header(0, 1).str("flag").put<uint32_t>(7).put<uint8_t>(2).parse(), FormatError, "flag", "bool byte 2");
  WICK_EXPECT_ERROR(Builder().header(0, 1).str("s").put<uint32_t>(8).put<uint64_t>(100).parse(), FormatError, "s", "count 100");
  WICK_EXPECT_ERROR(Builder().header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(uint64_t{1} << 60).parse(), FormatError, "a", "cannot fit");
  {
    Builder many;  // an array of more small items than the reader holds
    many.header(0, 1).str("many").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>((uint64_t{1} << 24) + 1);
    many.b.resize(many.b.size() + (size_t{1} << 24) + 1, 1);
    WICK_EXPECT_ERROR(many.parse(), FormatError, "many", "metadata values");
  }
  WICK_EXPECT_ERROR(Builder().header(0, 2).str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(1).parse(),
                    FormatError, "k", "twice");
  {
    Builder deep;  // arrays of arrays past the nesting limit
    deep.header(0, 1).str("deep").put<uint32_t>(9);
    for (int i = 0; i < 6; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
    deep.put<uint32_t>(0).put<uint64_t>(0);
    WICK_EXPECT_ERROR(deep.parse(), FormatError, "deep", "nested");
  }
  WICK_EXPECT_ERROR(Builder().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(24).parse(), FormatError,
                    "general.alignment", "power of two");
  WICK_EXPECT_ERROR(Builder().header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(32).parse(), FormatError,
                    "general.alignment", "u64");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {}, 0, 0).data(0).parse(), FormatError, "t", "0 dims");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0).data(4).parse(), FormatError, "t", "5 dims");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0).data(0).parse(), FormatError, "t",
                    "too many elements");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {~uint64_t{0}}, 0, 0).data(0).parse(), FormatError, "t", "dim 0");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {4}, 99, 0).data(16).parse(), FormatError, "t", "ggml type 99");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {4}, 0, 8).data(64).parse(), FormatError, "t", "offset 8");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {4}, 0, 32).data(16).parse(), FormatError, "t", "pass its end");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {1024}, 0, 0).data(16).parse(), FormatError, "t", "pass its end");
  WICK_EXPECT_ERROR(Builder().header(1, 0).tensor("t", {48, 2}, 2, 0).data(64).parse(), FormatError, "t", "q4_0 blocks");
  WICK_EXPECT_ERROR(Builder().header(2, 0).tensor("t", {16}, 0, 0).tensor("u", {4}, 0, 32).data(64).parse(), FormatError, "u",
                    "overlap", "t");
  WICK_EXPECT_ERROR(Builder().header(2, 0).tensor("t", {4}, 0, 0).tensor("t", {4}, 0, 32).data(64).parse(), FormatError, "t", "twice");
}

// Many small entries (as a hostile file may hold) parse in time linear in their number: keys and
// names are checked for repeats through an index.
TEST(Gguf, ManySmallEntriesParse) {
  constexpr int kEntries = 300000;
  Builder b;
  b.header(0, kEntries);
  for (int i = 0; i < kEntries; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "k%d", i);
    b.str(key).put<uint32_t>(0).put<uint8_t>(static_cast<uint8_t>(i));
  }
  const GgufFile f = b.parse();
  ASSERT_EQ(f.metadata().size(), static_cast<size_t>(kEntries));
  EXPECT_EQ(f.find("k123457")->as_int(), 123457 % 256);
}

TEST(Gguf, FilesThatCannotBeOpenedAreErrors) {
  WICK_EXPECT_ERROR(GgufFile::open("/nonexistent/model.gguf"), Error, "/nonexistent/model.gguf");
  WICK_EXPECT_ERROR(GgufFile::open(testing::TempDir()), Error, "not a regular file");
  TempFile empty("wick-empty");
  GgufWriter().write(empty.path());
  EXPECT_TRUE(GgufFile::open(empty.path()).tensors().empty());
  std::FILE* f = std::fopen(empty.path().c_str(), "wb");
  std::fclose(f);
  WICK_EXPECT_ERROR(GgufFile::open(empty.path()), FormatError, empty.path(), "magic");
}

}  // namespace
}  // namespace wick::test

// ---- safetensors --------------------------------------------------------------------------------

namespace wick::test {
namespace {

using io::SafetensorsCheckpoint;
using io::SafetensorsFile;
using io::SafetensorsWriter;

// A tensor of every dtype wick has, with values that differ element to element.
std::vector<std::pair<std::string, Tensor>> every_dtype() {
  std::vector<std::pair<std::string, Tensor>> ts;
  const Tensor base = Tensor::from_vector(ramp(2 * 3 * 5, 8.f), {2, 3, 5});
  for (DType dt : kAllDTypes) ts.emplace_back(detail::str_cat("t.", dt), base.to_dtype(dt));
  ts.emplace_back("scalar", Tensor::from_vector(std::vector<float>{1.5f}, Shape(std::vector<int64_t>{})));
  ts.emplace_back("empty", Tensor::zeros({0, 3}, DType::BF16));
  return ts;
}

// The elements of t as raw bytes, for exact comparison of any dtype.
std::vector<uint8_t> raw(const Tensor& t) {
  std::vector<uint8_t> bytes(static_cast<size_t>(t.numel() * dtype_size(t.dtype())));
  dispatch(t.dtype(), [&]<typename T>() {
    const std::vector<T> v = t.to_vector<T>();
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  });
  return bytes;
}

void expect_every_dtype(const SafetensorsFile& f) {
  const auto want = every_dtype();
  ASSERT_EQ(f.tensors().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const io::SafetensorsTensor& t = f.tensors()[i];
    EXPECT_EQ(t.name, want[i].first);
    EXPECT_EQ(t.shape, want[i].second.shape()) << t.name;
    EXPECT_EQ(t.dtype, want[i].second.dtype()) << t.name;
    const Tensor got = f.tensor(t);
    EXPECT_EQ(got.shape(), want[i].second.shape()) << t.name;
    EXPECT_EQ(raw(got), raw(want[i].second)) << t.name;
  }
  EXPECT_EQ(f.find_tensor("t.bf16")->dtype_name, "BF16");
  EXPECT_EQ(f.find_tensor("t.f8e4m3")->dtype_name, "F8_E4M3");
  EXPECT_EQ(f.find_tensor("nosuch"), nullptr);
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(*f.find("format"), "pt");
  EXPECT_EQ(f.find("missing"), nullptr);
}

SafetensorsWriter every_dtype_writer() {
  SafetensorsWriter w;
  w.set("format", "pt");
  w.set("note", "\xc3\xa9t\xc3\xa9");
  for (const auto& [name, t] : every_dtype()) w.add(name, t);
  return w;
}

TEST(Safetensors, WrittenFilesReadBackMappedAndFromMemory) {
  const SafetensorsWriter w = every_dtype_writer();
  const std::vector<uint8_t> bytes = w.bytes();
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  EXPECT_EQ(header % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  TempFile file("wick-st", ".safetensors");
  w.write(file.path());
  expect_every_dtype(SafetensorsFile::open(file.path()));
  expect_every_dtype(SafetensorsFile::parse(bytes, "sample"));
  EXPECT_EQ(*SafetensorsFile::parse(bytes).find("note"), "\xc3\xa9t\xc3\xa9");
  WICK_EXPECT_ERROR(SafetensorsWriter().add("__metadata__", Tensor::zeros({1})), ShapeError, "__metadata__");
  SafetensorsWriter twice;
  twice.add("a", Tensor::zeros({1}));
  WICK_EXPECT_ERROR(twice.add("a", Tensor::zeros({1})), ShapeError, "twice");
}

// A tensor whose offset is not aligned for its dtype (after an odd count of 2-byte values) reads
// back right: copied, where an aligned one aliases the mapping.
TEST(Safetensors, UnalignedTensorsAreCopied) {
  SafetensorsWriter w;
  w.add("half", Tensor::from_vector(ramp(3, 1.f), {3}).to_dtype(DType::F16));
  w.add("wide", Tensor::from_vector(std::vector<double>{1.25, -2.5}, {2}));
  const SafetensorsFile f = SafetensorsFile::parse(w.bytes());
  EXPECT_EQ(f.find_tensor("wide")->offset, 6);
  EXPECT_EQ(f.tensor(*f.find_tensor("wide")).to_vector<double>(), (std::vector<double>{1.25, -2.5}));
}

// safetensors bytes from a header written by hand, the data section `data` bytes of 7.
std::vector<uint8_t> st_bytes(const std::string& header, size_t data, uint64_t size_field = ~uint64_t{0}) {
  std::vector<uint8_t> b(8 + header.size() + data, 7);
  const uint64_t n = size_field == ~uint64_t{0} ? header.size() : size_field;
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  return b;
}

SafetensorsFile st_parse(const std::string& header, size_t data, uint64_t size_field = ~uint64_t{0}) {
  return SafetensorsFile::parse(st_bytes(header, data, size_field), "bad.safetensors");
}

TEST(Safetensors, DtypesWickLacksAreListedNotRead) {
  const SafetensorsFile f = st_parse(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]},)"
                                     R"("q":{"dtype":"I8","shape":[2],"data_offsets":[3,5]}})",
                                     5);
  EXPECT_EQ(f.find_tensor("m")->dtype, std::nullopt);
  EXPECT_EQ(f.find_tensor("q")->nbytes, 2);
  WICK_EXPECT_ERROR(f.tensor(*f.find_tensor("q")), DTypeError, "bad.safetensors", "q", "I8");
}

// The header is JSON, which holds UTF-8 text only: names and metadata of other bytes are refused
// when they are given, their bytes shown escaped.
TEST(Safetensors, WriterRefusesTextThatIsNotUtf8) {
  SafetensorsWriter w;
  const Tensor t = Tensor::from_vector(ramp(3, 1.f), {3});
  WICK_EXPECT_ERROR(w.add("w\xff", t), FormatError, "tensor name", "\"w\\xff\"", "not UTF-8");
  WICK_EXPECT_ERROR(w.set("k\xc3", "v"), FormatError, "metadata key", "k\\xc3");
  WICK_EXPECT_ERROR(w.set("k", "\xed\xa0\x80"), FormatError, "metadata k's value", "\\xed\\xa0\\x80");
  w.add("w\xc3\xa9", t);
  w.set("k\xe2\x96\x81", "\xf0\x9f\x99\x82");
  const SafetensorsFile f = SafetensorsFile::parse(w.bytes(), "utf8.safetensors");
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].name, "w\xc3\xa9");
  EXPECT_EQ(f.metadata().at(0).second, "\xf0\x9f\x99\x82");
}

TEST(Safetensors, EveryTruncationIsAFormatError) {
  const std::vector<uint8_t> whole = every_dtype_writer().bytes();
  for (size_t n = 0; n < whole.size(); ++n) {
    WICK_EXPECT_ERROR(SafetensorsFile::parse(std::vector<uint8_t>(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n)), "cut"),
                      FormatError, "safetensors: cut: ");
  }
}

TEST(Safetensors, BrokenFieldsAreNamed) {
  const std::string one = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(st_parse(one, 8).tensors().size(), 1u);
  EXPECT_EQ(st_parse(one + "   ", 8).tensors().size(), 1u);  // padding
  WICK_EXPECT_ERROR(st_parse(one, 8, uint64_t{1} << 40), FormatError, "bad.safetensors", "header size", "at most");
  WICK_EXPECT_ERROR(st_parse(one, 8, one.size() + 9), FormatError, "header size", "past the end");
  WICK_EXPECT_ERROR(st_parse("[1, 2]", 0), FormatError, "header", "not a JSON object");
  WICK_EXPECT_ERROR(st_parse(R"({"t": )", 0), FormatError, "header", "not JSON");
  WICK_EXPECT_ERROR(st_parse("{\"t\":\"\xff\"}", 0), FormatError, "header", "not JSON");
  WICK_EXPECT_ERROR(st_parse(R"({"a":{"b":{"c":{"d":[]}}}})", 0), FormatError, "header", "nest");
  WICK_EXPECT_ERROR(st_parse("{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}", 0), FormatError, "nest");
  WICK_EXPECT_ERROR(st_parse(R"({"__metadata__":[]})", 0), FormatError, "__metadata__", "not an object");
  WICK_EXPECT_ERROR(st_parse(R"({"__metadata__":{"k":1}})", 0), FormatError, "__metadata__.k", "not a string");
  WICK_EXPECT_ERROR(st_parse(R"({"t":3})", 0), FormatError, "t", "not an object");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8), FormatError, "t", "dtype");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", 8), FormatError, "t", "shape");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[2]}})", 8), FormatError, "t", "data_offsets");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", 8), FormatError, "t", "data_offsets");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", 8), FormatError, "t", "unknown dtype \"F31\"");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), FormatError, "t", "-2", "not a count");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8), FormatError, "t", "not a count");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8), FormatError, "t", "not a count");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]}})", 8), FormatError, "t",
                    "not a count");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8), FormatError, "t",
                    "too many elements");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})", 8), ShapeError, "t",
                    "overflows");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), FormatError, "t", "end before");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", 12), FormatError, "t", "hold 12 bytes", "needs 8");
  WICK_EXPECT_ERROR(st_parse(one, 12), FormatError, "data section", "holds 12");
  WICK_EXPECT_ERROR(st_parse(one, 4), FormatError, "data section", "holds 4");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), FormatError, "t", "a gap");
  WICK_EXPECT_ERROR(st_parse(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"u":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
                    FormatError, "u", "overlap");
}

TEST(Safetensors, ShardedCheckpoints) {
  TempDir dir;
  SafetensorsWriter a, b;
  a.add("embed", Tensor::from_vector(ramp(12, 1.f), {3, 4}));
  a.add("norm", Tensor::from_vector(ramp(4, 2.f), {4}).to_dtype(DType::BF16));
  b.add("head", Tensor::from_vector(ramp(8, 3.f), {2, 4}));
  a.write(dir.file("model-00001-of-00002.safetensors"));
  b.write(dir.file("model-00002-of-00002.safetensors"));
  dir.write("model.safetensors.index.json", R"({"metadata": {"total_size": 80}, "weight_map": {
      "embed": "model-00001-of-00002.safetensors", "head": "model-00002-of-00002.safetensors",
      "norm": "model-00001-of-00002.safetensors"}})");
  for (const std::string& path : {dir.path(), dir.path() + "/", dir.file("model.safetensors.index.json")}) {
    const SafetensorsCheckpoint c = SafetensorsCheckpoint::open(path);
    EXPECT_EQ(c.files().size(), 2u);
    EXPECT_EQ(c.tensor_names(), (std::vector<std::string>{"embed", "norm", "head"}));
    EXPECT_EQ(c.tensor("head").to_vector<float>(), ramp(8, 3.f));
    EXPECT_EQ(c.tensor("norm").dtype(), DType::BF16);
    const SafetensorsFile* file = nullptr;
    EXPECT_EQ(c.find_tensor("embed", &file)->shape, Shape({3, 4}));
    EXPECT_EQ(file->name(), dir.file("model-00001-of-00002.safetensors"));
    EXPECT_EQ(c.find_tensor("nosuch"), nullptr);
    WICK_EXPECT_ERROR(c.tensor("nosuch"), Error, "model.safetensors.index.json", "no tensor named nosuch");
  }
  const SafetensorsCheckpoint one = SafetensorsCheckpoint::open(dir.file("model-00002-of-00002.safetensors"));
  EXPECT_EQ(one.tensor_names(), std::vector<std::string>{"head"});

  auto index = [&](const std::string& text) {
    dir.write("bad.json", text);
    return SafetensorsCheckpoint::open(dir.file("bad.json"));
  };
  WICK_EXPECT_ERROR(index(R"({"weight_map": {"head": "../model-00002-of-00002.safetensors"}})"), FormatError, "bad.json", "head",
                    "not a file name");
  WICK_EXPECT_ERROR(index(R"({"weight_map": {"head": ".."}})"), FormatError, "head", "not a file name");
  WICK_EXPECT_ERROR(index(R"({"weight_map": {"head": 3}})"), FormatError, "head", "not a string");
  WICK_EXPECT_ERROR(index(R"({"metadata": {}})"), FormatError, "weight_map");
  WICK_EXPECT_ERROR(index(R"({"weight_map": {"head": "model-00001-of-00002.safetensors"}})"), FormatError, "head", "does not hold it");
  WICK_EXPECT_ERROR(index(R"({"weight_map": {"head": "missing.safetensors"}})"), Error, "missing.safetensors");
  a.write(dir.file("copy.safetensors"));
  WICK_EXPECT_ERROR(index(R"({"weight_map": {"embed": "model-00001-of-00002.safetensors", "norm": "copy.safetensors"}})"), FormatError,
                    "embed", "in two shards");
  WICK_EXPECT_ERROR(index("not json"), FormatError, "bad.json", "not JSON");
  TempDir empty;
  WICK_EXPECT_ERROR(SafetensorsCheckpoint::open(empty.path()), Error, "neither");
}

}  // namespace
}  // namespace wick::test
