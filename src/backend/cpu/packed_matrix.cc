#include "backend/cpu/packed_matrix.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kernels.h"
#include "base/half.h"

namespace tessera {
namespace {

void InitGeometry(PackedMatrix* m, int64_t rows, int64_t cols, WeightFormat format) {
  m->format = format;
  m->rows = rows;
  m->cols = cols;
  m->padded_rows = RoundUp(rows, kPanelRows);
  m->padded_cols = RoundUp(cols, kColAlign);
}

// Offset of weight (row, col) in a [P][Kp/g][16][g] layout of one-byte-or-more elements.
size_t GroupedIndex(const PackedMatrix& m, int64_t row, int64_t col, int64_t group) {
  int64_t p = row / kPanelRows, r = row % kPanelRows;
  int64_t j = col / group, e = col % group;
  return static_cast<size_t>(((p * (m.padded_cols / group) + j) * kPanelRows + r) * group + e);
}

// INT4 byte holding (row, col) and whether it is the high nibble.
size_t Int4ByteIndex(const PackedMatrix& m, int64_t row, int64_t col, bool* high) {
  int64_t p = row / kPanelRows, r = row % kPanelRows;
  int64_t b = col / kInt4Block, in_block = col % kInt4Block;
  int64_t j = in_block / 8, rest = in_block % 8;
  *high = rest >= 4;
  int64_t e = rest % 4;
  int64_t blocks = m.padded_cols / kInt4Block;
  return static_cast<size_t>((((p * blocks + b) * 4 + j) * kPanelRows + r) * 4 + e);
}

size_t Int4ScaleIndex(const PackedMatrix& m, int64_t row, int64_t block) {
  int64_t p = row / kPanelRows, r = row % kPanelRows;
  return static_cast<size_t>((p * (m.padded_cols / kInt4Block) + block) * kPanelRows + r);
}

Status CheckShape(size_t n, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 || n != static_cast<size_t>(rows * cols)) {
    return Internal("PackMatrix: " + std::to_string(n) + " values do not form a " +
                    std::to_string(rows) + "x" + std::to_string(cols) + " matrix");
  }
  return Status::Ok();
}

// The quantizers' rounding: half away from zero, as std::round. NaN (a broken checkpoint)
// becomes 0 rather than an undefined float-to-int conversion.
inline float RoundHalfAwayReference(float v) {
  return std::isnan(v) ? 0.0f : std::round(v);
}

void PackInt8(std::span<const float> w, PackedMatrix* m) {
  auto* q = reinterpret_cast<int8_t*>(m->data.mutable_data());
  float* row_scale = m->row_scale.mutable_data();
  int32_t* row_offset = m->row_offset.mutable_data();
  for (int64_t r = 0; r < m->rows; ++r) {
    const float* row = w.data() + r * m->cols;
    float absmax = 0.0f;
    for (int64_t c = 0; c < m->cols; ++c) absmax = std::max(absmax, std::fabs(row[c]));
    float scale = absmax / 127.0f;
    int32_t sum = 0;
    for (int64_t c = 0; c < m->cols; ++c) {
      float v = scale > 0.0f ? RoundHalfAwayReference(row[c] / scale) : 0.0f;
      int qi = static_cast<int>(std::clamp(v, -127.0f, 127.0f));
      q[GroupedIndex(*m, r, c, 4)] = static_cast<int8_t>(qi);
      sum += qi;
    }
    row_scale[r] = scale;
    row_offset[r] = -128 * sum;
  }
}

void PackInt4(std::span<const float> w, PackedMatrix* m) {
  uint8_t* bytes = m->data.mutable_data();
  uint16_t* block_scale = m->block_scale.mutable_data();
  // Padding weights are stored as q = 0, i.e. the nibble 8.
  std::memset(bytes, 0x88, m->data.size());
  const int64_t blocks = m->padded_cols / kInt4Block;
  for (int64_t r = 0; r < m->rows; ++r) {
    const float* row = w.data() + r * m->cols;
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t c0 = b * kInt4Block, c1 = std::min(m->cols, c0 + kInt4Block);
      float extreme = 0.0f;
      for (int64_t c = c0; c < c1; ++c) {
        if (std::fabs(row[c]) > std::fabs(extreme)) extreme = row[c];
      }
      uint16_t scale_bits = FloatToBf16(extreme / -8.0f);
      float d = Bf16ToFloat(scale_bits);
      block_scale[Int4ScaleIndex(*m, r, b)] = scale_bits;
      for (int64_t c = c0; c < c1; ++c) {
        float v = d != 0.0f ? RoundHalfAwayReference(row[c] / d) : 0.0f;
        int qi = static_cast<int>(std::clamp(v, -8.0f, 7.0f));
        bool high = false;
        size_t idx = Int4ByteIndex(*m, r, c, &high);
        uint8_t nib = static_cast<uint8_t>(qi + 8);
        bytes[idx] = high ? static_cast<uint8_t>((bytes[idx] & 0x0f) | (nib << 4))
                          : static_cast<uint8_t>((bytes[idx] & 0xf0) | nib);
      }
    }
  }
}

