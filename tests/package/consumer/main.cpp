// A C++ user of the installed wick: softmax of a small product, on every device present.
#include <iostream>

#include "wick/wick.h"

int main() {
  using wick::Tensor;
  for (wick::Device d : wick::available_devices()) {
    Tensor x = Tensor::from_vector({1.f, 2.f, 3.f, 4.f}, {2, 2}, d);
    Tensor p = wick::nn::softmax(x.matmul(x.t()), -1);
    const float row = p.sum(1).to_device(wick::Device::cpu()).to_vector<float>()[0];
    std::cout << "consumer (C++) on " << d << ": rows sum to " << row << "\n" << p.to_device(wick::Device::cpu()) << "\n";
    if (row < 0.999f || row > 1.001f) return 1;
  }
  std::cout << "consumer (C++): wick " << wick::version() << " ok\n";
  return 0;
}
