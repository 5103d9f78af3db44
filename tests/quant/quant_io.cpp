// A command-line bridge to wick's quantizer and dequantizer over raw files, for the external check
// against python3-gguf's gguf.quants and llama-quantize (tests/quant/check_gguf.py):
//   quant_io quantize   QTYPE ROWS COLS IN.f32 OUT.blocks
//   quant_io dequantize QTYPE ROWS COLS IN.blocks OUT.f32 [DEVICE]
// Files are raw little-endian arrays: f32 values row by row, or the blocks as GGUF stores them.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "wick/quant.h"

namespace {

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

}  // namespace

int main(int argc, char** argv) {
  using namespace wick;
  if (argc < 7) {
    std::cerr << "usage: quant_io quantize|dequantize QTYPE ROWS COLS IN OUT [DEVICE]\n";
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
      const Tensor w = Tensor::from_data(in.data(), static_cast<int64_t>(in.size() / 4), DType::F32, {rows, cols});
      const quant::QTensor q = quant::quantize(w, *qtype);
      const std::vector<uint8_t> bytes = q.bytes().reshape({q.nbytes()}).to_vector<uint8_t>();
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
