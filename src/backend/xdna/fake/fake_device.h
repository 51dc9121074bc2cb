// The fake XDNA device: the device layer (backend/xdna/device.h) with the NPU replaced by the
// reference kernels of fake_kernels.h, for tests and demos on machines without an NPU
// (--npu-device fake:xdna1|fake:xdna2, npu_device_flag.h). It keeps what a real device makes a
// caller get right: a hardware-context budget per generation, buffers whose host and device
// copies differ until synced, a memory budget, chains that run in order. It never claims to be
// an NPU: its name says fake, and so does every log line and stats object that names it. It
// has no faults of its own: tests wrap a device in tests/support's FaultInjectingDevice.
//
//   FakeXdnaDevice dev(XdnaGeneration::kXdna1, /*memory_bytes=*/size_t{64} << 20);
//   TS_ASSIGN_OR_RETURN(ProgramId p, dev.OpenProgram(program));   // as any XdnaDevice
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "backend/xdna/device.h"
#include "backend/xdna/fake_kernels.h"

namespace tessera {

class FakeXdnaDevice final : public XdnaDevice {
 public:
  // memory_bytes: what buffers may hold in all (a real device's limit is pinned memory).
  explicit FakeXdnaDevice(XdnaGeneration generation, size_t memory_bytes = size_t{8} << 30);
  // "fake xdna1 (CPU reference kernels; no NPU executes anything)": description().name.
  static std::string Name(XdnaGeneration generation);

  const DeviceDescription& description() const override { return description_; }
  Expected<ProgramId> OpenProgram(const NpuProgram& program) override;
  Status CloseProgram(ProgramId program) override;
  int open_programs() const override;
  Expected<BufferId> AllocateBuffer(size_t bytes, BufferKind kind, ProgramId program, int kernel,
                                    int arg_index) override;
  Status FreeBuffer(BufferId buffer) override;
  std::span<uint8_t> Map(BufferId buffer) override;
  Status Sync(BufferId buffer, SyncDirection direction, size_t offset, size_t bytes) override;
  size_t allocated_bytes() const override;
  Expected<ChainResult> RunChain(std::span<const Run> runs,
                                 std::chrono::milliseconds timeout) override;

 private:
  struct Program {
    bool open = false;
    std::vector<const FakeKernel*> kernels;
  };
  struct Buffer {
    bool live = false;
    BufferKind kind = BufferKind::kData;
    std::vector<uint8_t> host, device;  // the two sides a sync joins
  };
  Buffer* Find(BufferId id);

  DeviceDescription description_;
  int context_limit_;
  size_t memory_limit_;
  mutable std::mutex mu_;  // calls may come from several models' threads
  std::vector<Program> programs_;
  std::vector<Buffer> buffers_;
  size_t allocated_ = 0;
};

}  // namespace tessera