// A matrix with every buffer allocated and zeroed. A failed allocation is an error, never a
// write through a null pointer later.
Expected<PackedMatrix> AllocatePacked(size_t values, int64_t rows, int64_t cols,
                                      WeightFormat format) {
  TS_RETURN_IF_ERROR(CheckShape(values, rows, cols));
  if (format == WeightFormat::kAuto) {
    return Internal("PackMatrix: kAuto must be resolved to a concrete format first");
  }
  PackedMatrix m;
  InitGeometry(&m, rows, cols, format);
  const PackedMatrixSizes sizes = PackedSizesFor(format, rows, cols);
  m.data.Allocate(sizes.data_bytes);
  m.row_scale.Allocate(sizes.row_scale);
  m.row_offset.Allocate(sizes.row_offset);
  m.block_scale.Allocate(sizes.block_scale);
  if (m.data.size() != sizes.data_bytes || m.row_scale.size() != sizes.row_scale ||
      m.row_offset.size() != sizes.row_offset || m.block_scale.size() != sizes.block_scale) {
    return ResourceExhausted("out of memory packing a " + std::to_string(rows) + "x" +
                             std::to_string(cols) + " weight matrix (" +
                             std::to_string(sizes.data_bytes) + " bytes)");
  }
  return m;
}

}  // namespace

Expected<PackedMatrix> PackMatrixReference(std::span<const float> w, int64_t rows, int64_t cols,
                                           WeightFormat format) {
  TS_ASSIGN_OR_RETURN(PackedMatrix m, AllocatePacked(w.size(), rows, cols, format));
  switch (format) {
    case WeightFormat::kF32: {
      auto* out = reinterpret_cast<float*>(m.data.mutable_data());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c)
          out[GroupedIndex(m, r, c, 1)] = w[static_cast<size_t>(r * cols + c)];
      }
      return m;
    }
    case WeightFormat::kBF16: {
      auto* out = reinterpret_cast<uint16_t*>(m.data.mutable_data());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          out[GroupedIndex(m, r, c, 2)] = FloatToBf16(w[static_cast<size_t>(r * cols + c)]);
        }
      }
      return m;
    }
    case WeightFormat::kInt8:
      PackInt8(w, &m);
      return m;
    case WeightFormat::kInt4:
      PackInt4(w, &m);
      return m;
    case WeightFormat::kAuto:
      break;
  }
  return Internal("PackMatrix: kAuto must be resolved to a concrete format first");
}

