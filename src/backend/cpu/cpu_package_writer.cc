#include "backend/cpu/cpu_package_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "base/sha256.h"
#include "base/thread_pool.h"

namespace tessera {
namespace {

std::span<const uint8_t> PartBytes(const PackedMatrix& m, int part) {
  auto bytes = [](const auto& buffer) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buffer.data()),
                                    buffer.size() * sizeof(*buffer.data()));
  };
  switch (part) {
    case 0:
      return bytes(m.data);
    case 1:
      return bytes(m.row_scale);
    case 2:
      return bytes(m.row_offset);
    default:
      return bytes(m.block_scale);
  }
}

struct CloseFile {
  void operator()(FILE* f) const { std::fclose(f); }
};

// Writes and hashes the file's bytes in order; the first failed write is remembered.
class HashingWriter {
 public:
  explicit HashingWriter(FILE* out) : out_(out) {}
  void Emit(const void* data, size_t size) {
    if (size == 0 || !ok_) return;
    ok_ = std::fwrite(data, 1, size, out_.get()) == size;
    hash_.Update(data, size);
    written_ += size;
  }
  uint64_t written() const { return written_; }
  // Closes the file; false when any write or the close failed.
  bool Close() {
    const bool closed = std::fclose(out_.release()) == 0;
    return closed && ok_;
  }
  std::string FinishHex() { return hash_.FinishHex(); }

 private:
  std::unique_ptr<FILE, CloseFile> out_;
  Sha256 hash_;
  uint64_t written_ = 0;
  bool ok_ = true;
};

}  // namespace

std::vector<CpuPackageTensor> PlanCpuPackageTensors(const Checkpoint& source, WeightFormat format) {
  const ModelTensors& t = source.tensors;
  std::vector<CpuPackageTensor> plan;
  auto copy = [&](const TensorRef& ref) {
    const TensorInfo* info = ref.info;
    if (info) plan.push_back({info->name, info->dtype, info->data.size(), 0, info});
  };
  auto packed = [&](int64_t layer, CpuMatrix m, MatrixShape shape) {
    PackedMatrixSizes sizes = PackedSizesFor(format, shape.rows, shape.cols);
    const size_t counts[] = {sizes.data_bytes, sizes.row_scale, sizes.row_offset,
                             sizes.block_scale};
    for (int part = 0; part < 4; ++part) {
      if (counts[part] == 0) continue;
      const PackedPart& p = kPackedParts[part];
      plan.push_back({PackedTensorName(layer, CpuMatrixName(m), p.name), p.dtype,
                      counts[part] * DTypeSize(p.dtype), 0, nullptr, layer, m, part});
    }
  };
  // Tied: the embedding is the LM head's matrix, stored once, packed (see the header).
  if (!source.config.tie_word_embeddings) copy(t.embed);
  copy(t.final_norm);
  copy(t.score);
  for (size_t i = 0; i < t.layers.size(); ++i) {
    const LayerTensors& L = t.layers[i];
    for (const TensorRef* ref : {&L.input_norm, &L.q_bias, &L.k_bias, &L.v_bias, &L.o_bias,
                                 &L.q_norm, &L.k_norm, &L.attn_out_norm, &L.conv1d, &L.dt_bias,
                                 &L.a_log, &L.delta_norm, &L.post_attn_norm, &L.mlp_out_norm}) {
      copy(*ref);
    }
    for (CpuMatrix m : kCpuLayerMatrices) {
      packed(static_cast<int64_t>(i), m, CpuMatrixShape(t.spec, static_cast<int64_t>(i), m));
    }
  }
  packed(-1, CpuMatrix::kQkv, {t.spec.vocab, t.spec.hidden});
  uint64_t offset = 0;
  for (CpuPackageTensor& p : plan) {
    offset = (offset + kCpuPackageAlignment - 1) / kCpuPackageAlignment * kCpuPackageAlignment;
    p.offset = offset;
    offset += p.bytes;
  }
  return plan;
}

