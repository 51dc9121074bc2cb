#include "fault_injecting_device.h"

#include <charconv>
#include <optional>
#include <string>
#include <thread>

namespace tessera::test {

Expected<InjectedFault> ParseInjectedFault(std::string_view text) {
  const size_t at = text.find('@');
  const std::string_view kind = text.substr(0, at);
  InjectedFault f;
  if (kind == "timeout") {
    f.kind = InjectedFault::kTimeout;
  } else if (kind == "abort") {
    f.kind = InjectedFault::kAbort;
  } else if (kind == "lost") {
    f.kind = InjectedFault::kDeviceLost;
  } else if (kind == "nothing") {
    f.kind = InjectedFault::kCompletedNothingWritten;
  } else if (kind == "hang") {
    f.kind = InjectedFault::kHang;
  } else {
    return InvalidArgument("fault '" + std::string(text) +
                           "': expected timeout|abort|lost|nothing|hang@<chain index>");
  }
  if (at == std::string_view::npos) return f;
  const std::string_view n = text.substr(at + 1);
  auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), f.at_chain);
  if (ec != std::errc() || p != n.data() + n.size() || f.at_chain < 0) {
    return InvalidArgument("fault '" + std::string(text) +
                           "': the chain index must be a non-negative integer");
  }
  return f;
}

FaultInjectingDevice::FaultInjectingDevice(std::unique_ptr<XdnaDevice> inner)
    : inner_(std::move(inner)) {}

XdnaDeviceMaker FaultInjectingDevice::Maker(XdnaDeviceMaker inner,
                                            std::vector<InjectedFault> faults) {
  return [inner = std::move(inner),
          faults = std::move(faults)]() -> Expected<std::unique_ptr<XdnaDevice>> {
    TS_ASSIGN_OR_RETURN(std::unique_ptr<XdnaDevice> device, inner());
    auto wrapped = std::make_unique<FaultInjectingDevice>(std::move(device));
    for (const InjectedFault& f : faults) wrapped->InjectFault(f);
    return std::unique_ptr<XdnaDevice>(std::move(wrapped));
  };
}

void FaultInjectingDevice::InjectFault(const InjectedFault& fault) {
  std::lock_guard lock(mu_);
  faults_.push_back(fault);
}

int64_t FaultInjectingDevice::chains_run() const {
  std::lock_guard lock(mu_);
  return chains_;
}

Status FaultInjectingDevice::CheckLost() const {
  std::lock_guard lock(mu_);
  if (lost_) return DeviceLost(description().name + ": the device was lost (injected fault)");
  return Status::Ok();
}

Expected<ProgramId> FaultInjectingDevice::OpenProgram(const NpuProgram& program) {
  TS_RETURN_IF_ERROR(CheckLost());
  return inner_->OpenProgram(program);
}

Expected<BufferId> FaultInjectingDevice::AllocateBuffer(size_t bytes, BufferKind kind,
                                                        ProgramId program, int kernel,
                                                        int arg_index) {
  TS_RETURN_IF_ERROR(CheckLost());
  return inner_->AllocateBuffer(bytes, kind, program, kernel, arg_index);
}

Status FaultInjectingDevice::Sync(BufferId buffer, SyncDirection direction, size_t offset,
                                  size_t bytes) {
  TS_RETURN_IF_ERROR(CheckLost());
  return inner_->Sync(buffer, direction, offset, bytes);
}

Expected<ChainResult> FaultInjectingDevice::RunChain(std::span<const Run> runs,
                                                     std::chrono::milliseconds timeout) {
  TS_RETURN_IF_ERROR(CheckLost());
  std::optional<InjectedFault> fault;
  {
    std::lock_guard lock(mu_);
    const int64_t chain = chains_++;
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (it->at_chain == chain) {
        fault = *it;
        faults_.erase(it);
        break;
      }
    }
  }
  if (!fault) return inner_->RunChain(runs, timeout);
  if (fault->kind == InjectedFault::kHang) {
    // A kernel that never completes and a driver that never gives up on it.
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  if (fault->kind == InjectedFault::kCompletedNothingWritten) {
    ChainResult result;
    result.runs_completed = static_cast<int64_t>(runs.size());
    return result;
  }
  // The other faults stop the chain half way through, so that some runs did write.
  const size_t half = runs.size() / 2;
  TS_ASSIGN_OR_RETURN(ChainResult result, inner_->RunChain(runs.first(half), timeout));
  if (result.state != RunState::kCompleted) return result;
  switch (fault->kind) {
    case InjectedFault::kTimeout:
      result.state = RunState::kTimeout;
      result.detail = "injected fault: command timed out (ERT_CMD_STATE_TIMEOUT)";
      break;
    case InjectedFault::kAbort:
      result.state = RunState::kAborted;
      result.detail = "injected fault: command aborted (ERT_CMD_STATE_ABORT)";
      break;
    default: {
      std::lock_guard lock(mu_);
      lost_ = true;
      result.state = RunState::kDeviceLost;
      result.detail = "injected fault: device lost";
      break;
    }
  }
  return result;
}

}  // namespace tessera::test
