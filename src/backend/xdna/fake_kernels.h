// The reference kernels of tessera's NPU programs: what each kernel of the decoder program
// computes, in plain C++, with the numeric contract a real NPU kernel is held to (below). The
// fake device (fake/fake_device.h) runs these in place of the NPU; on hardware they are the oracle
// the kernels' outputs are compared with (scripts/npu-hardware-check).
//
// Numeric contract of every kernel: fp32 activations in and out; matmul weights bf16 widened
// to fp32 exactly; sums accumulated in fp32 in 8 interleaved partial sums (k mod 8) added
// pairwise at the end; exp, tanh and 1/sqrt in fp32 from the C library; KV rows stored in
// fp32 or rounded once to bf16 (round to nearest even). A kernel that reads past a buffer or an
// index outside the KV pool is refused (the run aborts), never executed.
//
//   const FakeKernel* k = FindFakeKernel("tessera_rmsnorm");
//   Status s = k->run(args);   // args: the run's buffers (device copies) and scalars
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"

namespace tessera {

// A run's argument as a kernel sees it: device memory or a 32-bit scalar.
struct KernelArg {
  std::span<uint8_t> bytes;  // empty for a scalar
  uint32_t scalar = 0;
  bool is_buffer = false;
};

struct FakeKernel {
  std::string_view name;
  int arity;  // arguments it takes
  Status (*run)(std::span<const KernelArg> args);
};

// The decoder program's kernels, in the order the program lists them (NpuProgram::kernels).
std::span<const FakeKernel> DecoderKernels();
const FakeKernel* FindFakeKernel(std::string_view name);

// Kernel indices of the decoder program, and the flags some kernels take.
enum DecoderKernel : int {
  kKernelRmsNorm,  // (x, w, y, rows, n, eps_bits): y = x / sqrt(mean(x^2) + eps) * w
  kKernelMatmul,   // (x, w_bf16, bias, y, rows, n, k, has_bias): y[r] = W x[r] (+ b)
  // (q, k, v, q_norm, k_norm, rope, desc, kcache, vcache, heads, rope_shape, flags, eps_bits):
  // q (and k) normed per head and rotated in place, k and v written to the cache at each row's
  // position. rope: cos [positions][rotary_dim / 2], then sin.
  kKernelQkRopeKv,
  // (q, kcache, vcache, desc, out, heads, q_stride, window, scale_bits, flags): causal
  // attention of each row over its sequence's cached positions (the last `window` if > 0).
  kKernelAttention,
  kKernelGatedAct,  // (gate, up, count, activation): gate = act(gate) * up
  kKernelAdd,       // (x, y, count): x += y
  kKernelKvCopy,    // (kcache, vcache, from, to, positions, row_floats, flags)
  kKernelFence,     // (status, value): status[0] = value, the chain's proof of execution
  kDecoderKernelCount,
};
inline constexpr uint32_t kFlagQkNorm = 1;      // qk_rope_kv: per-head RMSNorm of q and k
inline constexpr uint32_t kFlagKvBf16 = 2;      // KV rows stored as bf16
inline constexpr uint32_t kFlagOutputGate = 4;  // attention: out *= sigmoid(gate half of q)
inline constexpr uint32_t kActivationSilu = 0;  // gated_act
inline constexpr uint32_t kActivationGeluTanh = 1;

// The batch descriptor every KV kernel reads (int32 words): [0] chunks, [1] rows, then per
// chunk {start_pos, n_tokens, first_row, table_offset, table_blocks}, then the block tables.
inline constexpr int kDescriptorHeader = 2;
inline constexpr int kDescriptorChunkWords = 5;

// Attention shapes packed into one scalar (`heads`): heads | kv_heads << 8 | (head_dim / 2)
// << 16; `rope_shape` is rotary_dim | q_stride << 16, q_stride being the floats between heads
// of q (head_dim, or 2 x head_dim with an output gate).
inline constexpr uint32_t PackHeads(int64_t heads, int64_t kv_heads, int64_t head_dim) {
  return static_cast<uint32_t>(heads) | static_cast<uint32_t>(kv_heads) << 8 |
         static_cast<uint32_t>(head_dim / 2) << 16;
}

}  // namespace tessera