namespace {

// ---- the fast packer: one panel at a time, in layout order, no index arithmetic per element
// beyond shifts. Each writes panel p of m from src = rows [16p, 16p + n) (fp32, row-major,
// m->cols wide); the buffers were zeroed by AllocatePacked, and rows >= n stay padding. ----

void PackPanelF32(const float* src, int64_t n, int64_t p, PackedMatrix* m) {
  float* out = reinterpret_cast<float*>(m->data.mutable_data()) + p * m->padded_cols * kPanelRows;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = src + r * m->cols;
    for (int64_t c = 0; c < m->cols; ++c) out[c * kPanelRows + r] = row[c];
  }
}

void PackPanelBf16(const float* src, int64_t n, int64_t p, PackedMatrix* m) {
  uint16_t* out =
      reinterpret_cast<uint16_t*>(m->data.mutable_data()) + p * m->padded_cols * kPanelRows;
  for (int64_t r = 0; r < n; ++r) {
    const float* row = src + r * m->cols;
    // [Kp/2][16][2]: the pair j of row r starts at (16j + r) * 2.
    for (int64_t c = 0; c < m->cols; ++c)
      out[(c >> 1) * 32 + r * 2 + (c & 1)] = FloatToBf16(row[c]);
  }
}

// The ISA's weight quantizer (kernels.h); the per-element std::round was most of the time
// spent loading a checkpoint as INT8/INT4. Every family gives identical bytes, so the family
// chosen at the first call serves the process.
void QuantizeSpan(const float* x, int64_t n, float d, float lo, float hi, int8_t* q) {
  static const KernelTable* const kernels = KernelsFor(DetectCpuIsa());
  kernels->quantize_weights(x, n, d, lo, hi, q);
}

void PackPanelInt8(const float* src, int64_t n, int64_t p, PackedMatrix* m) {
  int8_t* out = reinterpret_cast<int8_t*>(m->data.mutable_data()) + p * m->padded_cols * kPanelRows;
  std::vector<int8_t> q(static_cast<size_t>(m->padded_cols), 0);  // padding inputs stay 0
  for (int64_t r = 0; r < n; ++r) {
    const float* row = src + r * m->cols;
    float absmax = 0.0f;
    for (int64_t c = 0; c < m->cols; ++c) absmax = std::max(absmax, std::fabs(row[c]));
    const float scale = absmax / 127.0f;
    m->row_scale.mutable_data()[p * kPanelRows + r] = scale;
    if (scale == 0.0f) continue;  // an all-zero row: weights and offset stay 0
    QuantizeSpan(row, m->cols, scale, -127.0f, 127.0f, q.data());
    int32_t sum = 0;
    for (int64_t c = 0; c < m->cols; ++c) sum += q[static_cast<size_t>(c)];
    m->row_offset.mutable_data()[p * kPanelRows + r] = -128 * sum;
    // [Kp/4][16][4]: the quad j of row r starts at (16j + r) * 4.
    for (int64_t j = 0; j < m->padded_cols / 4; ++j)
      std::memcpy(out + j * 64 + r * 4, &q[static_cast<size_t>(4 * j)], 4);
  }
}

void PackPanelInt4(const float* src, int64_t n, int64_t p, PackedMatrix* m) {
  const int64_t blocks = m->padded_cols / kInt4Block;
  uint8_t* out = m->data.mutable_data() + p * blocks * 256;
  uint16_t* scales = m->block_scale.mutable_data() + p * blocks * kPanelRows;
  std::memset(out, 0x88, static_cast<size_t>(blocks * 256));  // padding is q = 0 (nibble 8)
  int8_t q[kInt4Block];
  for (int64_t r = 0; r < n; ++r) {
    const float* row = src + r * m->cols;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kInt4Block, c1 = std::min(m->cols, c0 + kInt4Block);
      float extreme = 0.0f;
      for (int64_t c = c0; c < c1; ++c) {
        if (std::fabs(row[c]) > std::fabs(extreme)) extreme = row[c];
      }
      const uint16_t scale_bits = FloatToBf16(extreme / -8.0f);
      const float d = Bf16ToFloat(scale_bits);
      scales[b * kPanelRows + r] = scale_bits;
      std::memset(q, 0, sizeof(q));
      if (d != 0.0f) QuantizeSpan(row + c0, c1 - c0, d, -8.0f, 7.0f, q);
      // [4][16][4] per block: inputs 8j + e (low nibble) and 8j + 4 + e (high nibble) of row r
      // share the byte (16j + r) * 4 + e.
      uint8_t* block = out + b * 256 + r * 4;
      for (int j = 0; j < 4; ++j) {
        for (int e = 0; e < 4; ++e) {
          block[j * 64 + e] =
              static_cast<uint8_t>((q[8 * j + e] + 8) | ((q[8 * j + 4 + e] + 8) << 4));
        }
      }
    }
  }
}

}  // namespace

