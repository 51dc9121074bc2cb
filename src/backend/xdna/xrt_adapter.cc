// XdnaDevice over XRT >= 2.17, mirroring mlir-aie's host code (runtime_lib/test_lib/
// test_utils.cpp init_xrt_load_kernel, xrt_test_wrapper.h; ../shared/npu/FACTS.md 2.2) line by
// line, plus xrt::runlist for chains (FACTS 2.1).
//
// NEVER COMPILED IN THIS PROJECT'S CI: Debian 12 ships XRT 2.13, which has no hw_context,
// register_xclbin or runlist. CMake builds this file only where a modern XRT is installed. It
// was compiled (never linked) once against Debian's 2.13 headers patched by hand with the
// modern declarations it uses (register_xclbin, hw_context, kernel(ctx, name), runlist), never
// against a real modern XRT, and never run on an NPU. Keep it small; the testable logic lives
// elsewhere.
#include "backend/xdna/xrt_adapter.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "xrt/xrt_bo.h"
#include "xrt/xrt_device.h"
#include "xrt/xrt_hw_context.h"
#include "xrt/xrt_kernel.h"
#if __has_include("xrt/experimental/xrt_kernel.h")
#include "xrt/experimental/xrt_kernel.h"  // xrt::runlist, XRT >= 2.19
#else
#include "experimental/xrt_kernel.h"  // xrt::runlist, XRT 2.17 and 2.18
#endif

#if !defined(XRT_VERSION_CODE) || XRT_VERSION_CODE < XRT_VERSION(2, 17)
#error "the XRT adapter needs XRT >= 2.17 (xrt::runlist); CMake should not have built it"
#endif

namespace tessera {
namespace {

constexpr uint32_t kOpcodeTransaction = 3;  // the TXN flow; XRT warns that 2 is legacy
constexpr const char* kDoctorHint = " (run `tessera doctor` for the device, driver and XRT)";

// The driver's VBNV as XRT reports it (amd/xdna-driver npu*_regs.c, both naming schemes).
Expected<XdnaGeneration> GenerationFromXrtDeviceName(const std::string& name) {
  for (const char* xdna1 : {"npu1", "Phoenix", "Hawk"}) {
    if (name.find(xdna1) != std::string::npos) return XdnaGeneration::kXdna1;
  }
  for (const char* xdna2 : {"npu2", "npu4", "npu5", "npu6", "Strix", "Krackan"}) {
    if (name.find(xdna2) != std::string::npos) return XdnaGeneration::kXdna2;
  }
  return Unsupported("XRT device 0 is '" + name +
                     "', not a Ryzen AI NPU this build knows (npu1, npu4, npu5, npu6)" +
                     kDoctorHint);
}

// A chain's end state from the state XRT reports for the run that failed.
RunState RunStateFromErt(ert_cmd_state state) {
  switch (state) {
    case ERT_CMD_STATE_TIMEOUT:
      return RunState::kTimeout;
    case ERT_CMD_STATE_NORESPONSE:
      return RunState::kDeviceLost;
    default:
      return RunState::kAborted;  // ERROR, ABORT, SKERROR, SKCRASHED, ...
  }
}

class XrtDevice final : public XdnaDevice {
 public:
  XrtDevice(xrt::device device, DeviceDescription description)
      : device_(std::move(device)), description_(std::move(description)) {}

  ~XrtDevice() override {
    // A runlist that timed out may still be executing with our buffers; XRT's destructor does
    // not wait, so give each a bounded last chance before the buffers go.
    for (const xrt::runlist& list : unfinished_) {
      try {
        list.wait(std::chrono::milliseconds(1000));
      } catch (...) {
      }
    }
  }

  const DeviceDescription& description() const override { return description_; }

