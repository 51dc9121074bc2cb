// Xclbin: reads and writes the "axlf" container XRT loads (the .xclbin of an NPU program), for
// the sections the XDNA backend needs: the kernels (IP_LAYOUT) with their argument lists
// (EMBEDDED_METADATA XML), the memory banks (MEM_TOPOLOGY), which argument reaches which bank
// (CONNECTIVITY) and the AIE partition's column width (AIE_PARTITION). Layouts follow XRT's
// xclbin.h (packed little-endian; FACTS.md 2.2); every offset, size and count is checked
// against the buffer, so any byte string is either parsed or refused with a message.
//
//   TS_ASSIGN_OR_RETURN(XclbinInfo info, ParseXclbin(bytes));
//   const XclbinKernel* k = info.FindKernel("MLIR_AIE");   // args: opcode, instr, ninstr, bo0..
//   info.aie_partition->column_width                       // 4 on a whole XDNA1 array
//
//   std::vector<uint8_t> file = BuildXclbin(XclbinSpec{});  // mlir-aie's shape, for tests/fakes
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tessera {

// axlf section kinds the backend reads (XRT's axlf_section_kind).
enum class AxlfSectionKind : uint32_t {
  kEmbeddedMetadata = 2,
  kMemTopology = 6,
  kConnectivity = 7,
  kIpLayout = 8,
  kAiePartition = 32,
};

// XRT's IP_TYPE values of the IP_LAYOUT entries that are kernels.
inline constexpr uint32_t kIpTypeKernel = 1;    // IP_KERNEL (FPGA-style compute unit)
inline constexpr uint32_t kIpTypePsKernel = 7;  // IP_PS_KERNEL (mlir-aie's DPU kernels)
// XRT's MEM_TYPE values the NPU xclbins use.
inline constexpr uint8_t kMemTypeDram = 2;   // MEM_DRAM: both HOST and SRAM banks of mlir-aie
inline constexpr uint8_t kMemTypeHost = 10;  // MEM_HOST

struct XclbinSection {
  uint32_t kind = 0;
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct XclbinMemBank {
  uint8_t type = 0;  // MEM_TYPE
  bool used = false;
  uint64_t size_kb = 0;
  uint64_t base_address = 0;
  std::string tag;  // "HOST", "SRAM"
};

struct XclbinIp {
  uint32_t type = 0;        // IP_TYPE
  uint32_t properties = 0;  // for PS kernels: subtype | functional << 4 | kernel_id << 16
  uint64_t base_address = 0;
  std::string name;  // "MLIR_AIE:MLIRAIE" (kernel:instance)
};

struct XclbinConnection {
  int32_t arg_index = 0;
  int32_t ip_index = 0;   // into XclbinInfo::ips
  int32_t mem_index = 0;  // into XclbinInfo::mem_banks
};

// One argument of a kernel, as the EMBEDDED_METADATA XML declares it.
struct XclbinKernelArg {
  std::string name;           // "opcode", "instr", "ninstr", "bo0"...
  int address_qualifier = 0;  // 0 scalar, 1 global memory
  int id = 0;                 // argument index (xrt::kernel's argno)
  std::string port;
  uint64_t size = 0;  // bytes the argument occupies in the command
  uint64_t offset = 0;
  uint64_t host_offset = 0;
  uint64_t host_size = 0;
  std::string type;  // "uint64_t", "char *", "uint32_t", "void*"
  // From CONNECTIVITY when parsed (-1/"" if the argument reaches no bank); in a spec for
  // BuildXclbin, the tag of the bank a global argument connects to ("HOST" or "SRAM").
  int mem_index = -1;
  std::string mem_tag;
};

struct XclbinKernel {
  std::string name;                    // "MLIR_AIE"
  std::string type;                    // the XML kernel's type attribute ("dpu"), if any
  std::vector<std::string> instances;  // "MLIRAIE"
  std::vector<int> ip_indices;         // into XclbinInfo::ips
  std::vector<XclbinKernelArg> args;   // ordered by id; empty without metadata
  bool has_metadata = false;           // the XML described this kernel
};

struct XclbinAiePartition {
  uint16_t column_width = 0;
  std::vector<uint16_t> start_columns;
  uint32_t operations_per_cycle = 0;
  uint32_t pdi_count = 0;
  std::string name;
};

struct XclbinInfo {
  std::array<uint8_t, 16> uuid{};
  uint8_t version_major = 0, version_minor = 0;
  uint16_t version_patch = 0;
  uint64_t length = 0;
  std::vector<XclbinSection> sections;
  std::vector<XclbinMemBank> mem_banks;
  std::vector<XclbinIp> ips;
  std::vector<XclbinConnection> connections;
  std::vector<XclbinKernel> kernels;  // from IP_LAYOUT, in first-seen order
  std::optional<XclbinAiePartition> aie_partition;

  std::string UuidString() const;  // "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as XRT prints it
  const XclbinKernel* FindKernel(std::string_view name) const;
  std::vector<std::string> KernelNames() const;
};

// Bounds on what ParseXclbin accepts (far above any real NPU xclbin).
inline constexpr uint32_t kXclbinMaxSections = 0x10000;  // XRT's XCLBIN_MAX_NUM_SECTION
inline constexpr uint64_t kXclbinMaxMetadataBytes = 16u << 20;

Expected<XclbinInfo> ParseXclbin(std::span<const uint8_t> bytes);

// mlir-aie's DPU kernel signature (FACTS.md 2.2): opcode(uint64), instr(char*, SRAM),
// ninstr(uint32), bo0..bo4(void*, HOST) at offsets 0x00, 0x08, 0x10, 0x14..0x34.
std::vector<XclbinKernelArg> MlirAieKernelArgs();
// The argument names of a list, in order ("opcode", "instr", ...).
std::vector<std::string> ArgNames(const std::vector<XclbinKernelArg>& args);

// What BuildXclbin writes: one kernel in IP_LAYOUT, MEM_TOPOLOGY {HOST, SRAM}, CONNECTIVITY
// from the args' mem_tag, EMBEDDED_METADATA XML and (optionally) AIE_PARTITION.
struct XclbinSpec {
  std::array<uint8_t, 16> uuid = {0x74, 0x65, 0x73, 0x73, 0x65, 0x72, 0x61, 0x2d,
                                  0x6e, 0x70, 0x75, 0x2d, 0x74, 0x65, 0x73, 0x74};
  std::string kernel_name = "MLIR_AIE";
  std::string instance_name = "MLIRAIE";
  std::string kernel_type = "dpu";
  uint32_t ip_type = kIpTypePsKernel;  // IP_PS_KERNEL, subtype DPU, as aiecc emits
  uint32_t kernel_id = 0x901;          // dpu_kernel_id
  std::vector<XclbinKernelArg> args = MlirAieKernelArgs();
  uint64_t host_bank_kb = 0x10000;  // mlir-aie's mem_topology sizes
  uint64_t sram_bank_kb = 0xc000;
  bool with_metadata = true;
  bool with_aie_partition = true;
  uint16_t column_width = 4;
  std::vector<uint16_t> start_columns = {0};
  uint32_t operations_per_cycle = 2048;
};

std::vector<uint8_t> BuildXclbin(const XclbinSpec& spec);

}  // namespace tessera
