#include <iostream>

#include "wick/wick.h"

int main() {
  using namespace wick;
  Device dev = available_devices().back();  // a GPU when one is present, else the CPU
  manual_seed(42, dev);

  Tensor logits = Tensor::rand_normal({4, 10}, 0.0, 1.0, DType::F32, dev);
  // softmax over the last dim, from primitives: broadcasting, reductions, unary ops
  Tensor shifted = logits - logits.max(-1, /*keepdim=*/true);
  Tensor probs = shifted.exp() / shifted.exp().sum(-1, true);

  Tensor best = probs.argmax(-1);                              // u32, ties to the first index
  Tensor picked = probs.gather(best.unsqueeze(-1), 1);         // [4, 1]
  Tensor half = probs.to_dtype(DType::BF16).t().contiguous();  // cast, then a transposed copy

  std::cout << "device " << dev << ", rows sum to " << probs.sum(-1).to_vector<float>()[0] << "\n";
  std::cout << "best " << best.to_vector<uint32_t>()[0] << " with p = " << picked.to_vector<float>()[0] << "\n";
  std::cout << half << "\n";
}