// The header is padded so the data section starts aligned, then every tensor follows at its
// planned offset. Layers are packed one at a time (each matrix's panels on every core) and
// written while hashing, so memory stays at one layer (or the LM head).
Expected<CpuPackageFile> WriteCpuPackageTensorFile(
    const Checkpoint& source, WeightFormat format, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& metadata,
    const ProgressCallback& progress) {
  if (source.tensors.packed) {
    return InvalidArgument(source.dir + " is already a package; write one from its source");
  }
  if (format == WeightFormat::kAuto) {
    return Internal("package writer: the weight format must be resolved first");
  }
  const std::vector<CpuPackageTensor> plan = PlanCpuPackageTensors(source, format);
  ThreadPool pool(std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"},
                            {kPackedLayoutKey, kCpuPanelLayout},
                            {kPackedFormatKey, std::string(WeightFormatName(format))}};
  for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;
  for (const CpuPackageTensor& p : plan) {
    std::vector<int64_t> shape =
        p.copy ? p.copy->shape
               : std::vector<int64_t>{static_cast<int64_t>(p.bytes / DTypeSize(p.dtype))};
    header[p.name] = {{"dtype", std::string(DTypeName(p.dtype))},
                      {"shape", shape},
                      {"data_offsets", {p.offset, p.offset + p.bytes}}};
  }
  std::string header_text = header.dump();
  while ((8 + header_text.size()) % kCpuPackageAlignment != 0) header_text.push_back(' ');

  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return IoError("cannot create " + path + ": " + std::strerror(errno));
  HashingWriter out(file);
  uint8_t length_bytes[8];
  const uint64_t header_length = header_text.size();
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<uint8_t>(header_length >> (8 * i));
  out.Emit(length_bytes, 8);
  out.Emit(header_text.data(), header_text.size());
  const uint64_t data_start = out.written();
  const uint64_t file_bytes =
      data_start + (plan.empty() ? 0 : plan.back().offset + plan.back().bytes);
  auto report = [&](bool finished) {
    ReportProgress(progress, {.phase = kPackingPhase,
                              .done = out.written(),
                              .total = file_bytes,
                              .unit = ProgressUnit::kBytes,
                              .finished = finished});
  };
  report(false);
  static const uint8_t kZeros[kCpuPackageAlignment] = {};
  std::optional<CpuLayerWeights> layer;
  std::optional<PackedMatrix> head;
  int64_t layer_index = -2;
  Status status;
  for (const CpuPackageTensor& p : plan) {
    out.Emit(kZeros, p.offset - (out.written() - data_start));
    std::span<const uint8_t> bytes;
    if (p.copy) {
      bytes = p.copy->data;
    } else if (p.layer < 0) {
      if (!head) {
        layer.reset();  // one matrix set in memory at a time
        auto packed = LoadCpuHeadMatrix(source, format, &pool);
        if (!packed) {
          status = packed.status();
          break;
        }
        head = std::move(*packed);
      }
      bytes = PartBytes(*head, p.part);
    } else {
      if (p.layer != layer_index) {
        layer.reset();
        auto packed = LoadCpuLayerWeights(source, p.layer, format, &pool);
        if (!packed) {
          status = packed.status();
          break;
        }
        layer = std::move(*packed);
        layer_index = p.layer;
      }
      bytes = PartBytes(CpuLayerMatrix(*layer, p.matrix), p.part);
    }
    if (bytes.size() != p.bytes) {
      status = Internal("package writer: " + p.name + " has an unexpected size");
      break;
    }
    out.Emit(bytes.data(), bytes.size());
    report(false);  // the display limits its own redraws
  }
  const bool written = out.Close();
  if (!status.ok()) return status;
  if (!written) return IoError("cannot write " + path + ": " + std::strerror(errno));
  report(true);
  return CpuPackageFile{out.written(), out.FinishHex()};
}

std::string_view PackedWeightLayout() {
  return kCpuPanelLayout;
}

Expected<PackedTensorFile> WritePackedTensorFile(
    const Checkpoint& source, WeightFormat format, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& metadata,
    const ProgressCallback& progress) {
  return WriteCpuPackageTensorFile(source, format, path, metadata, progress);
}

}  // namespace tessera
