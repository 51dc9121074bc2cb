// Test support: an XdnaDevice that passes every call to another device and fires one-shot
// faults on the chains a test names: a chain that times out or aborts part way, one that
// reports completion without running anything (FACTS 2.2's warning), a lost device after
// which every call fails, or a chain that never returns (a hung step: the server's
// --hang-timeout kills its worker). For the xdna backend's fault handling; the product has no
// faults to inject, its fake device included.
//
//   FaultInjectingDevice dev(std::make_unique<FakeXdnaDevice>(XdnaGeneration::kXdna1));
//   dev.InjectFault({InjectedFault::kTimeout, dev.chains_run() + 3});  // the 4th chain from now
//   // or, for the device a process's xdna backends share (NpuOptions::make_device):
//   options.npu.make_device = FaultInjectingDevice::Maker(fake.make, {{InjectedFault::kAbort, 2}});
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/xdna/device.h"

namespace tessera::test {

struct InjectedFault {
  enum Kind {
    kTimeout,                  // the chain stops half way; ERT_CMD_STATE_TIMEOUT
    kAbort,                    // the chain stops half way; ERT_CMD_STATE_ABORT
    kDeviceLost,               // the chain stops half way; this and every later call fails
    kCompletedNothingWritten,  // reports completion, runs nothing
    kHang,                     // never returns (ignores its timeout); the process must be killed
  };
  Kind kind = kTimeout;
  int64_t at_chain = 0;  // fires on the chain with this index (0: the first chain run)
};
// "timeout@5", "abort@0", "lost@2", "nothing@1", "hang@6".
Expected<InjectedFault> ParseInjectedFault(std::string_view text);

class FaultInjectingDevice final : public XdnaDevice {
 public:
  explicit FaultInjectingDevice(std::unique_ptr<XdnaDevice> inner);
  // A maker (NpuOptions::make_device) of `inner`'s device with `faults` injected.
  static XdnaDeviceMaker Maker(XdnaDeviceMaker inner, std::vector<InjectedFault> faults);

  void InjectFault(const InjectedFault& fault);
  int64_t chains_run() const;  // RunChain calls so far

  const DeviceDescription& description() const override { return inner_->description(); }
  Expected<ProgramId> OpenProgram(const NpuProgram& program) override;
  Status CloseProgram(ProgramId program) override { return inner_->CloseProgram(program); }
  int open_programs() const override { return inner_->open_programs(); }
  Expected<BufferId> AllocateBuffer(size_t bytes, BufferKind kind, ProgramId program, int kernel,
                                    int arg_index) override;
  Status FreeBuffer(BufferId buffer) override { return inner_->FreeBuffer(buffer); }
  std::span<uint8_t> Map(BufferId buffer) override { return inner_->Map(buffer); }
  Status Sync(BufferId buffer, SyncDirection direction, size_t offset, size_t bytes) override;
  size_t allocated_bytes() const override { return inner_->allocated_bytes(); }
  Expected<ChainResult> RunChain(std::span<const Run> runs,
                                 std::chrono::milliseconds timeout) override;

 private:
  Status CheckLost() const;

  std::unique_ptr<XdnaDevice> inner_;
  mutable std::mutex mu_;
  int64_t chains_ = 0;
  bool lost_ = false;
  std::vector<InjectedFault> faults_;
};

}  // namespace tessera::test
