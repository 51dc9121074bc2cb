#include "backend/xdna/fake/fake_device.h"

#include <algorithm>
#include <cstring>

#include "backend/xdna/fake_kernels.h"
#include "backend/xdna/xclbin.h"

namespace tessera {

FakeXdnaDevice::FakeXdnaDevice(XdnaGeneration generation, size_t memory_bytes)
    : context_limit_(NpuTargetFor(generation).hw_context_limit), memory_limit_(memory_bytes) {
  description_.generation = generation;
  description_.fake = true;
  description_.name = Name(generation);
}

std::string FakeXdnaDevice::Name(XdnaGeneration generation) {
  return "fake " + std::string(GenerationName(generation)) +
         " (CPU reference kernels; no NPU executes anything)";
}

Expected<ProgramId> FakeXdnaDevice::OpenProgram(const NpuProgram& program) {
  std::lock_guard lock(mu_);
  int open = 0;
  for (const Program& p : programs_) open += p.open;
  if (open >= context_limit_) {
    return ResourceExhausted("NPU hardware contexts: " + std::to_string(open) + " of " +
                             std::to_string(context_limit_) + " in use; cannot open " +
                             program.name);
  }
  // The container is checked as XRT would before registering it: it must parse, and its AIE
  // partition must fit the device's columns.
  if (program.xclbin.empty()) return InvalidArgument("program " + program.name + " has no xclbin");
  auto xclbin = ParseXclbin(program.xclbin);
  if (!xclbin) return xclbin.status().WithContext("program " + program.name);
  const int columns = NpuTargetFor(description_.generation).columns;
  if (xclbin->aie_partition && xclbin->aie_partition->column_width > columns) {
    return InvalidArgument("program " + program.name + " needs " +
                           std::to_string(xclbin->aie_partition->column_width) +
                           " columns; the device has " + std::to_string(columns));
  }
  Program p;
  p.open = true;
  for (const NpuKernel& k : program.kernels) {
    const FakeKernel* fk = FindFakeKernel(k.name);
    if (fk == nullptr) {
      return Unsupported("program " + program.name + ": kernel '" + k.name +
                         "' has no reference implementation on the fake device");
    }
    p.kernels.push_back(fk);
  }
  if (p.kernels.empty()) return InvalidArgument("program " + program.name + " has no kernels");
  programs_.push_back(std::move(p));
  return static_cast<ProgramId>(programs_.size() - 1);
}

Status FakeXdnaDevice::CloseProgram(ProgramId program) {
  std::lock_guard lock(mu_);
  if (program < 0 || static_cast<size_t>(program) >= programs_.size() ||
      !programs_[static_cast<size_t>(program)].open) {
    return InvalidArgument("no open program " + std::to_string(program));
  }
  programs_[static_cast<size_t>(program)].open = false;
  return Status::Ok();
}

int FakeXdnaDevice::open_programs() const {
  std::lock_guard lock(mu_);
  int open = 0;
  for (const Program& p : programs_) open += p.open;
  return open;
}

Expected<BufferId> FakeXdnaDevice::AllocateBuffer(size_t bytes, BufferKind kind, ProgramId program,
                                                  int kernel, int arg_index) {
  std::lock_guard lock(mu_);
  if (program < 0 || static_cast<size_t>(program) >= programs_.size() ||
      !programs_[static_cast<size_t>(program)].open) {
    return InvalidArgument("buffer for program " + std::to_string(program) + ", which is not open");
  }
  const Program& p = programs_[static_cast<size_t>(program)];
  if (kernel < 0 || static_cast<size_t>(kernel) >= p.kernels.size() || arg_index < 0 ||
      arg_index >= p.kernels[static_cast<size_t>(kernel)]->arity) {
    return InvalidArgument("buffer for a kernel argument the program does not have");
  }
  if (bytes == 0) return InvalidArgument("a buffer of 0 bytes");
  if (bytes > memory_limit_ - allocated_) {
    return ResourceExhausted(description_.name + ": " + std::to_string(bytes) +
                             " more bytes of buffers do not fit beside " +
                             std::to_string(allocated_) + " of " + std::to_string(memory_limit_));
  }
  auto it = std::find_if(buffers_.begin(), buffers_.end(), [](const Buffer& b) { return !b.live; });
  if (it == buffers_.end()) it = buffers_.insert(buffers_.end(), Buffer{});
  it->live = true;
  it->kind = kind;
  it->host.assign(bytes, 0);
  it->device.assign(bytes, 0);
  allocated_ += bytes;
  return static_cast<BufferId>(it - buffers_.begin());
}

FakeXdnaDevice::Buffer* FakeXdnaDevice::Find(BufferId id) {
  if (id < 0 || static_cast<size_t>(id) >= buffers_.size()) return nullptr;
  Buffer& b = buffers_[static_cast<size_t>(id)];
  return b.live ? &b : nullptr;
}

Status FakeXdnaDevice::FreeBuffer(BufferId buffer) {
  std::lock_guard lock(mu_);
  Buffer* b = Find(buffer);
  if (b == nullptr) return InvalidArgument("no buffer " + std::to_string(buffer));
  allocated_ -= b->host.size();
  b->live = false;
  b->host = {};
  b->device = {};
  return Status::Ok();
}

std::span<uint8_t> FakeXdnaDevice::Map(BufferId buffer) {
  std::lock_guard lock(mu_);
  Buffer* b = Find(buffer);
  return b == nullptr ? std::span<uint8_t>() : std::span<uint8_t>(b->host);
}

Status FakeXdnaDevice::Sync(BufferId buffer, SyncDirection direction, size_t offset, size_t bytes) {
  std::lock_guard lock(mu_);
  Buffer* b = Find(buffer);
  if (b == nullptr) return InvalidArgument("sync of unknown buffer " + std::to_string(buffer));
  const size_t size = b->host.size();
  if (offset > size || (bytes != 0 && bytes > size - offset)) {
    return OutOfRange("sync past the end of buffer " + std::to_string(buffer));
  }
  const size_t n = bytes == 0 ? size - offset : bytes;
  if (direction == SyncDirection::kToDevice) {
    std::memcpy(b->device.data() + offset, b->host.data() + offset, n);
  } else {
    std::memcpy(b->host.data() + offset, b->device.data() + offset, n);
  }
  return Status::Ok();
}

size_t FakeXdnaDevice::allocated_bytes() const {
  std::lock_guard lock(mu_);
  return allocated_;
}

Expected<ChainResult> FakeXdnaDevice::RunChain(std::span<const Run> runs,
                                               std::chrono::milliseconds /*timeout*/) {
  std::lock_guard lock(mu_);
  // Every run is checked before any executes: a malformed chain is the caller's bug.
  for (const Run& r : runs) {
    if (r.program < 0 || static_cast<size_t>(r.program) >= programs_.size() ||
        !programs_[static_cast<size_t>(r.program)].open) {
      return InvalidArgument("run of a program that is not open");
    }
    const Program& p = programs_[static_cast<size_t>(r.program)];
    if (r.kernel < 0 || static_cast<size_t>(r.kernel) >= p.kernels.size()) {
      return InvalidArgument("run of a kernel the program does not have");
    }
    if (static_cast<int>(r.args.size()) != p.kernels[static_cast<size_t>(r.kernel)]->arity) {
      return InvalidArgument(std::string(p.kernels[static_cast<size_t>(r.kernel)]->name) +
                             ": wrong number of arguments");
    }
    for (const RunArg& a : r.args) {
      if (a.kind == RunArg::Kind::kBuffer && Find(a.buffer) == nullptr)
        return InvalidArgument("run argument names unknown buffer " + std::to_string(a.buffer));
    }
  }
  ChainResult result;
  std::vector<KernelArg> args;
  for (const Run& r : runs) {
    const FakeKernel& k =
        *programs_[static_cast<size_t>(r.program)].kernels[static_cast<size_t>(r.kernel)];
    args.clear();
    for (const RunArg& a : r.args) {
      if (a.kind == RunArg::Kind::kBuffer) {
        args.push_back({std::span<uint8_t>(Find(a.buffer)->device), 0, true});
      } else {
        args.push_back({{}, a.scalar, false});
      }
    }
    if (Status s = k.run(args); !s.ok()) {
      // A kernel refusing its arguments is what an NPU's abort looks like to the host.
      result.state = RunState::kAborted;
      result.detail = std::string(k.name) + ": " + s.message();
      return result;
    }
    ++result.runs_completed;
  }
  return result;
}

}  // namespace tessera
