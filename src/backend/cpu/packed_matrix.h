// Weight matrices packed once at load into the panel layouts the CPU kernels stream, and the
// per-call activation block the kernels read. All formats share one geometry: output rows
// are grouped in panels of 16 (one AVX-512 register of outputs), the input dimension is
// padded with zeros to a multiple of 32, and inside a panel the values of the 16 rows for a
// few consecutive inputs sit side by side, so a kernel loads 64 bytes and multiplies them by
// one broadcast activation group with no horizontal reduction.
//
//   std::vector<float> w = ...;                      // [rows, cols] row-major
//   TS_ASSIGN_OR_RETURN(PackedMatrix m, PackMatrix(w, rows, cols, WeightFormat::kInt4));
//   ActivationBlock acts;
//   acts.Reserve(/*max_rows=*/64, m.padded_cols);
//   acts.Prepare(kernels, x, /*rows=*/1, m.padded_cols, m.format);  // quantize / convert once
//   kernels.matmul[...](args);                        // see kernels.h
//
// Quantization (deterministic, done once at load, scalar code):
//   INT8: per output row, scale = max|w| / 127, q = round-half-away-from-zero(w / scale),
//         clamped to [-127, 127] (never -128, so the AVX2 sign trick cannot overflow).
//   INT4: per row and per block of 32 inputs, m = the value of largest magnitude (first one
//         on ties), d = m / -8 rounded to bf16, q = clamp(round-half-away-from-zero(w / d),
//         -8, 7); stored as the nibble q + 8. The element m maps to -8 exactly.
//   BF16: round to nearest even; BF16 checkpoint values (widened exactly) come back unchanged.
//   Activations for INT8/INT4 (per call, per token row): scale = max|x| / 127 and
//   q = nearbyint(x * (127 / max|x|)) (ties to even), identical on every ISA.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <utility>

#include "backend/backend.h"
#include "base/large_buffer.h"
#include "base/status.h"
#include "base/thread_pool.h"

namespace tessera {

constexpr int64_t kPanelRows = 16;  // outputs per panel
constexpr int64_t kColAlign = 32;   // input padding; also the INT4 block length
constexpr int64_t kInt4Block = 32;

// A zero-initialised, 64-byte aligned array that is sized once and never reallocated (on
// transparent huge pages from 2 MiB up: LargeBuffer).
template <typename T>
class AlignedArray {
 public:
  AlignedArray() = default;
  explicit AlignedArray(size_t n) { Resize(n); }
  void Resize(size_t n) {
    const bool ok = n <= SIZE_MAX / sizeof(T) && buffer_.Allocate(n * sizeof(T));
    if (!ok) buffer_.Reset();
    size_ = ok ? n : 0;
  }
  T* data() { return reinterpret_cast<T*>(buffer_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(buffer_.data()); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }

 private:
  LargeBuffer buffer_;
  size_t size_ = 0;
};

// Panel storage: either owned (packed at load, an AlignedArray) or borrowed from memory that
// outlives the matrix (a package's mapped tensor file, kept alive by the Checkpoint the
// backend was loaded from). Kernels only read through data().
template <typename T>
class PanelBuffer {
 public:
  PanelBuffer() = default;
  PanelBuffer(PanelBuffer&& other) noexcept { *this = std::move(other); }
  PanelBuffer& operator=(PanelBuffer&& other) noexcept {
    owned_ = std::move(other.owned_);
    view_ = std::exchange(other.view_, nullptr);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }
  void Allocate(size_t n) {
    owned_.Resize(n);
    view_ = owned_.data();
    size_ = owned_.size();
  }
  void Borrow(const T* data, size_t n) {
    owned_.Resize(0);
    view_ = data;
    size_ = n;
  }
  T* mutable_data() { return owned_.data(); }  // null when borrowed
  const T* data() const { return view_; }
  size_t size() const { return size_; }
  const T& operator[](size_t i) const { return view_[i]; }
  bool borrowed() const { return view_ != nullptr && owned_.data() == nullptr; }

