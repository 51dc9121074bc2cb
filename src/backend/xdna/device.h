// XdnaDevice: the device layer of the XDNA backend, shaped after XRT's NPU host pattern
// (../shared/npu/FACTS.md 2.2) so a real adapter is a thin translation: a program is an xclbin
// registered in a hardware context with its kernel and instruction sequence; buffers are
// host-only data buffers or instruction buffers with explicit sync; work is a chain of runs
// (XRT's runlist) that completes, times out, aborts or loses the device. The product's
// implementation is the XRT adapter (xrt_adapter.cc), compiled only where an XRT with hardware
// contexts is installed; the fake device (fake/fake_device.h, its own library) runs each
// program's CPU reference kernel and says so.
//
//   TS_ASSIGN_OR_RETURN(std::unique_ptr<XdnaDevice> dev, MakeXdnaDevice());   // XRT
//   TS_ASSIGN_OR_RETURN(ProgramId p, dev->OpenProgram(program));
//   // argument 0 of kernel 0 (run arguments count from 0; XRT's group is group_id(3 + i))
//   TS_ASSIGN_OR_RETURN(BufferId x, dev->AllocateBuffer(bytes, BufferKind::kData, p, 0, 0));
//   std::memcpy(dev->Map(x).data(), src, bytes);
//   TS_RETURN_IF_ERROR(dev->Sync(x, SyncDirection::kToDevice));
//   TS_ASSIGN_OR_RETURN(ChainResult r, dev->RunChain(runs, std::chrono::milliseconds(1000)));
//   TS_RETURN_IF_ERROR(dev->Sync(y, SyncDirection::kFromDevice));
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/xdna/npu_target.h"
#include "base/status.h"

namespace tessera {

using ProgramId = int32_t;
using BufferId = int32_t;

// A program is one xclbin holding several kernels (as IRON packs its operators), so that one
// hardware context serves a whole decoder layer: XDNA1 allows only 6 contexts. What a kernel
// computes is named by its name; the fake device looks the name up in its table of reference
// kernels (fake_kernels.h), a real device runs the kernel's instruction sequence.
struct NpuKernel {
  std::string name;                    // e.g. "tessera_matmul_bf16"
  std::vector<uint32_t> instructions;  // the instruction sequence (TXN), uploaded once
};
struct NpuProgram {
  std::string name;                // the manifest's program name, for logs
  std::vector<uint8_t> xclbin;     // the container XRT registers
  std::vector<NpuKernel> kernels;  // run by index (Run::kernel)
};

enum class BufferKind {
  kData,         // XRT_BO_FLAGS_HOST_ONLY on the kernel's group for its argument
  kInstruction,  // XCL_BO_FLAGS_CACHEABLE on group_id(1)
};
enum class SyncDirection { kToDevice, kFromDevice };

// One argument of a run: a buffer (the device's copy of it) or a 32-bit scalar.
struct RunArg {
  enum class Kind { kBuffer, kScalar } kind = Kind::kScalar;
  BufferId buffer = -1;
  uint32_t scalar = 0;
  static RunArg Buffer(BufferId b) { return {Kind::kBuffer, b, 0}; }
  static RunArg Scalar(uint32_t v) { return {Kind::kScalar, -1, v}; }
};
struct Run {
  ProgramId program = -1;
  int kernel = 0;  // index into the program's kernels
  std::vector<RunArg> args;
};

// ERT's end states of a command, as a chain reports them.
enum class RunState { kCompleted, kTimeout, kAborted, kDeviceLost };
std::string_view RunStateName(RunState state);

struct ChainResult {
  RunState state = RunState::kCompleted;
  int64_t runs_completed = 0;  // runs that finished before the state was reached
  std::string detail;          // the device's words on a failure
};

struct DeviceDescription {
  XdnaGeneration generation = XdnaGeneration::kXdna1;
  std::string name;  // "fake xdna1 (CPU reference kernels, no NPU)" or the device's own
  bool fake = false;
};

class XdnaDevice {
 public:
  virtual ~XdnaDevice() = default;
  virtual const DeviceDescription& description() const = 0;

  // Registers the program's xclbin, opens a hardware context and its kernel. Refused when the
  // generation's hardware-context budget is used up.
  virtual Expected<ProgramId> OpenProgram(const NpuProgram& program) = 0;
  virtual Status CloseProgram(ProgramId program) = 0;
  virtual int open_programs() const = 0;

  // A buffer for argument `arg_index` (counted from 0, as Run::args) of kernel `kernel` of
  // `program`: XRT places it by the kernel's argument group, group_id(3 + arg_index), after
  // mlir-aie's opcode, instruction buffer and instruction count.
  virtual Expected<BufferId> AllocateBuffer(size_t bytes, BufferKind kind, ProgramId program,
                                            int kernel, int arg_index) = 0;
  virtual Status FreeBuffer(BufferId buffer) = 0;
  // The host's view. What the device computes is seen here only after a kFromDevice sync;
  // what the host writes reaches the device only with a kToDevice sync.
  virtual std::span<uint8_t> Map(BufferId buffer) = 0;
  virtual Status Sync(BufferId buffer, SyncDirection direction, size_t offset = 0,
                      size_t bytes = 0 /* 0: to the end */) = 0;
  virtual size_t allocated_bytes() const = 0;

  // Runs `runs` in order as one command chain and waits up to `timeout` for all of them. A
  // failure is a result, not an error: the caller decides to retry, fall back or give up.
  // Errors are for bad arguments (unknown program or buffer).
  virtual Expected<ChainResult> RunChain(std::span<const Run> runs,
                                         std::chrono::milliseconds timeout) = 0;
};

// The XRT device when this build has the adapter and a device answers; otherwise an error
// that says why and what to do (run `tessera doctor`). Programs that offer other devices
// (--npu-device, fake/npu_device_flag.h) pass their maker in NpuOptions.
Expected<std::unique_ptr<XdnaDevice>> MakeXdnaDevice();

}  // namespace tessera
