// XRT noop smoke test: NOTHING EXECUTES HERE. Debian 12's XRT 2.13 (libxrt-dev) runs in
// XCL_EMULATION_MODE=noop, whose shim accepts every call, allocates fake device memory (every
// buffer's address is 0xdeadbeef) and completes every command without running anything
// (../shared/npu/FACTS.md 1.3). So this test proves only that real XRT code accepts the xclbin
// tessera's BuildXclbin writes and the mlir-aie host flow as tessera's XRT adapter drives it
// (FACTS 2.2), in XRT 2.13's legacy form: xrt::device(0), load_xclbin, kernel(device, uuid,
// "MLIR_AIE"), the instruction buffer cacheable on group_id(1), data buffers host-only on
// group_id(3...), run(3, instr, ninstr, bo...) -> ERT_CMD_STATE_COMPLETED. It asserts that the
// output buffer is left untouched, so the test cannot be mistaken for execution. The real
// adapter (src/backend/xdna/xrt_adapter.cc) needs XRT >= 2.17 and is not built here.
//
// This legacy-API code is test-only plumbing; the library has no XRT 2.13 path.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "backend/xdna/xclbin.h"
#include "experimental/xrt_xclbin.h"
#include "xrt/xrt_bo.h"
#include "xrt/xrt_device.h"
#include "xrt/xrt_kernel.h"

#ifndef TESSERA_XRT_LIB_DIR
#error "CMake passes the directory of Debian's libxrt_noop.so.2 as TESSERA_XRT_LIB_DIR"
#endif

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr uint8_t kSentinel = 0xA5;
constexpr uint64_t kNoopShimAddress = 0xdeadbeef;  // what the noop shim reports for every BO

class XrtNoopNothingExecutesTest : public ::testing::Test {
 protected:
  // XRT 2.13 dlopens $XILINX_XRT/lib/libxrt_noop.so.2 (and libxrt_core.so.2), ignoring the
  // multiarch directory Debian installs them in (FACTS 1.1), so the test makes such a
  // directory of symlinks and points XILINX_XRT at it before the first XRT call. The xclbin is
  // the one BuildXclbin writes by default: mlir-aie's MLIR_AIE kernel, banks {HOST, SRAM}.
  static void SetUpTestSuite() {
    std::string pattern = ::testing::TempDir() + "xrt_noop_XXXXXX";
    ASSERT_NE(mkdtemp(pattern.data()), nullptr)
        << "cannot create a temp dir under " << ::testing::TempDir();
    root_ = pattern;
    fs::create_directories(root_ / "lib");
    for (const char* lib : {"libxrt_noop.so.2", "libxrt_core.so.2"}) {
      const fs::path target = fs::path(TESSERA_XRT_LIB_DIR) / lib;
      ASSERT_TRUE(fs::exists(target)) << target << " is missing: install libxrt1";
      fs::create_symlink(target, root_ / "lib" / lib);
    }
    ASSERT_EQ(setenv("XILINX_XRT", root_.c_str(), 1), 0);
    ASSERT_EQ(setenv("XCL_EMULATION_MODE", "noop", 1), 0);

    const std::vector<uint8_t> xclbin = BuildXclbin(XclbinSpec{});
    std::ofstream out(XclbinPath(), std::ios::binary);
    out.write(reinterpret_cast<const char*>(xclbin.data()),
              static_cast<std::streamsize>(xclbin.size()));
    ASSERT_TRUE(out.good()) << "cannot write " << XclbinPath();
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    if (!root_.empty()) fs::remove_all(root_, ignored);
  }
  static std::string XclbinPath() { return (root_ / "final.xclbin").string(); }

  static inline fs::path root_;
};

// The memory bank (its MEM_TOPOLOGY tag) a kernel argument's group id names.
std::string BankTag(const xrt::xclbin& xclbin, int group) {
  for (const xrt::xclbin::mem& m : xclbin.get_mems()) {
    if (m.get_index() == group) return m.get_tag();
  }
  return "<no bank " + std::to_string(group) + ">";
}

