#include "backend/cpu/kernels.h"

namespace tessera {

const KernelTable* KernelsFor(CpuIsa isa) {
  if (!CpuSupports(isa)) return nullptr;
  switch (isa) {
    case CpuIsa::kScalar:
      return &ScalarKernels();
    case CpuIsa::kAvx2:
      return &Avx2Kernels();
    case CpuIsa::kAvx512:
      return &Avx512Kernels();
  }
  return nullptr;
}

void PrepareActivations(const KernelTable& k, const float* x, int64_t rows, int64_t stride,
                        WeightFormat format, ActivationBlock* acts) {
  acts->rows = rows;
  acts->stride = stride;
  acts->f32 = x;
  if (format == WeightFormat::kInt8 || format == WeightFormat::kInt4) {
    const int64_t blocks = stride / kInt4Block;
    for (int64_t r = 0; r < rows; ++r) {
      k.quantize_row(x + r * stride, stride, acts->q8.data() + r * stride, acts->q_scale.data() + r,
                     acts->q_block_sum.data() + r * blocks);
    }
  }
}

}  // namespace tessera
