#include "wick/device.h"

#include <charconv>
#include <string_view>
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
  std::string kind = text.substr(0, text.find(':'));
  DeviceType type;
  if (kind == "cpu")
    type = DeviceType::Cpu;
  else if (kind == "cuda")
    type = DeviceType::Cuda;
  else if (kind == "rocm")
    type = DeviceType::Rocm;
  else
    return false;
  int index = 0;
  if (kind.size() < text.size()) {
    // Decimal digits only (no sign, no spaces), at most kMaxDeviceIndex: "cuda:huge" and
    // "cuda:99999999999" are malformed, never wrapped into some other ordinal.
    const std::string_view digits = std::string_view(text).substr(kind.size() + 1);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec != std::errc() || end != digits.data() + digits.size() || index > kMaxDeviceIndex) return false;
  }
  *out = Device(type, index);
  return true;
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.to_string(); }

}  // namespace wick
