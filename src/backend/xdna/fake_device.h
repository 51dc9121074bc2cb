// The fake XDNA device: the device layer (device.h) with the NPU replaced by the reference
// kernels of fake_kernels.h, for tests and demos on machines without an NPU. It keeps what a
// real device makes a caller get right: a hardware-context budget per generation, buffers
// whose host and device copies differ until synced, a memory budget, chains that run in order
// and can time out, abort, lose the device, or complete without writing anything. It never
// claims to be an NPU: its name says fake, and so does every log line and stats object that
// names it.
//
//   FakeXdnaDevice dev(XdnaGeneration::kXdna1);
//   dev.InjectFault({FakeFault::kTimeout, /*at_chain=*/3});   // the 4th chain times out
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "backend/xdna/device.h"
#include "backend/xdna/fake_kernels.h"

namespace tessera {

struct FakeFault {
  enum Kind {
    kTimeout,                  // the chain stops part way; ERT_CMD_STATE_TIMEOUT
    kAbort,                    // the chain stops part way; ERT_CMD_STATE_ABORT
    kDeviceLost,               // this and every later call fails
    kCompletedNothingWritten,  // reports completion, runs nothing (FACTS 2.2's warning)
  };
  Kind kind = kTimeout;
  int64_t at_chain = 0;  // fires on the chain with this index (0: the first chain run)
};

// "timeout@5", "abort@0", "lost@2", "nothing@1" (--npu-device fake:GEN,fault=...).
Expected<FakeFault> ParseFakeFault(std::string_view text);

class FakeXdnaDevice final : public XdnaDevice {
 public:
  // memory_bytes: what buffers may hold in all (a real device's limit is pinned memory).
  explicit FakeXdnaDevice(XdnaGeneration generation, size_t memory_bytes = size_t{8} << 30);

  // One-shot faults, each fired once when its chain comes.
  void InjectFault(const FakeFault& fault);
  int64_t chains_run() const;

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
  Status CheckLost() const;
  Buffer* Find(BufferId id);

  DeviceDescription description_;
  int context_limit_;
  size_t memory_limit_;
  mutable std::mutex mu_;  // calls may come from several models' threads
  std::vector<Program> programs_;
  std::vector<Buffer> buffers_;
  size_t allocated_ = 0;
  int64_t chains_ = 0;
  bool lost_ = false;
  std::vector<FakeFault> faults_;
};

}  // namespace tessera
