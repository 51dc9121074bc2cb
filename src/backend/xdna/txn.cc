#include "backend/xdna/txn.h"

#include <cstdio>

namespace tessera {
namespace {

uint32_t Word(std::span<const uint8_t> b, uint64_t offset) {
  return static_cast<uint32_t>(b[offset]) | static_cast<uint32_t>(b[offset + 1]) << 8 |
         static_cast<uint32_t>(b[offset + 2]) << 16 | static_cast<uint32_t>(b[offset + 3]) << 24;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status Bad(const std::string& what) {
  return Corrupt("instruction sequence: " + what +
                 "; regenerate insts.bin with the mlir-aie toolchain for this device");
}

// Fixed-size ops whose last word repeats their size in bytes.
bool FixedOpSize(uint8_t op, uint64_t* bytes, uint64_t* size_word) {
  switch (op) {
    case kTxnWrite:
      *bytes = 24;
      *size_word = 5;
      return true;
    case kTxnMaskWrite:
    case kTxnMaskPoll:
    case kTxnMaskPollBusy:
      *bytes = 28;
      *size_word = 6;
      return true;
    case kTxnNoop:
    case kTxnPreempt:
      *bytes = 4;
      *size_word = ~uint64_t{0};
      return true;
    default:
      return false;
  }
}

}  // namespace

int TxnDeviceGeneration(XdnaGeneration generation) {
  return NpuTargetFor(generation).txn_device_generation;
}

std::string TxnGenerationName(int device_generation) {
  if (device_generation == TxnDeviceGeneration(XdnaGeneration::kXdna1)) {
    return "xdna1 (devGen " + std::to_string(device_generation) + ", Phoenix/Hawk Point)";
  }
  if (device_generation == TxnDeviceGeneration(XdnaGeneration::kXdna2)) {
    return "xdna2 (devGen " + std::to_string(device_generation) + ", Strix/Krackan)";
  }
  return "an unknown generation (devGen " + std::to_string(device_generation) + ")";
}

Expected<TxnInfo> ParseTxnHeader(std::span<const uint8_t> bytes) {
  TxnInfo info;
  info.file_bytes = bytes.size();
  if (bytes.size() < kTxnHeaderBytes) {
    return Bad("file has " + std::to_string(bytes.size()) +
               " bytes, fewer than the 16-byte header");
  }
  if (bytes.size() % 4 != 0) {
    return Bad("file size " + std::to_string(bytes.size()) + " is not a multiple of 4");
  }
  if (bytes.size() > kTxnMaxBytes) {
    return Bad("file has " + std::to_string(bytes.size()) + " bytes (at most " +
               std::to_string(kTxnMaxBytes) + ")");
  }
  uint32_t w0 = Word(bytes, 0), w1 = Word(bytes, 4);
  info.major = static_cast<uint8_t>(w0);
  info.minor = static_cast<uint8_t>(w0 >> 8);
  info.device_generation = static_cast<uint8_t>(w0 >> 16);
  info.rows = static_cast<uint8_t>(w0 >> 24);
  info.columns = static_cast<uint8_t>(w1);
  info.mem_tile_rows = static_cast<uint8_t>(w1 >> 8);
  info.op_count = Word(bytes, 8);
  info.total_bytes = Word(bytes, 12);
  if (info.major != 0 || info.minor != 1) {
    return Bad("TXN version " + std::to_string(info.major) + "." + std::to_string(info.minor) +
               " is not the supported 0.1");
  }
  if ((w1 >> 16) != 0) return Bad("header word 1 has nonzero padding " + Hex(w1));
  if (info.total_bytes != bytes.size()) {
    return Bad("header says " + std::to_string(info.total_bytes) + " bytes but the file has " +
               std::to_string(bytes.size()));
  }
  if (info.columns == 0 || info.rows == 0) {
    return Bad("header declares a " + std::to_string(info.rows) + "x" +
               std::to_string(info.columns) + " array");
  }
  // Every op is at least one word, so a larger count cannot be right (and bounds the walk).
  if (info.op_count > (bytes.size() - kTxnHeaderBytes) / 4) {
    return Bad("header declares " + std::to_string(info.op_count) + " ops, more than " +
               std::to_string(bytes.size()) + " bytes can hold");
  }
  uint64_t pos = kTxnHeaderBytes;
  while (pos < bytes.size()) {
    uint8_t op = bytes[pos];
    uint64_t remaining = bytes.size() - pos;
    uint64_t size = 0, size_word = 0;
    if (FixedOpSize(op, &size, &size_word)) {
      if (size > remaining) {
        return Bad("op " + Hex(op) + " at byte " + std::to_string(pos) + " needs " +
                   std::to_string(size) + " bytes, " + std::to_string(remaining) + " remain");
      }
      if (size_word != ~uint64_t{0} && Word(bytes, pos + 4 * size_word) != size) {
        return Bad("op " + Hex(op) + " at byte " + std::to_string(pos) + " has size field " +
                   std::to_string(Word(bytes, pos + 4 * size_word)) + ", expected " +
                   std::to_string(size));
      }
    } else if (op == kTxnBlockWrite || op >= kTxnCustomBegin) {
      uint64_t size_at = op == kTxnBlockWrite ? 12 : 4;  // BLOCKWRITE word 3, custom word 1
      uint64_t min_size = op == kTxnBlockWrite ? 16 : 8;
      if (size_at + 4 > remaining) {
        return Bad("op " + Hex(op) + " at byte " + std::to_string(pos) +
                   " is cut off before its size field");
      }
      size = Word(bytes, pos + size_at);
      if (size < min_size || size % 4 != 0 || size > remaining) {
        return Bad("op " + Hex(op) + " at byte " + std::to_string(pos) + " has size " +
                   std::to_string(size) + " (needs a multiple of 4, at least " +
                   std::to_string(min_size) + ", at most the " + std::to_string(remaining) +
                   " bytes left)");
      }
      if (op >= kTxnCustomBegin) ++info.custom_ops;
    } else {
      return Bad("unknown opcode " + Hex(op) + " at byte " + std::to_string(pos) +
                 " (known: WRITE, BLOCKWRITE, MASKWRITE, MASKPOLL, NOOP, PREEMPT, custom >= "
                 "0x80); refusing rather than guessing its size");
    }
    pos += size;
    if (++info.walked_ops > info.op_count) {
      return Bad("the body holds more ops than the header's " + std::to_string(info.op_count) +
                 " (next at byte " + std::to_string(pos) + ")");
    }
  }
  if (info.walked_ops != info.op_count) {
    return Bad("header declares " + std::to_string(info.op_count) + " ops, the body holds " +
               std::to_string(info.walked_ops));
  }
  return info;
}

Status CheckTxnForTarget(const TxnInfo& txn, const NpuTarget& target) {
  if (txn.device_generation != target.txn_device_generation) {
    return Unsupported(
        "instruction sequence was compiled for " + TxnGenerationName(txn.device_generation) +
        " but the device is " + TxnGenerationName(target.txn_device_generation) +
        "; use the artifacts built for " + std::string(GenerationName(target.generation)));
  }
  if (txn.columns > target.columns) {
    return Unsupported("instruction sequence uses " + std::to_string(txn.columns) + " columns; " +
                       std::string(GenerationName(target.generation)) + " offers " +
                       std::to_string(target.columns));
  }
  const int rows = target.core_rows + 2;  // shim row + memory-tile row + core rows
  if (txn.rows > rows || txn.mem_tile_rows > 1) {
    return Unsupported("instruction sequence declares " + std::to_string(txn.rows) + " rows (" +
                       std::to_string(txn.mem_tile_rows) + " memory-tile rows); " +
                       std::string(GenerationName(target.generation)) + " has " +
                       std::to_string(rows) + " (1)");
  }
  return Status::Ok();
}

TxnOp TxnWrite(uint32_t reg, uint32_t value) {
  return {kTxnWrite, 0, reg, 0, value, 24};
}
TxnOp TxnMaskWrite(uint32_t reg, uint32_t value, uint32_t mask) {
  return {kTxnMaskWrite, 0, reg, 0, value, mask, 28};
}
TxnOp TxnMaskPoll(uint32_t reg, uint32_t value, uint32_t mask) {
  return {kTxnMaskPoll, 0, reg, 0, value, mask, 28};
}
TxnOp TxnBlockWrite(uint32_t reg, const std::vector<uint32_t>& payload) {
  TxnOp op = {kTxnBlockWrite, 0, reg, static_cast<uint32_t>(4 * (4 + payload.size()))};
  op.insert(op.end(), payload.begin(), payload.end());
  return op;
}
TxnOp TxnSync(uint8_t column, uint8_t row, uint8_t direction, uint8_t channel) {
  return {0x80, 16, direction | uint32_t{row} << 8 | uint32_t{column} << 16,
          uint32_t{1} << 8 | uint32_t{1} << 16 | uint32_t{channel} << 24};
}
TxnOp TxnAddressPatch(uint32_t reg, uint32_t arg_index, uint32_t arg_plus) {
  return {0x81, 48, 0, 0, 0, 0, reg, 0, arg_index, 0, arg_plus, 0};
}

std::vector<uint8_t> BuildTxn(const TxnHeaderSpec& h, const std::vector<TxnOp>& ops) {
  std::vector<uint32_t> words = {uint32_t{h.rows} << 24 | uint32_t{h.device_generation} << 16 |
                                     uint32_t{h.minor} << 8 | h.major,
                                 uint32_t{h.mem_tile_rows} << 8 | h.columns,
                                 static_cast<uint32_t>(ops.size()), 0};
  for (const auto& op : ops) words.insert(words.end(), op.begin(), op.end());
  words[3] = static_cast<uint32_t>(words.size() * 4);
  std::vector<uint8_t> bytes;
  bytes.reserve(words.size() * 4);
  for (uint32_t w : words) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(w >> (8 * i)));
  }
  return bytes;
}

}  // namespace tessera