  Expected<ProgramId> OpenProgram(const NpuProgram& program) override {
    std::lock_guard lock(mu_);
    const int limit = NpuTargetFor(description_.generation).hw_context_limit;
    if (static_cast<int>(programs_.size()) >= limit) {
      return ResourceExhausted("cannot open program '" + program.name +
                               "': " + std::to_string(limit) + " hardware contexts are open on " +
                               description_.name + "; close a program first");
    }
    if (program.kernels.empty()) {
      return InvalidArgument("program '" + program.name + "' has no kernels");
    }
    try {
      // mlir-aie: xrt::xclbin; find the kernel by name; register_xclbin; hw_context; kernel.
      xrt::xclbin xclbin(std::vector<char>(program.xclbin.begin(), program.xclbin.end()));
      const std::vector<xrt::xclbin::kernel> declared = xclbin.get_kernels();
      device_.register_xclbin(xclbin);
      Program opened{program.name, xrt::hw_context(device_, xclbin.get_uuid()), {}};
      for (const NpuKernel& k : program.kernels) {
        auto d = std::find_if(declared.begin(), declared.end(),
                              [&](const xrt::xclbin::kernel& x) { return x.get_name() == k.name; });
        if (d == declared.end() || static_cast<int>(d->get_num_args()) < kFirstDataArg) {
          return InvalidArgument("program '" + program.name + "': its xclbin has no kernel '" +
                                 k.name +
                                 "' with mlir-aie's (opcode, instr, ninstr, ...) "
                                 "arguments; check the artifact manifest");
        }
        if (k.instructions.empty()) {
          return InvalidArgument("program '" + program.name + "', kernel '" + k.name +
                                 "': no instruction sequence");
        }
        Kernel kernel{xrt::kernel(opened.context, k.name),
                      {},
                      0,
                      static_cast<int>(d->get_num_args()) - kFirstDataArg};
        // Instruction BO: cacheable on group_id(1), written and synced once (mlir-aie).
        const size_t bytes = k.instructions.size() * sizeof(uint32_t);
        kernel.instructions =
            xrt::bo(device_, bytes, XCL_BO_FLAGS_CACHEABLE, kernel.kernel.group_id(1));
        std::memcpy(kernel.instructions.map<void*>(), k.instructions.data(), bytes);
        kernel.instructions.sync(XCL_BO_SYNC_BO_TO_DEVICE);
        kernel.instruction_words = static_cast<uint32_t>(k.instructions.size());
        opened.kernels.push_back(std::move(kernel));
      }
      const ProgramId id = next_program_++;
      programs_.emplace(id, std::move(opened));
      return id;
    } catch (const std::exception& e) {
      return Unsupported("XRT refused program '" + program.name + "': " + e.what() + kDoctorHint);
    }
  }

  Status CloseProgram(ProgramId program) override {
    std::lock_guard lock(mu_);
    if (programs_.erase(program) == 0) return UnknownProgram(program);
    return Status::Ok();
  }
  int open_programs() const override {
    std::lock_guard lock(mu_);
    return static_cast<int>(programs_.size());
  }

  // arg_index counts the kernel's own arguments (Run::args); XRT's index is 3 + arg_index.
  Expected<BufferId> AllocateBuffer(size_t bytes, BufferKind kind, ProgramId program, int kernel,
                                    int arg_index) override {
    std::lock_guard lock(mu_);
    auto p = programs_.find(program);
    if (p == programs_.end()) return UnknownProgram(program);
    if (kernel < 0 || static_cast<size_t>(kernel) >= p->second.kernels.size()) {
      return InvalidArgument("program '" + p->second.name + "' has no kernel " +
                             std::to_string(kernel));
    }
    const Kernel& k = p->second.kernels[static_cast<size_t>(kernel)];
    if (arg_index < 0 || arg_index >= k.data_args) {
      return InvalidArgument("kernel " + std::to_string(kernel) + " of program '" + p->second.name +
                             "' has no argument " + std::to_string(arg_index));
    }
    if (bytes == 0) return InvalidArgument("cannot allocate an empty XRT buffer");
    try {
      // Data BOs: host-only on their argument's group; an instruction BO: cacheable on
      // group_id(1). Never bo::flags::normal: the amdxdna shim rejects it (FACTS 2.2).
      xrt::bo bo = kind == BufferKind::kInstruction
                       ? xrt::bo(device_, bytes, XCL_BO_FLAGS_CACHEABLE, k.kernel.group_id(1))
                       : xrt::bo(device_, bytes, XRT_BO_FLAGS_HOST_ONLY,
                                 k.kernel.group_id(kFirstDataArg + arg_index));
      const BufferId id = next_buffer_++;
      buffers_.emplace(id, Buffer{std::move(bo), bytes});
      allocated_bytes_ += bytes;
      return id;
    } catch (const std::exception& e) {
      return ResourceExhausted("XRT could not allocate " + std::to_string(bytes) +
                               " bytes: " + e.what() + kDoctorHint);
    }
  }