TEST_F(XrtNoopNothingExecutesTest, XrtReadsTheKernelAndBanksBuildXclbinWrites) {
  const xrt::xclbin xclbin(XclbinPath());
  const std::vector<xrt::xclbin::kernel> kernels = xclbin.get_kernels();
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].get_name(), "MLIR_AIE");
  // aiecc's signature (FACTS 2.2): opcode, instr, ninstr, then five buffer objects.
  const std::vector<std::string> expected = {"opcode", "instr", "ninstr", "bo0",
                                             "bo1",    "bo2",   "bo3",    "bo4"};
  ASSERT_EQ(kernels[0].get_num_args(), expected.size());
  std::vector<std::string> names;
  for (const xrt::xclbin::arg& a : kernels[0].get_args()) names.push_back(a.get_name());
  EXPECT_EQ(names, expected);

  std::vector<std::string> tags;
  for (const xrt::xclbin::mem& m : xclbin.get_mems()) tags.push_back(m.get_tag());
  EXPECT_EQ(tags, (std::vector<std::string>{"HOST", "SRAM"}));

  // XRT and tessera's own parser agree on the container's identity.
  std::ifstream in(XclbinPath(), std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  auto parsed = ParseXclbin(bytes);
  ASSERT_TRUE(parsed) << parsed.status().message();
  EXPECT_EQ(xclbin.get_uuid().to_string(), parsed->UuidString());
  std::cout << "[noop] xrt::xclbin: kernel " << kernels[0].get_name()
            << " nargs=" << kernels[0].get_num_args() << " banks=" << tags[0] << "," << tags[1]
            << " uuid=" << xclbin.get_uuid().to_string() << "\n";
}

// mlir-aie's host flow in XRT 2.13's form. Run completes; nothing ran: the output buffer keeps
// its sentinels and every buffer sits at the noop shim's fake address.
TEST_F(XrtNoopNothingExecutesTest, HostFlowCompletesButTheOutputBufferIsUntouched) {
  xrt::device device(0u);
  const xrt::uuid uuid = device.load_xclbin(XclbinPath());
  const xrt::xclbin xclbin(XclbinPath());
  EXPECT_EQ(uuid.to_string(), xclbin.get_uuid().to_string());
  xrt::kernel kernel(device, uuid, "MLIR_AIE");

  // Where XRT places each argument: the instruction buffer in SRAM, data buffers in HOST.
  EXPECT_EQ(BankTag(xclbin, kernel.group_id(1)), "SRAM");
  for (int arg = 3; arg < 8; ++arg) {
    EXPECT_EQ(BankTag(xclbin, kernel.group_id(arg)), "HOST") << "argument " << arg;
  }

  // A TXN header for npu1 (devGen 3, 4 columns) with no operations: 4 words, 16 bytes.
  const std::vector<uint32_t> instructions = {6u << 24 | 3u << 16 | 1u << 8, 1u << 8 | 4u, 0u, 16u};
  const size_t instr_bytes = instructions.size() * sizeof(uint32_t);
  xrt::bo bo_instr(device, instr_bytes, XCL_BO_FLAGS_CACHEABLE, kernel.group_id(1));
  std::memcpy(bo_instr.map<void*>(), instructions.data(), instr_bytes);
  bo_instr.sync(XCL_BO_SYNC_BO_TO_DEVICE);

  constexpr size_t kBytes = 4096;
  xrt::bo bo_in(device, kBytes, XRT_BO_FLAGS_HOST_ONLY, kernel.group_id(3));
  xrt::bo bo_out(device, kBytes, XRT_BO_FLAGS_HOST_ONLY, kernel.group_id(4));
  uint8_t* in = bo_in.map<uint8_t*>();
  for (size_t i = 0; i < kBytes; ++i) in[i] = static_cast<uint8_t>(i * 7 + 1);
  bo_in.sync(XCL_BO_SYNC_BO_TO_DEVICE);
  uint8_t* out = bo_out.map<uint8_t*>();
  std::memset(out, kSentinel, kBytes);
  bo_out.sync(XCL_BO_SYNC_BO_TO_DEVICE);

  xrt::run run(kernel);
  run.set_arg(0, 3u);  // opcode: the transaction flow
  run.set_arg(1, bo_instr);
  run.set_arg(2, static_cast<uint32_t>(instructions.size()));
  run.set_arg(3, bo_in);
  run.set_arg(4, bo_out);
  run.start();
  const ert_cmd_state state = run.wait();
  EXPECT_EQ(state, ERT_CMD_STATE_COMPLETED);

  bo_out.sync(XCL_BO_SYNC_BO_FROM_DEVICE);
  size_t untouched = 0;
  for (size_t i = 0; i < kBytes; ++i) untouched += out[i] == kSentinel;
  EXPECT_EQ(untouched, kBytes) << "the noop shim wrote output: this is not the noop shim";
  for (const xrt::bo* bo : {&bo_instr, &bo_in, &bo_out}) {
    EXPECT_EQ(bo->address(), kNoopShimAddress) << "not the noop shim's fake device memory";
  }
  std::cout << "[noop] run state " << state
            << " (ERT_CMD_STATE_COMPLETED = " << ERT_CMD_STATE_COMPLETED
            << "), group_id(1)=" << kernel.group_id(1)
            << " (SRAM), group_id(3)=" << kernel.group_id(3) << " (HOST), bo address 0x" << std::hex
            << bo_out.address() << std::dec << ", output sentinels untouched " << untouched << "/"
            << kBytes << ": NOTHING EXECUTED (noop shim)\n";
}

}  // namespace
}  // namespace tessera
