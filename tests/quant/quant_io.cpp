// A command-line bridge to wick's quantizer, dequantizer and GGUF reader and writer, for the external
// check against python3-gguf and llama-quantize (tests/quant/check_gguf.py):
//   quant_io quantize   QTYPE ROWS COLS IN.f32 OUT.blocks   ggml's reference quantizer as wick has it,
//                                           block by block, values past the format's limit
//                                           included (quant::quantize refuses those:
//                                           test_quant_hostile checks that)
//   quant_io dequantize QTYPE ROWS COLS IN.blocks OUT.f32 [DEVICE]
//   quant_io gguf-list  IN.gguf OUT.txt     what wick reads: one line per metadata entry
//                                           ("kv KEY TYPE COUNT") and per tensor ("tensor NAME
//                                           GGML_TYPE DIMS NBYTES CHECKSUM"), DIMS row-major
//   quant_io gguf-copy  IN.gguf OUT.gguf    read with wick, written back with wick's writer
// Raw files are little-endian arrays: f32 values row by row, or the blocks as GGUF stores them.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "quant/quant_ops.h"
#include "wick/io.h"
#include "wick/quant.h"

namespace {

namespace kq = wick::kernels::quant;

// The blocks of rows x cols values, each through the block quantizer that quant::quantize runs:
// the bytes ggml makes, an infinite scale where a value passes the format's limit.
std::vector<uint8_t> blocks_of(wick::quant::QType q, const float* x, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out(static_cast<size_t>(rows * wick::quant::row_bytes(q, cols)));
  kq::dispatch_qtype(q, [&]<wick::quant::QType Q>() {
    using Block = typename kq::Format<Q>::Block;
    auto* b = reinterpret_cast<Block*>(out.data());
    const int64_t n = rows * cols / kq::Format<Q>::kValues;
    for (int64_t i = 0; i < n; ++i) (void)wick::quant::detail::quantize_block<Q>(x + i * kq::Format<Q>::kValues, b[i]);
  });
  return out;
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// A position-weighted sum of a tensor's bytes, sum of b[i] * (i % 251 + 1) modulo 2^64: what numpy
// computes in one line on the other side.
uint64_t checksum(std::span<const uint8_t> bytes) {
  uint64_t h = 0;
  for (size_t i = 0; i < bytes.size(); ++i) h += uint64_t{bytes[i]} * (i % 251 + 1);
  return h;
}

void gguf_list(const std::string& in, const std::string& out) {
  const wick::io::GgufFile f = wick::io::GgufFile::open(in);
  std::ofstream o(out);
  for (const auto& [key, v] : f.metadata()) {
    const auto* a = std::get_if<wick::io::GgufArray>(&v.value);
    o << "kv " << key << " " << wick::io::gguf_type_name(v.type) << " " << (a ? a->items.size() : 1) << "\n";
  }
  for (const wick::io::GgufTensor& t : f.tensors()) {
    o << "tensor " << t.name << " " << t.ggml_type << " ";
    for (int i = 0; i < t.shape.rank(); ++i) o << (i ? "," : "") << t.shape[i];
    o << " " << t.nbytes << " " << checksum(f.data(t)) << "\n";
  }
  if (!o) throw std::runtime_error("cannot write " + out);
}

void gguf_copy(const std::string& in, const std::string& out) {
  const wick::io::GgufFile f = wick::io::GgufFile::open(in);
  wick::io::GgufWriter w;
  for (const auto& [key, v] : f.metadata()) w.set(key, v);
  for (const wick::io::GgufTensor& t : f.tensors()) {
    if (t.qtype)
      w.add(t.name, f.qtensor(t));
    else
      w.add(t.name, f.tensor(t));
  }
  w.write(out);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace wick;
  if (argc == 4 && (std::string(argv[1]) == "gguf-list" || std::string(argv[1]) == "gguf-copy")) {
    try {
      if (std::string(argv[1]) == "gguf-list")
        gguf_list(argv[2], argv[3]);
      else
        gguf_copy(argv[2], argv[3]);
    } catch (const std::exception& e) {
      std::cerr << "quant_io: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  if (argc < 7) {
    std::cerr << "usage: quant_io quantize|dequantize QTYPE ROWS COLS IN OUT [DEVICE], or gguf-list|gguf-copy IN OUT\n";
    return 2;
  }
  try {
    const std::string cmd = argv[1];
    const auto qtype = quant::parse_qtype(argv[2]);
    if (!qtype) throw std::runtime_error(std::string("unknown type ") + argv[2]);
    const int64_t rows = std::stoll(argv[3]), cols = std::stoll(argv[4]);
    const std::vector<char> in = read_file(argv[5]);
    Device device = Device::cpu();
    if (argc > 7 && !Device::parse(argv[7], &device)) throw std::runtime_error(std::string("bad device ") + argv[7]);
    if (cmd == "quantize") {
      if (static_cast<int64_t>(in.size()) != rows * cols * 4) throw std::runtime_error("the input is not rows x cols f32");
      std::vector<float> x(static_cast<size_t>(rows * cols));
      std::memcpy(x.data(), in.data(), in.size());
      const std::vector<uint8_t> bytes = blocks_of(*qtype, x.data(), rows, cols);
      write_file(argv[6], bytes.data(), bytes.size());
    } else if (cmd == "dequantize") {
      const quant::QTensor q =
          quant::QTensor::from_blocks(*qtype, rows, cols, in.data(), static_cast<int64_t>(in.size()), device);
      const std::vector<float> values = quant::dequantize(q).to_device(Device::cpu()).reshape({rows * cols}).to_vector<float>();
      write_file(argv[6], values.data(), values.size() * sizeof(float));
    } else {
      throw std::runtime_error("unknown command " + cmd);
    }
  } catch (const std::exception& e) {
    std::cerr << "quant_io: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
