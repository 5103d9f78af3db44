// Devices: the CPU, and GPUs of the CUDA or the ROCm backend. Every kind exists in the API; a
// device whose backend is not built in, or that does not exist, raises DeviceError when used.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace wick {

enum class DeviceType : uint8_t { Cpu, Cuda, Rocm };

// The largest device ordinal wick parses ("cuda:1023"); no host has more GPUs.
inline constexpr int kMaxDeviceIndex = 1023;

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {}

  static constexpr Device cpu() { return {}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::Cuda, index}; }
  static constexpr Device rocm(int index = 0) { return {DeviceType::Rocm, index}; }

  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::Cpu; }
  constexpr bool is_gpu() const { return type_ != DeviceType::Cpu; }

  // "cpu", "cuda:0", "rocm:1"
  std::string to_string() const;
  // Parses what to_string prints ("cuda" alone means "cuda:0"; the ordinal is decimal digits, at
  // most kMaxDeviceIndex; "cpu:1" parses, as to_string prints it, and is refused where used);
  // returns false, leaving *out alone, if malformed.
  static bool parse(const std::string& text, Device* out);

  friend constexpr bool operator==(Device a, Device b) { return a.type_ == b.type_ && a.index_ == b.index_; }

 private:
  DeviceType type_ = DeviceType::Cpu;
  int index_ = 0;
};

std::ostream& operator<<(std::ostream& os, Device d);

// Whether a backend was compiled into this build of wick.
bool backend_built(DeviceType type);

// How many devices of this type are present (1 for the CPU; 0 for a backend not built in).
int device_count(DeviceType type);

// Why a backend that is built in has no device: the runtime's own words ("no CUDA-capable device
// is detected", a driver too old, ...). Empty where it has devices, or is not built in.
std::string no_device_reason(DeviceType type);

// Every device present: the CPU first, then GPUs.
std::vector<Device> available_devices();

// One line about a present device: its name and properties ("cpu: 16 threads", a GPU's name,
// memory, compute capability or gfx name, warp size, multiprocessors).
std::string describe_device(Device device);

// Ends the calling thread's team of CPU threads (OpenMP's), which its next parallel op starts
// again. Call it on a thread whose CPU work moves to another thread, as models::Engine does on the
// thread that built it: OpenMP counts the threads of every thread's team, and once they outnumber
// the processors its waiting threads sleep at once instead of spinning, so that every op has to wake
// them again.
void release_host_threads();

// The bytes wick's allocator has handed out on a device and not yet had back: now, and the most at
// once since the process started or reset_peak_memory(device). Counts tensors, the ops' temporary
// buffers (a dequantized weight, the CPU kernels' large scratch) and cuBLAS's workspace, each at
// the size asked for; not the allocators' rounding and cached blocks, nor memory wick did not
// allocate (a mapped file's).
struct MemoryUse {
  int64_t in_use = 0;
  int64_t peak = 0;
};
MemoryUse memory_use(Device device);
void reset_peak_memory(Device device);

// The device's memory: `free`, what it could still hand out (a GPU's after giving back what wick's
// allocator keeps for reuse, which this waits for the device's work to do; the CPU's available
// physical memory), and `total`.
struct DeviceMemory {
  int64_t free = 0;
  int64_t total = 0;
};
DeviceMemory device_memory(Device device);

// Blocks until all work queued on the device is done (a no-op on the CPU).
void synchronize(Device device);

// The stream on which wick queues the device's work, as the runtime's handle (a cudaStream_t or
// hipStream_t): for ordering other libraries' work with wick's (DLPack's stream argument). Null
// for the CPU. wick's streams do not synchronise with the legacy default stream.
void* native_stream(Device device);

// Seeds the device's random generator; rand_uniform/rand_normal on any device give the same
// numbers for the same seed and the same sequence of calls.
void manual_seed(uint64_t seed, Device device = Device::cpu());

// Whether f32 matmul and convolution on NVIDIA GPUs may use TF32 tensor cores (inputs rounded
// to 10 mantissa bits, f32 accumulation): faster, less exact. Off by default, so that f32 means
// f32 everywhere; other backends ignore it.
void set_allow_tf32(bool allow);
bool allow_tf32();

// Batch-invariant kernels on the calling thread. With it on, each row of a product by a matrix that
// every row shares (a linear layer: matmul by a weight broadcast over the batch, quant::qmatmul),
// each row of a norm, and each query token of nn::paged_attention get the same bits whatever the
// other rows of the call are and however many there are, on one device and build: a request's
// logits do not depend on the requests batched beside it or on how its prompt was chunked. The
// products then keep one reduction order for every row count (f32, f16 and bf16; other products
// are unchanged), which costs speed (docs/serving.md measures it). Off by default. Returns the
// previous setting.
bool set_batch_invariant(bool on);
bool batch_invariant();

}  // namespace wick
