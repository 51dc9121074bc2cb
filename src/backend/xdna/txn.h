// Txn: the instruction sequence (mlir-aie's insts.bin, "TXN" binary, spec 0.1) an NPU program
// hands the firmware through its `instr` argument. The 16-byte header says which generation it
// was compiled for (devGen 3 = XDNA1 Phoenix/Hawk Point, 4 = XDNA2 Strix/Krackan), its array
// shape, op count and byte size (FACTS.md 2.2). ParseTxnHeader reads the header and walks the
// ops with their known sizes, refusing any op it does not know; CheckTxnForTarget refuses a
// sequence that does not fit the detected device.
//
//   TS_ASSIGN_OR_RETURN(TxnInfo txn, ParseTxnHeader(bytes));
//   TS_RETURN_IF_ERROR(CheckTxnForTarget(txn, NpuTargetFor(XdnaGeneration::kXdna2)));
//
//   std::vector<uint8_t> insts = BuildTxn({.device_generation = 4, .columns = 8}, {TxnWrite(..)});
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backend/xdna/npu_target.h"
#include "base/status.h"

namespace tessera {

// Opcodes (aie-rt's XAie_TxnOpcode) whose sizes the walker knows.
enum TxnOpcode : uint8_t {
  kTxnWrite = 0x00,         // 6 words: op, pad, reg lo, reg hi, value, size (24)
  kTxnBlockWrite = 0x01,    // 4 words + payload: op|col|row, col|row, reg, size (bytes)
  kTxnMaskWrite = 0x03,     // 7 words: op, pad, reg lo, reg hi, value, mask, size (28)
  kTxnMaskPoll = 0x04,      // 7 words, as MASKWRITE
  kTxnNoop = 0x05,          // 1 word
  kTxnPreempt = 0x06,       // 1 word
  kTxnMaskPollBusy = 0x07,  // 7 words, as MASKWRITE
  kTxnCustomBegin = 0x80,   // custom ops (TCT sync 0x80, DDR patch 0x81, ...): op, size, ...
};

struct TxnInfo {
  uint8_t major = 0, minor = 0;
  uint8_t device_generation = 0;  // devGen: 3 XDNA1, 4 XDNA2
  uint8_t rows = 0;               // numRows of the array the program was compiled for
  uint8_t columns = 0;
  uint8_t mem_tile_rows = 0;
  uint32_t op_count = 0;     // header word 2
  uint32_t total_bytes = 0;  // header word 3
  uint64_t file_bytes = 0;
  uint32_t walked_ops = 0;  // ops found by walking the body (== op_count when parsed)
  uint32_t custom_ops = 0;  // of which custom (>= 0x80: sync, address patch...)
};

inline constexpr uint64_t kTxnHeaderBytes = 16;
inline constexpr uint64_t kTxnMaxBytes = 256u << 20;  // far above any instruction sequence

// The devGen of a generation (3 or 4) and its name for messages ("xdna1 (devGen 3)").
int TxnDeviceGeneration(XdnaGeneration generation);
std::string TxnGenerationName(int device_generation);

// Parses the header and walks every op; refuses a bad header, a size that is not a multiple of
// 4 or differs from the header's total, an unknown opcode (naming its byte offset), an op that
// runs past the end, and an op count that differs from the walk.
Expected<TxnInfo> ParseTxnHeader(std::span<const uint8_t> bytes);

// Refuses a sequence compiled for another generation (naming both) or for more columns / rows
// than the target offers.
Status CheckTxnForTarget(const TxnInfo& txn, const NpuTarget& target);

// ---- building sequences (tests, the fake device) ----

struct TxnHeaderSpec {
  uint8_t major = 0, minor = 1;
  uint8_t device_generation = 3;
  uint8_t rows = 6;
  uint8_t columns = 4;
  uint8_t mem_tile_rows = 1;
};

using TxnOp = std::vector<uint32_t>;
TxnOp TxnWrite(uint32_t reg, uint32_t value);
TxnOp TxnMaskWrite(uint32_t reg, uint32_t value, uint32_t mask);
TxnOp TxnMaskPoll(uint32_t reg, uint32_t value, uint32_t mask);
TxnOp TxnBlockWrite(uint32_t reg, const std::vector<uint32_t>& payload);
TxnOp TxnSync(uint8_t column, uint8_t row, uint8_t direction, uint8_t channel);  // TCT 0x80
TxnOp TxnAddressPatch(uint32_t reg, uint32_t arg_index, uint32_t arg_plus);      // 0x81

// Header + ops, with word 2 = ops.size() and word 3 = the byte size.
std::vector<uint8_t> BuildTxn(const TxnHeaderSpec& header, const std::vector<TxnOp>& ops);

}  // namespace tessera