Expected<PackedMatrix> PackMatrixFrom(const PackRowSource& source, int64_t rows, int64_t cols,
                                      WeightFormat format, ThreadPool* pool) {
  const size_t values = rows > 0 && cols > 0 ? static_cast<size_t>(rows * cols) : 0;
  TS_ASSIGN_OR_RETURN(PackedMatrix m, AllocatePacked(values, rows, cols, format));
  void (*pack_panel)(const float*, int64_t, int64_t, PackedMatrix*) =
      format == WeightFormat::kF32    ? PackPanelF32
      : format == WeightFormat::kBF16 ? PackPanelBf16
      : format == WeightFormat::kInt8 ? PackPanelInt8
                                      : PackPanelInt4;
  const int threads = pool ? pool->size() : 1;
  std::vector<Status> failed(static_cast<size_t>(threads));
  auto pack_range = [&](int64_t begin, int64_t end, int thread) {
    std::vector<float> panel_rows(static_cast<size_t>(kPanelRows * cols));
    for (int64_t p = begin; p < end; ++p) {
      const int64_t first = p * kPanelRows, n = std::min(kPanelRows, rows - first);
      Status st =
          source(first, n, std::span<float>(panel_rows.data(), static_cast<size_t>(n * cols)));
      if (!st.ok()) {
        failed[static_cast<size_t>(thread)] = std::move(st);
        return;
      }
      pack_panel(panel_rows.data(), n, p, &m);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(m.panels(), pack_range);
  } else {
    pack_range(0, m.panels(), 0);
  }
  for (Status& st : failed) TS_RETURN_IF_ERROR(st);
  return m;
}

Expected<PackedMatrix> PackMatrix(std::span<const float> w, int64_t rows, int64_t cols,
                                  WeightFormat format) {
  TS_RETURN_IF_ERROR(CheckShape(w.size(), rows, cols));
  return PackMatrixFrom(
      [&](int64_t first, int64_t /*count*/, std::span<float> out) {
        std::memcpy(out.data(), w.data() + first * cols, out.size_bytes());
        return Status::Ok();
      },
      rows, cols, format);
}

PackedMatrixSizes PackedSizesFor(WeightFormat format, int64_t rows, int64_t cols) {
  const size_t padded_rows = static_cast<size_t>(RoundUp(rows, kPanelRows));
  const size_t elements = padded_rows * static_cast<size_t>(RoundUp(cols, kColAlign));
  PackedMatrixSizes s;
  switch (format) {
    case WeightFormat::kF32:
      s.data_bytes = elements * sizeof(float);
      break;
    case WeightFormat::kBF16:
      s.data_bytes = elements * sizeof(uint16_t);
      break;
    case WeightFormat::kInt8:
      s.data_bytes = elements;
      s.row_scale = padded_rows;
      s.row_offset = padded_rows;
      break;
    case WeightFormat::kInt4:
      s.data_bytes = elements / 2;
      s.block_scale = elements / kInt4Block;
      break;
    case WeightFormat::kAuto:
      break;
  }
  return s;
}

namespace {

// Points `buffer` at `bytes` after checking its size and alignment.
template <typename T>
Status BorrowChecked(const char* what, std::span<const uint8_t> bytes, size_t count,
                     PanelBuffer<T>* buffer) {
  if (bytes.size() != count * sizeof(T)) {
    return Corrupt("packed " + std::string(what) + " is " + std::to_string(bytes.size()) +
                   " bytes, the matrix shape needs " + std::to_string(count * sizeof(T)));
  }
  if (count != 0 && reinterpret_cast<uintptr_t>(bytes.data()) % 64 != 0) {
    return Corrupt("packed " + std::string(what) + " is not 64-byte aligned");
  }
  buffer->Borrow(count ? reinterpret_cast<const T*>(bytes.data()) : nullptr, count);
  return Status::Ok();
}

}  // namespace

Expected<PackedMatrix> ViewPackedMatrix(WeightFormat format, int64_t rows, int64_t cols,
                                        const PackedMatrixBytes& bytes) {
  if (format == WeightFormat::kAuto || rows <= 0 || cols <= 0) {
    return Internal("ViewPackedMatrix: needs a concrete format and a non-empty shape");
  }
  PackedMatrix m;
  InitGeometry(&m, rows, cols, format);
  const PackedMatrixSizes sizes = PackedSizesFor(format, rows, cols);
  TS_RETURN_IF_ERROR(BorrowChecked("weights", bytes.data, sizes.data_bytes, &m.data));
  TS_RETURN_IF_ERROR(BorrowChecked("row scales", bytes.row_scale, sizes.row_scale, &m.row_scale));
  TS_RETURN_IF_ERROR(
      BorrowChecked("row offsets", bytes.row_offset, sizes.row_offset, &m.row_offset));
  TS_RETURN_IF_ERROR(
      BorrowChecked("block scales", bytes.block_scale, sizes.block_scale, &m.block_scale));
  return m;
}

float PackedValueF32(const PackedMatrix& m, int64_t row, int64_t col) {
  if (m.format == WeightFormat::kBF16) {
    return Bf16ToFloat(
        reinterpret_cast<const uint16_t*>(m.data.data())[GroupedIndex(m, row, col, 2)]);
  }
  return reinterpret_cast<const float*>(m.data.data())[GroupedIndex(m, row, col, 1)];
}

int PackedQuantValue(const PackedMatrix& m, int64_t row, int64_t col) {
  if (m.format == WeightFormat::kInt8) {
    return reinterpret_cast<const int8_t*>(m.data.data())[GroupedIndex(m, row, col, 4)];
  }
  bool high = false;
  uint8_t byte = m.data[Int4ByteIndex(m, row, col, &high)];
  return (high ? (byte >> 4) : (byte & 0x0f)) - 8;
}

float Int4BlockScale(const PackedMatrix& m, int64_t row, int64_t block) {
  return Bf16ToFloat(m.block_scale[Int4ScaleIndex(m, row, block)]);
}

float DequantizedValue(const PackedMatrix& m, int64_t row, int64_t col) {
  switch (m.format) {
    case WeightFormat::kInt8:
      return static_cast<float>(PackedQuantValue(m, row, col)) *
             m.row_scale[static_cast<size_t>(row)];
    case WeightFormat::kInt4:
      return static_cast<float>(PackedQuantValue(m, row, col)) *
             Int4BlockScale(m, row, col / kInt4Block);
    default:
      return PackedValueF32(m, row, col);
  }
}

namespace {

Status CheckRow(const PackedMatrix& m, int64_t row, std::span<float> out) {
  if (m.rows <= 0 || m.data.data() == nullptr) return Internal("dequantize: the matrix is empty");
  if (row < 0 || row >= m.rows) {
    return OutOfRange("row " + std::to_string(row) + " is outside the matrix's " +
                      std::to_string(m.rows) + " rows");
  }
  if (out.size() != static_cast<size_t>(m.cols)) {
    return Internal("dequantize: the output holds " + std::to_string(out.size()) +
                    " values, the row " + std::to_string(m.cols));
  }
  return Status::Ok();
}

}  // namespace

Status DequantizeRowReference(const PackedMatrix& m, int64_t row, std::span<float> out) {
  TS_RETURN_IF_ERROR(CheckRow(m, row, out));
  for (int64_t c = 0; c < m.cols; ++c) out[static_cast<size_t>(c)] = DequantizedValue(m, row, c);
  return Status::Ok();
}

Status DequantizeRow(const PackedMatrix& m, int64_t row, std::span<float> out) {
  TS_RETURN_IF_ERROR(CheckRow(m, row, out));
  const int64_t p = row / kPanelRows, r = row % kPanelRows;
  const int64_t panel_values = m.padded_cols * kPanelRows;  // weights per panel
  float* y = out.data();
  switch (m.format) {
    case WeightFormat::kF32: {  // [Kp][16]
      const float* w = reinterpret_cast<const float*>(m.data.data()) + p * panel_values + r;
      for (int64_t c = 0; c < m.cols; ++c) y[c] = w[c * kPanelRows];
      return Status::Ok();
    }
    case WeightFormat::kBF16: {  // [Kp/2][16][2]
      const uint16_t* w =
          reinterpret_cast<const uint16_t*>(m.data.data()) + p * panel_values + r * 2;
      for (int64_t c = 0; c < m.cols; ++c) y[c] = Bf16ToFloat(w[(c >> 1) * 32 + (c & 1)]);
      return Status::Ok();
    }
    case WeightFormat::kInt8: {  // [Kp/4][16][4], one scale per row
      const int8_t* q = reinterpret_cast<const int8_t*>(m.data.data()) + p * panel_values + r * 4;
      const float scale = m.row_scale[static_cast<size_t>(row)];
      for (int64_t c = 0; c < m.cols; ++c) {
        y[c] = static_cast<float>(q[(c >> 2) * 64 + (c & 3)]) * scale;
      }
      return Status::Ok();
    }
    case WeightFormat::kInt4: {  // [Kp/32][4][16][4] bytes, one bf16 scale per 32-block
      const int64_t blocks = m.padded_cols / kInt4Block;
      const uint8_t* bytes = m.data.data() + p * blocks * 256 + r * 4;
      const uint16_t* scales = m.block_scale.data() + p * blocks * kPanelRows + r;
      for (int64_t b = 0; b * kInt4Block < m.cols; ++b) {
        const float d = Bf16ToFloat(scales[b * kPanelRows]);
        const uint8_t* block = bytes + b * 256;
        float v[kInt4Block];
        for (int j = 0; j < 4; ++j) {
          for (int e = 0; e < 4; ++e) {
            const uint8_t byte = block[j * 64 + e];
            v[8 * j + e] = static_cast<float>((byte & 0x0f) - 8) * d;
            v[8 * j + 4 + e] = static_cast<float>((byte >> 4) - 8) * d;
          }
        }
        const int64_t n = std::min(kInt4Block, m.cols - b * kInt4Block);
        std::copy(v, v + n, y + b * kInt4Block);
      }
      return Status::Ok();
    }
    case WeightFormat::kAuto:
      break;
  }
  return Internal("dequantize: kAuto is not a packed format");
}

Status DequantizeRows(const PackedMatrix& m, std::span<const int32_t> rows, std::span<float> out) {
  const auto cols = static_cast<size_t>(m.cols);
  if (out.size() != rows.size() * cols) {
    return Internal("dequantize: the output does not hold " + std::to_string(rows.size()) +
                    " rows of " + std::to_string(cols));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    TS_RETURN_IF_ERROR(DequantizeRow(m, rows[i], out.subspan(i * cols, cols)));
  }
  return Status::Ok();
}

}  // namespace tessera