  Status FreeBuffer(BufferId buffer) override {
    std::lock_guard lock(mu_);
    auto b = buffers_.find(buffer);
    if (b == buffers_.end()) return UnknownBuffer(buffer);
    allocated_bytes_ -= b->second.bytes;
    buffers_.erase(b);
    return Status::Ok();
  }

  std::span<uint8_t> Map(BufferId buffer) override {
    std::lock_guard lock(mu_);
    auto b = buffers_.find(buffer);
    if (b == buffers_.end()) return {};
    try {
      return {b->second.bo.map<uint8_t*>(), b->second.bytes};
    } catch (const std::exception&) {
      return {};
    }
  }

  Status Sync(BufferId buffer, SyncDirection direction, size_t offset, size_t bytes) override {
    std::lock_guard lock(mu_);
    auto b = buffers_.find(buffer);
    if (b == buffers_.end()) return UnknownBuffer(buffer);
    const size_t size = b->second.bytes;
    if (offset > size || bytes > size - offset) {
      return OutOfRange("sync of bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                        ") past a buffer of " + std::to_string(size));
    }
    if (bytes == 0) bytes = size - offset;
    try {
      b->second.bo.sync(direction == SyncDirection::kToDevice ? XCL_BO_SYNC_BO_TO_DEVICE
                                                              : XCL_BO_SYNC_BO_FROM_DEVICE,
                        bytes, offset);
      return Status::Ok();
    } catch (const std::exception& e) {
      return IoError(std::string("XRT buffer sync failed: ") + e.what() + kDoctorHint);
    }
  }
  size_t allocated_bytes() const override {
    std::lock_guard lock(mu_);
    return allocated_bytes_;
  }

  // A runlist belongs to one hardware context, so consecutive runs of one program form one
  // runlist; the lists execute one after another within the overall timeout.
  Expected<ChainResult> RunChain(std::span<const Run> runs,
                                 std::chrono::milliseconds timeout) override {
    std::lock_guard lock(mu_);
    for (const Run& run : runs) TS_RETURN_IF_ERROR(Check(run));
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    ChainResult result;
    size_t begin = 0;
    while (begin < runs.size()) {
      size_t end = begin;
      while (end < runs.size() && runs[end].program == runs[begin].program) ++end;
      Program& program = programs_.at(runs[begin].program);
      std::vector<xrt::run> listed;
      try {
        xrt::runlist list(program.context);
        for (size_t i = begin; i < end; ++i) {
          listed.push_back(MakeRun(program.kernels[static_cast<size_t>(runs[i].kernel)], runs[i]));
          list.add(listed.back());
        }
        list.execute();
        // XRT reads a zero timeout as "wait forever"; an expired deadline still gets 1 ms.
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (list.wait(std::max(left, std::chrono::milliseconds(1))) == std::cv_status::timeout) {
          unfinished_.push_back(list);  // still executing: keep it (and its runs) alive
          result.state = RunState::kTimeout;
          result.detail = "XRT runlist of " + std::to_string(end - begin) + " runs of '" +
                          program.name + "' did not finish within " +
                          std::to_string(timeout.count()) +
                          " ms; XRT reports no progress inside a runlist";
          return result;
        }
      } catch (const xrt::runlist::command_error& e) {
        // aie_error derives from command_error; both name the failing run and its state.
        size_t failed = 0;
        while (failed < listed.size() && listed[failed].get_handle() != e.get_run().get_handle()) {
          ++failed;
        }
        if (failed == listed.size()) failed = 0;  // XRT named a run we did not list
        result.runs_completed += static_cast<int64_t>(failed);
        result.state = RunStateFromErt(e.get_command_state());
        result.detail =
            std::string(dynamic_cast<const xrt::runlist::aie_error*>(&e) ? "AIE error in '"
                                                                         : "command error in '") +
            program.name + "': " + e.what();
        return result;
      } catch (const std::exception& e) {
        result.state = RunState::kAborted;
        result.detail = "XRT failed running '" + program.name + "': " + e.what() + kDoctorHint;
        return result;
      }
      result.runs_completed += static_cast<int64_t>(end - begin);
      begin = end;
    }
    return result;
  }