 private:
  AlignedArray<T> owned_;
  const T* view_ = nullptr;
  size_t size_ = 0;
};

inline int64_t RoundUp(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

struct PackedMatrix {
  WeightFormat format = WeightFormat::kF32;  // never kAuto here
  int64_t rows = 0;                          // N, outputs
  int64_t cols = 0;                          // K, inputs
  int64_t padded_rows = 0;                   // N rounded up to 16
  int64_t padded_cols = 0;                   // K rounded up to 32
  int64_t panels() const { return padded_rows / kPanelRows; }

  // Layouts by format (P = panels, Kp = padded_cols, r = row inside the panel):
  //   F32:  float    [P][Kp][16]            w[16p + r][k]
  //   BF16: uint16_t [P][Kp/2][16][2]       w[16p + r][2j + e] at [p][j][r][e]
  //   INT8: int8_t   [P][Kp/4][16][4]       w[16p + r][4j + e] at [p][j][r][e]
  //   INT4: uint8_t  [P][Kp/32][4][16][4]   byte [p][b][j][r][e] holds q + 8 of
  //         w[16p + r][32b + 8j + e] in its low nibble and of w[16p + r][32b + 8j + 4 + e]
  //         in its high nibble.
  PanelBuffer<uint8_t> data;
  // INT8: scale of each row [padded_rows] (0 for padding rows).
  PanelBuffer<float> row_scale;
  // INT8: -128 * sum_k q[row][k] [padded_rows]; the AVX-512 kernel feeds activations as
  // unsigned (x + 128) to vpdpbusd and starts its accumulator here to cancel the offset.
  PanelBuffer<int32_t> row_offset;
  // INT4: bf16 scale of each (row, block), [P][Kp/32][16].
  PanelBuffer<uint16_t> block_scale;

  size_t bytes() const {
    return data.size() + row_scale.size() * 4 + row_offset.size() * 4 + block_scale.size() * 2;
  }
};

// Packs a row-major fp32 matrix. `format` must be kF32, kBF16, kInt8 or kInt4.
Expected<PackedMatrix> PackMatrix(std::span<const float> w, int64_t rows, int64_t cols,
                                  WeightFormat format);

// Fills out ([count][cols] fp32, row-major) with rows [first, first + count) of the matrix
// being packed. Called for disjoint ranges, from several threads at once when packing uses a
// pool, so it must be safe to call concurrently.
using PackRowSource = std::function<Status(int64_t first, int64_t count, std::span<float> out)>;

// Packs panel by panel (16 rows at a time) from `source`, so no fp32 copy of the whole matrix
// is ever made (the LM head of a 151936-word vocabulary would need 0.5-1.5 GB); panels are
// spread over `pool` when one is given (it must not be running a job already). Produces the
// same bytes as PackMatrixReference.
Expected<PackedMatrix> PackMatrixFrom(const PackRowSource& source, int64_t rows, int64_t cols,
                                      WeightFormat format, ThreadPool* pool = nullptr);

// The plain element-by-element packer that defines the layouts and the quantization above.
// Kept as the reference the fast packer is tested against; slow, not used for loading.
Expected<PackedMatrix> PackMatrixReference(std::span<const float> w, int64_t rows, int64_t cols,
                                           WeightFormat format);

// Element counts of each buffer of a packed [rows, cols] matrix in `format` (0 for buffers the
// format does not use). PackMatrix allocates exactly these; ViewPackedMatrix checks them.
struct PackedMatrixSizes {
  size_t data_bytes = 0;
  size_t row_scale = 0;
  size_t row_offset = 0;
  size_t block_scale = 0;
};
PackedMatrixSizes PackedSizesFor(WeightFormat format, int64_t rows, int64_t cols);

// Serialized panels, as a package stores them (see catalog/package.h).
struct PackedMatrixBytes {
  std::span<const uint8_t> data;
  std::span<const uint8_t> row_scale;    // f32 little-endian
  std::span<const uint8_t> row_offset;   // i32 little-endian
  std::span<const uint8_t> block_scale;  // bf16
};
// A matrix whose panels live in `bytes` (not copied; the memory must outlive the matrix).
// Every size is checked against PackedSizesFor and every buffer must be 64-byte aligned.
Expected<PackedMatrix> ViewPackedMatrix(WeightFormat format, int64_t rows, int64_t cols,
                                        const PackedMatrixBytes& bytes);

// Element access for the scalar references and tests (logical indices, no padding).
float PackedValueF32(const PackedMatrix& m, int64_t row, int64_t col);  // F32 / BF16
int PackedQuantValue(const PackedMatrix& m, int64_t row, int64_t col);  // INT8 / INT4
float Int4BlockScale(const PackedMatrix& m, int64_t row, int64_t block);
// The value the weight stands for: f32/bf16 value, or q * scale for INT8/INT4.
float DequantizedValue(const PackedMatrix& m, int64_t row, int64_t col);

// Row `row` of the matrix as the values its weights stand for (out.size() == m.cols), walking
// the row's stride through its panel instead of indexing element by element; bit-identical to
// DequantizeRowReference. Used to read token embeddings from a tied LM head (a package stores
// that matrix once, as the head).
Status DequantizeRow(const PackedMatrix& m, int64_t row, std::span<float> out);
// The definition: DequantizedValue for every column.
Status DequantizeRowReference(const PackedMatrix& m, int64_t row, std::span<float> out);
// DequantizeRow of each of `rows` into out [rows.size(), cols]; a row outside the matrix is an
// error naming it (nothing past it is read).
Status DequantizeRows(const PackedMatrix& m, std::span<const int32_t> rows, std::span<float> out);

// Rows of activations prepared for one weight format: fp32 always, plus bf16 copies or
// int8 quantized values with per-row scale and per-block sums. Sized once by Reserve.
struct ActivationBlock {
  int64_t rows = 0;             // tokens currently held
  int64_t stride = 0;           // padded_cols of the matrices it feeds
  const float* f32 = nullptr;   // [rows][stride], zero padded (points at the caller's rows)
  AlignedArray<uint16_t> bf16;  // [max_rows][stride]
  AlignedArray<int8_t> q8;      // [max_rows][stride]
  // INT8 only: unsigned bytes the kernel family reads (KernelTable::int8_unsigned): q8 + 128
  // (the sign bit flipped), the operand vpdpbusd takes, or |q8|, vpmaddubsw's, so the kernels
  // need not derive it per use.
  AlignedArray<uint8_t> q8u;          // [max_rows][stride]
  AlignedArray<float> q_scale;        // [max_rows]
  AlignedArray<int32_t> q_block_sum;  // [max_rows][stride / 32], sum of q over each block
  int64_t max_rows = 0;
  int64_t max_stride = 0;

  void Reserve(int64_t rows_cap, int64_t stride_cap) {
    max_rows = rows_cap;
    max_stride = stride_cap;
    bf16.Resize(static_cast<size_t>(rows_cap * stride_cap));
    q8.Resize(static_cast<size_t>(rows_cap * stride_cap));
    q8u.Resize(static_cast<size_t>(rows_cap * stride_cap));
    q_scale.Resize(static_cast<size_t>(rows_cap));
    q_block_sum.Resize(static_cast<size_t>(rows_cap * stride_cap / kInt4Block));
  }
};

}  // namespace tessera
