// The readers of include/wick/io.h against what a hostile caller or file can do beyond a broken
// field (test_io.cpp has those): entries of one file read through another, or changed after they
// were read; FIFOs and other files that are not regular; keys named twice; ranks past wick's.
#include <unistd.h>

#include <cstring>
#include <sys/stat.h>

#include "test_util.h"
#include "wick/io.h"

namespace wick::test {
namespace {

using io::FormatError;
using io::GgufFile;
using io::GgufWriter;
using io::SafetensorsCheckpoint;
using io::SafetensorsFile;
using io::SafetensorsWriter;

std::vector<float> values(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(i % 97) - 3.f;
  return v;
}

GgufFile small_gguf(int64_t rows) {
  GgufWriter w;
  w.add("w", Tensor::from_vector(values(rows * 64, 0.5f), {rows, 64}));
  w.add("q", quant::quantize(Tensor::from_vector(values(rows * 256, 0.1f), {rows, 256}), quant::QType::Q4_K));
  return GgufFile::parse(w.bytes(), detail::str_cat("small", rows, ".gguf"));
}

TEST(HostileEntries, GgufEntriesAreBoundToTheirFile) {
  const GgufFile small = small_gguf(2), large = small_gguf(64);
  // The file's own entries, and copies of them, read as ever.
  io::GgufTensor copy = *large.find_tensor("w");
  EXPECT_EQ(large.tensor(copy).to_vector<float>(), values(64 * 64, 0.5f));
  EXPECT_EQ(large.data(copy).size(), size_t{64 * 64 * 4});
  // The large file's entry through the small file: its bytes lie past the small file's end.
  WICK_EXPECT_ERROR(small.tensor(*large.find_tensor("w")), Error, "small2.gguf", "w", "not this file's");
  WICK_EXPECT_ERROR(small.data(*large.find_tensor("w")), Error, "small2.gguf", "not this file's");
  WICK_EXPECT_ERROR(small.qtensor(*large.find_tensor("q")), Error, "small2.gguf", "q", "not this file's");
  // A copy changed after it was read: an offset far past the end, a larger shape, another type.
  io::GgufTensor far = *small.find_tensor("w");
  far.offset = int64_t{1} << 40;
  WICK_EXPECT_ERROR(small.tensor(far), Error, "offset 1099511627776", "not this file's");
  io::GgufTensor wider = *small.find_tensor("w");
  wider.shape = Shape({2000, 64});
  wider.nbytes = 2000 * 64 * 4;
  WICK_EXPECT_ERROR(small.tensor(wider), Error, "[2000, 64]", "not this file's");
  io::GgufTensor bigger = *small.find_tensor("q");
  bigger.nbytes *= 1000;
  WICK_EXPECT_ERROR(small.qtensor(bigger), Error, "not this file's");
  io::GgufTensor retyped = *small.find_tensor("w");
  retyped.dtype = DType::F64;
  WICK_EXPECT_ERROR(small.tensor(retyped), Error, "not this file's");
  io::GgufTensor renamed = *small.find_tensor("w");
  renamed.name = "nosuch";
  WICK_EXPECT_ERROR(small.tensor(renamed), Error, "no tensor named nosuch");
}

TEST(HostileEntries, SafetensorsEntriesAreBoundToTheirFile) {
  SafetensorsWriter a, b;
  a.add("w", Tensor::from_vector(values(4, 1.f), {2, 2}));
  b.add("w", Tensor::from_vector(values(4096, 1.f), {64, 64}));
  const SafetensorsFile small = SafetensorsFile::parse(a.bytes(), "small.safetensors");
  const SafetensorsFile large = SafetensorsFile::parse(b.bytes(), "large.safetensors");
  EXPECT_EQ(large.tensor(*large.find_tensor("w")).to_vector<float>(), values(4096, 1.f));
  WICK_EXPECT_ERROR(small.tensor(*large.find_tensor("w")), Error, "small.safetensors", "w", "not this file's");
  WICK_EXPECT_ERROR(small.data(*large.find_tensor("w")), Error, "not this file's");
  io::SafetensorsTensor far = *small.find_tensor("w");
  far.offset = int64_t{1} << 40;
  WICK_EXPECT_ERROR(small.tensor(far), Error, "not this file's");
  io::SafetensorsTensor retyped = *small.find_tensor("w");
  retyped.dtype = DType::F64;
  retyped.dtype_name = "F64";
  WICK_EXPECT_ERROR(small.tensor(retyped), Error, "not this file's");
}

// A FIFO with no writer: opening one for reading would wait forever.
class Fifo {
 public:
  explicit Fifo(const std::string& path) : path_(path) {
    if (mkfifo(path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + path + ": " + std::strerror(errno));
  }
  ~Fifo() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(HostileFiles, FifosAndDevicesAreRefusedAtOnce) {
  TempDir dir;
  const Fifo fifo(dir.file("model.gguf"));
  WICK_EXPECT_ERROR(GgufFile::open(fifo.path()), Error, fifo.path(), "a FIFO, not a regular file");
  WICK_EXPECT_ERROR(SafetensorsFile::open(fifo.path()), Error, fifo.path(), "a FIFO");
  WICK_EXPECT_ERROR(SafetensorsCheckpoint::open(fifo.path()), Error, "a FIFO");
  WICK_EXPECT_ERROR(GgufFile::open("/dev/zero"), Error, "/dev/zero", "a device");
  // A shard of a checkpoint that is a FIFO, and one that is a directory.
  dir.write("model.safetensors.index.json", R"({"weight_map": {"w": "shard.safetensors"}})");
  const Fifo shard(dir.file("shard.safetensors"));
  WICK_EXPECT_ERROR(SafetensorsCheckpoint::open(dir.path()), Error, "shard.safetensors", "a FIFO");
  TempDir other;
  other.write("model.safetensors.index.json", R"({"weight_map": {"w": "sub"}})");
  std::filesystem::create_directory(other.file("sub"));
  WICK_EXPECT_ERROR(SafetensorsCheckpoint::open(other.path()), Error, "sub", "is a directory, not a regular file");
  try {
    SafetensorsCheckpoint::open(other.path());
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
}

// A safetensors file of `header` and 4 bytes of data.
std::vector<uint8_t> with_header(const std::string& header) {
  std::vector<uint8_t> bytes(8 + header.size() + 4, 0);
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

TEST(HostileFiles, SafetensorsKeysNamedTwiceAreRefused) {
  const std::string twice =
      R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  WICK_EXPECT_ERROR(SafetensorsFile::parse(with_header(twice), "twice.safetensors"), FormatError, "twice.safetensors",
                    "t", "the key appears twice");
  // Within one tensor's object too.
  const std::string field = R"({"t":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})";
  WICK_EXPECT_ERROR(SafetensorsFile::parse(with_header(field), "field.safetensors"), FormatError, "dtype",
                    "appears twice");
  // An index that maps a tensor twice.
  TempDir dir;
  SafetensorsWriter w;
  w.add("w", Tensor::from_vector(values(4, 1.f), {4}));
  w.write(dir.file("a.safetensors"));
  dir.write("model.safetensors.index.json", R"({"weight_map": {"w": "a.safetensors", "w": "a.safetensors"}})");
  WICK_EXPECT_ERROR(SafetensorsCheckpoint::open(dir.path()), FormatError, "model.safetensors.index.json", "w", "twice");
}

TEST(HostileFiles, SafetensorsRankPastWicksIsNamed) {
  const std::string header = R"({"deep":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})";
  WICK_EXPECT_ERROR(SafetensorsFile::parse(with_header(header), "deep.safetensors"), FormatError, "deep.safetensors",
                    "deep", "rank 9");
}

}  // namespace
}  // namespace wick::test