 private:
  static constexpr int kFirstDataArg = 3;  // after opcode, instr, ninstr
  struct Kernel {
    xrt::kernel kernel;
    xrt::bo instructions;
    uint32_t instruction_words = 0;
    int data_args = 0;  // the xclbin's arguments after the first three
  };
  struct Program {
    std::string name;
    xrt::hw_context context;
    std::vector<Kernel> kernels;
  };
  struct Buffer {
    xrt::bo bo;
    size_t bytes = 0;
  };

  static Status UnknownProgram(ProgramId id) {
    return InvalidArgument("no open program " + std::to_string(id) + " on this XRT device");
  }
  static Status UnknownBuffer(BufferId id) {
    return InvalidArgument("no buffer " + std::to_string(id) + " on this XRT device");
  }

  Status Check(const Run& run) const {
    auto p = programs_.find(run.program);
    if (p == programs_.end()) return UnknownProgram(run.program);
    if (run.kernel < 0 || static_cast<size_t>(run.kernel) >= p->second.kernels.size()) {
      return InvalidArgument("a run of kernel " + std::to_string(run.kernel) + ", which program '" +
                             p->second.name + "' does not have");
    }
    const Kernel& k = p->second.kernels[static_cast<size_t>(run.kernel)];
    if (static_cast<int>(run.args.size()) > k.data_args) {
      return InvalidArgument("a run of '" + p->second.name + "' has " +
                             std::to_string(run.args.size()) + " arguments; its kernel takes " +
                             std::to_string(k.data_args));
    }
    for (const RunArg& arg : run.args) {
      if (arg.kind == RunArg::Kind::kBuffer && !buffers_.contains(arg.buffer)) {
        return UnknownBuffer(arg.buffer);
      }
    }
    return Status::Ok();
  }

  // mlir-aie: run.set_arg(0, opcode 3); (1, bo_instr); (2, instruction words); (3 + i, bo_i).
  xrt::run MakeRun(const Kernel& kernel, const Run& run) const {
    xrt::run xrun(kernel.kernel);
    xrun.set_arg(0, kOpcodeTransaction);
    xrun.set_arg(1, kernel.instructions);
    xrun.set_arg(2, kernel.instruction_words);
    for (size_t i = 0; i < run.args.size(); ++i) {
      const RunArg& arg = run.args[i];
      const int index = kFirstDataArg + static_cast<int>(i);
      if (arg.kind == RunArg::Kind::kBuffer) {
        xrun.set_arg(index, buffers_.at(arg.buffer).bo);
      } else {
        xrun.set_arg(index, arg.scalar);
      }
    }
    return xrun;
  }

  mutable std::mutex mu_;  // calls may come from several models' threads, as on the fake
  xrt::device device_;
  DeviceDescription description_;
  std::map<ProgramId, Program> programs_;
  std::map<BufferId, Buffer> buffers_;
  std::vector<xrt::runlist> unfinished_;
  ProgramId next_program_ = 0;
  BufferId next_buffer_ = 0;
  size_t allocated_bytes_ = 0;
};

}  // namespace

Expected<std::unique_ptr<XdnaDevice>> MakeXrtDevice() {
  try {
    xrt::device device(0u);
    const std::string name = device.get_info<xrt::info::device::name>();
    TS_ASSIGN_OR_RETURN(XdnaGeneration generation, GenerationFromXrtDeviceName(name));
    DeviceDescription description{generation, name + " (XRT)", /*fake=*/false};
    return std::unique_ptr<XdnaDevice>(
        std::make_unique<XrtDevice>(std::move(device), std::move(description)));
  } catch (const std::exception& e) {
    return NotFound(std::string("XRT could not open NPU device 0: ") + e.what() + kDoctorHint);
  }
}

}  // namespace tessera
