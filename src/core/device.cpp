#include "wick/device.h"

#include <cstdlib>
#include <ostream>

namespace wick {

std::string Device::to_string() const {
  switch (type_) {
    case DeviceType::Cpu: return index_ == 0 ? "cpu" : "cpu:" + std::to_string(index_);
    case DeviceType::Cuda: return "cuda:" + std::to_string(index_);
    case DeviceType::Rocm: return "rocm:" + std::to_string(index_);
  }
  return "?";
}

bool Device::parse(const std::string& text, Device* out) {
  if (text == "cpu") {
    *out = cpu();
    return true;
  }
  std::string kind = text.substr(0, text.find(':'));
  DeviceType type;
  if (kind == "cuda")
    type = DeviceType::Cuda;
  else if (kind == "rocm")
    type = DeviceType::Rocm;
  else
    return false;
  int index = 0;
  if (kind.size() < text.size()) {
    std::string digits = text.substr(kind.size() + 1);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
    index = std::atoi(digits.c_str());
  }
  *out = Device(type, index);
  return true;
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.to_string(); }

}  // namespace wick
