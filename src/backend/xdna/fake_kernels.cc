#include "backend/xdna/fake_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/backend.h"
#include "base/half.h"

namespace tessera {
namespace {

// Typed views of a kernel's arguments, each checked once against the bytes it needs.
template <typename T>
Expected<std::span<T>> View(const KernelArg& a, size_t count, const char* what) {
  if (!a.is_buffer) return InvalidArgument(std::string(what) + ": a buffer was expected");
  if (count > a.bytes.size() / sizeof(T)) {
    return OutOfRange(std::string(what) + ": needs " + std::to_string(count * sizeof(T)) +
                      " bytes, the buffer has " + std::to_string(a.bytes.size()));
  }
  return std::span<T>(reinterpret_cast<T*>(a.bytes.data()), count);
}
// The whole buffer as T.
template <typename T>
Expected<std::span<T>> All(const KernelArg& a, const char* what) {
  if (!a.is_buffer) return InvalidArgument(std::string(what) + ": a buffer was expected");
  return std::span<T>(reinterpret_cast<T*>(a.bytes.data()), a.bytes.size() / sizeof(T));
}
Expected<uint32_t> Scalar(const KernelArg& a, const char* what) {
  if (a.is_buffer) return InvalidArgument(std::string(what) + ": a scalar was expected");
  return a.scalar;
}
float AsFloat(uint32_t bits) {
  return std::bit_cast<float>(bits);
}

// The contract's sums: term i goes to fp32 partial sum i mod 8; the 8 are added pairwise.
struct Lanes {
  float part[8] = {};
  void Add(int64_t i, float v) { part[i & 7] += v; }
  float Sum() const {
    return ((part[0] + part[4]) + (part[2] + part[6])) +
           ((part[1] + part[5]) + (part[3] + part[7]));
  }
};

template <typename W>
float Dot(const float* x, const W* w, int64_t k) {
  Lanes s;
  for (int64_t i = 0; i < k; ++i) s.Add(i, x[i] * static_cast<float>(w[i]));
  return s.Sum();
}
struct Bf16 {
  uint16_t bits;
  explicit operator float() const { return Bf16ToFloat(bits); }
};

void RmsNormRow(const float* x, const float* w, int64_t n, float eps, float* y) {
  Lanes lanes;
  for (int64_t i = 0; i < n; ++i) lanes.Add(i, x[i] * x[i]);
  const float ss = lanes.Sum();
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}

Status RmsNorm(std::span<const KernelArg> a) {
  TS_ASSIGN_OR_RETURN(uint32_t rows, Scalar(a[3], "rmsnorm rows"));
  TS_ASSIGN_OR_RETURN(uint32_t n, Scalar(a[4], "rmsnorm n"));
  TS_ASSIGN_OR_RETURN(uint32_t eps, Scalar(a[5], "rmsnorm eps"));
  const size_t count = size_t{rows} * n;
  TS_ASSIGN_OR_RETURN(auto x, View<float>(a[0], count, "rmsnorm x"));
  TS_ASSIGN_OR_RETURN(auto w, View<float>(a[1], n, "rmsnorm weight"));
  TS_ASSIGN_OR_RETURN(auto y, View<float>(a[2], count, "rmsnorm y"));
  if (n == 0) return InvalidArgument("rmsnorm of width 0");
  for (uint32_t r = 0; r < rows; ++r) {
    RmsNormRow(x.data() + size_t{r} * n, w.data(), n, AsFloat(eps), y.data() + size_t{r} * n);
  }
  return Status::Ok();
}

Status Matmul(std::span<const KernelArg> a) {
  TS_ASSIGN_OR_RETURN(uint32_t rows, Scalar(a[4], "matmul rows"));
  TS_ASSIGN_OR_RETURN(uint32_t n, Scalar(a[5], "matmul n"));
  TS_ASSIGN_OR_RETURN(uint32_t k, Scalar(a[6], "matmul k"));
  TS_ASSIGN_OR_RETURN(uint32_t has_bias, Scalar(a[7], "matmul has_bias"));
  TS_ASSIGN_OR_RETURN(auto x, View<float>(a[0], size_t{rows} * k, "matmul x"));
  TS_ASSIGN_OR_RETURN(auto w, View<Bf16>(a[1], size_t{n} * k, "matmul weight"));
  TS_ASSIGN_OR_RETURN(auto y, View<float>(a[3], size_t{rows} * n, "matmul y"));
  std::span<float> bias;
  if (has_bias) {
    TS_ASSIGN_OR_RETURN(bias, View<float>(a[2], n, "matmul bias"));
  }
  for (uint32_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + size_t{r} * k;
    float* yr = y.data() + size_t{r} * n;
    for (uint32_t o = 0; o < n; ++o) {
      float v = Dot(xr, w.data() + size_t{o} * k, k);
      if (has_bias) v += bias[o];
      yr[o] = v;
    }
  }
  return Status::Ok();
}

// A checked reading of the batch descriptor.
struct Chunk {
  int64_t start_pos, n_tokens, first_row;
  std::span<const int32_t> table;
};
class Descriptor {
 public:
  static Expected<Descriptor> Read(const KernelArg& arg, int64_t pool_blocks) {
    TS_ASSIGN_OR_RETURN(auto words, All<const int32_t>(arg, "descriptor"));
    if (words.size() < kDescriptorHeader) return OutOfRange("descriptor: no header");
    Descriptor d;
    const int64_t chunks = words[0];
    d.rows_ = words[1];
    if (chunks < 0 || d.rows_ < 0 ||
        static_cast<size_t>(chunks) > (words.size() - kDescriptorHeader) / kDescriptorChunkWords) {
      return OutOfRange("descriptor: bad chunk count");
    }
    for (int64_t c = 0; c < chunks; ++c) {
      const int32_t* w = words.data() + kDescriptorHeader + c * kDescriptorChunkWords;
      Chunk ch{w[0], w[1], w[2], {}};
      const int64_t offset = w[3], blocks = w[4];
      if (ch.start_pos < 0 || ch.n_tokens <= 0 || ch.first_row < 0 ||
          ch.first_row + ch.n_tokens > d.rows_ || offset < 0 || blocks < 0 ||
          static_cast<size_t>(offset) > words.size() ||
          static_cast<size_t>(blocks) > words.size() - static_cast<size_t>(offset) ||
          KvBlocksFor(ch.start_pos + ch.n_tokens) > blocks) {
        return OutOfRange("descriptor: chunk " + std::to_string(c) + " is malformed");
      }
      ch.table = words.subspan(static_cast<size_t>(offset), static_cast<size_t>(blocks));
      for (int32_t b : ch.table) {
        if (b < 0 || b >= pool_blocks) {
          return OutOfRange("descriptor: KV block " + std::to_string(b) + " outside the pool of " +
                            std::to_string(pool_blocks));
        }
      }
      d.chunks_.push_back(ch);
    }
    return d;
  }
  int64_t rows() const { return rows_; }
  const std::vector<Chunk>& chunks() const { return chunks_; }

 private:
  int64_t rows_ = 0;
  std::vector<Chunk> chunks_;
};

// A KV cache buffer of one layer: [block][kKvBlockTokens][row_floats], fp32 or bf16.
class KvView {
 public:
  static Expected<KvView> Of(const KernelArg& arg, int64_t row_floats, bool bf16,
                             const char* what) {
    if (!arg.is_buffer || row_floats <= 0) return InvalidArgument(std::string(what) + ": bad");
    KvView v;
    v.bytes_ = arg.bytes;
    v.row_ = row_floats;
    v.bf16_ = bf16;
    v.blocks_ = static_cast<int64_t>(
        arg.bytes.size() / (static_cast<size_t>(row_floats) * kKvBlockTokens * (bf16 ? 2 : 4)));
    return v;
  }
  int64_t blocks() const { return blocks_; }
  // Position `pos` of a sequence whose block table is `table` (checked by Descriptor).
  size_t Index(std::span<const int32_t> table, int64_t pos) const {
    const int64_t block = table[static_cast<size_t>(pos >> kKvBlockShift)];
    return static_cast<size_t>((block * kKvBlockTokens + (pos & (kKvBlockTokens - 1))) * row_);
  }
  void Write(size_t at, const float* src) {
    if (bf16_) {
      uint16_t* d = reinterpret_cast<uint16_t*>(bytes_.data()) + at;
      for (int64_t i = 0; i < row_; ++i) d[i] = FloatToBf16(src[i]);
    } else {
      std::memcpy(reinterpret_cast<float*>(bytes_.data()) + at, src, sizeof(float) * row_);
    }
  }
  float Read(size_t at) const {
    return bf16_ ? Bf16ToFloat(reinterpret_cast<const uint16_t*>(bytes_.data())[at])
                 : reinterpret_cast<const float*>(bytes_.data())[at];
  }
  void CopyRows(size_t from, size_t to, int64_t rows) {
    const size_t e = bf16_ ? 2 : 4;
    std::memmove(bytes_.data() + to * e, bytes_.data() + from * e,
                 static_cast<size_t>(rows * row_) * e);
  }

 private:
  std::span<uint8_t> bytes_;
  int64_t row_ = 0, blocks_ = 0;
  bool bf16_ = false;
};

struct HeadShape {
  int64_t heads, kv_heads, head_dim;
};
Expected<HeadShape> Heads(const KernelArg& a) {
  TS_ASSIGN_OR_RETURN(uint32_t v, Scalar(a, "heads"));
  HeadShape h{v & 0xff, (v >> 8) & 0xff, static_cast<int64_t>(v >> 16) * 2};
  if (h.heads <= 0 || h.kv_heads <= 0 || h.head_dim <= 0 || h.heads % h.kv_heads != 0) {
    return InvalidArgument("attention shape: heads " + std::to_string(h.heads) + ", kv heads " +
                           std::to_string(h.kv_heads) + ", head_dim " + std::to_string(h.head_dim));
  }
  return h;
}

Status QkRopeKv(std::span<const KernelArg> a) {
  TS_ASSIGN_OR_RETURN(HeadShape h, Heads(a[9]));
  TS_ASSIGN_OR_RETURN(uint32_t rope_shape, Scalar(a[10], "rope shape"));
  TS_ASSIGN_OR_RETURN(uint32_t flags, Scalar(a[11], "flags"));
  TS_ASSIGN_OR_RETURN(uint32_t eps_bits, Scalar(a[12], "eps"));
  const int64_t rotary = rope_shape & 0xffff, q_stride = rope_shape >> 16, half = rotary / 2;
  const int64_t kv_dim = h.kv_heads * h.head_dim;
  if (rotary <= 0 || rotary % 2 || rotary > h.head_dim || q_stride < h.head_dim) {
    return InvalidArgument("rope shape: rotary_dim " + std::to_string(rotary) + ", q stride " +
                           std::to_string(q_stride));
  }
  const bool bf16 = flags & kFlagKvBf16, qk_norm = flags & kFlagQkNorm;
  TS_ASSIGN_OR_RETURN(KvView kc, KvView::Of(a[7], kv_dim, bf16, "key cache"));
  TS_ASSIGN_OR_RETURN(KvView vc, KvView::Of(a[8], kv_dim, bf16, "value cache"));
  TS_ASSIGN_OR_RETURN(Descriptor desc, Descriptor::Read(a[6], std::min(kc.blocks(), vc.blocks())));
  const size_t rows = static_cast<size_t>(desc.rows());
  TS_ASSIGN_OR_RETURN(auto q, View<float>(a[0], rows * q_stride * h.heads, "q"));
  TS_ASSIGN_OR_RETURN(auto k, View<float>(a[1], rows * kv_dim, "k"));
  TS_ASSIGN_OR_RETURN(auto v, View<float>(a[2], rows * kv_dim, "v"));
  std::span<float> qn, kn;
  if (qk_norm) {
    TS_ASSIGN_OR_RETURN(qn, View<float>(a[3], h.head_dim, "q_norm"));
    TS_ASSIGN_OR_RETURN(kn, View<float>(a[4], h.head_dim, "k_norm"));
  }
  TS_ASSIGN_OR_RETURN(auto rope, All<const float>(a[5], "rope table"));
  const int64_t positions = static_cast<int64_t>(rope.size() / (2 * static_cast<size_t>(half)));
  const float* cos_table = rope.data();
  const float* sin_table = rope.data() + positions * half;
  auto rotate = [&](float* x, int64_t pos) {
    const float* cs = cos_table + pos * half;
    const float* sn = sin_table + pos * half;
    for (int64_t i = 0; i < half; ++i) {
      const float p = x[i], r = x[i + half];
      x[i] = p * cs[i] - r * sn[i];
      x[i + half] = r * cs[i] + p * sn[i];
    }
  };
  for (const Chunk& c : desc.chunks()) {
    if (c.start_pos + c.n_tokens > positions) return OutOfRange("position past the rope table");
    for (int64_t i = 0; i < c.n_tokens; ++i) {
      const int64_t pos = c.start_pos + i;
      const size_t row = static_cast<size_t>(c.first_row + i);
      for (int64_t hh = 0; hh < h.heads; ++hh) {
        float* qh = q.data() + row * q_stride * h.heads + hh * q_stride;
        if (qk_norm) RmsNormRow(qh, qn.data(), h.head_dim, AsFloat(eps_bits), qh);
        rotate(qh, pos);
      }
      float* kr = k.data() + row * kv_dim;
      for (int64_t hh = 0; hh < h.kv_heads; ++hh) {
        float* kh = kr + hh * h.head_dim;
        if (qk_norm) RmsNormRow(kh, kn.data(), h.head_dim, AsFloat(eps_bits), kh);
        rotate(kh, pos);
      }
      const size_t at = kc.Index(c.table, pos);
      kc.Write(at, kr);
      vc.Write(at, v.data() + row * kv_dim);
    }
  }
  return Status::Ok();
}

Status Attention(std::span<const KernelArg> a) {
  TS_ASSIGN_OR_RETURN(HeadShape h, Heads(a[5]));
  TS_ASSIGN_OR_RETURN(uint32_t q_stride, Scalar(a[6], "q stride"));
  TS_ASSIGN_OR_RETURN(uint32_t window, Scalar(a[7], "window"));
  TS_ASSIGN_OR_RETURN(uint32_t scale_bits, Scalar(a[8], "scale"));
  TS_ASSIGN_OR_RETURN(uint32_t flags, Scalar(a[9], "flags"));
  const int64_t kv_dim = h.kv_heads * h.head_dim;
  const bool bf16 = flags & kFlagKvBf16, gate = flags & kFlagOutputGate;
  if (q_stride < (gate ? 2 : 1) * h.head_dim) return InvalidArgument("attention: bad q stride");
  TS_ASSIGN_OR_RETURN(KvView kc, KvView::Of(a[1], kv_dim, bf16, "key cache"));
  TS_ASSIGN_OR_RETURN(KvView vc, KvView::Of(a[2], kv_dim, bf16, "value cache"));
  TS_ASSIGN_OR_RETURN(Descriptor desc, Descriptor::Read(a[3], std::min(kc.blocks(), vc.blocks())));
  const size_t rows = static_cast<size_t>(desc.rows());
  TS_ASSIGN_OR_RETURN(auto q, View<const float>(a[0], rows * q_stride * h.heads, "q"));
  TS_ASSIGN_OR_RETURN(auto out, View<float>(a[4], rows * h.heads * h.head_dim, "attention out"));
  const float scale = AsFloat(scale_bits);
  const int64_t group = h.heads / h.kv_heads;
  std::vector<float> scores;
  for (const Chunk& c : desc.chunks()) {
    for (int64_t i = 0; i < c.n_tokens; ++i) {
      const int64_t pos = c.start_pos + i;
      const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      const size_t row = static_cast<size_t>(c.first_row + i);
      scores.resize(static_cast<size_t>(pos - first + 1));
      for (int64_t hh = 0; hh < h.heads; ++hh) {
        const float* qh = q.data() + row * q_stride * h.heads + hh * q_stride;
        const int64_t kv_off = (hh / group) * h.head_dim;
        float max_score = -INFINITY;
        for (int64_t t = first; t <= pos; ++t) {
          const size_t at = kc.Index(c.table, t) + static_cast<size_t>(kv_off);
          Lanes lanes;
          for (int64_t d = 0; d < h.head_dim; ++d) lanes.Add(d, qh[d] * kc.Read(at + d));
          const float dot = lanes.Sum();
          scores[static_cast<size_t>(t - first)] = dot * scale;
          max_score = std::max(max_score, dot * scale);
        }
        float sum = 0.0f;
        for (float& s : scores) {
          s = std::exp(s - max_score);
          sum += s;
        }
        float* o = out.data() + row * h.heads * h.head_dim + hh * h.head_dim;
        std::fill(o, o + h.head_dim, 0.0f);
        for (int64_t t = first; t <= pos; ++t) {
          const size_t at = vc.Index(c.table, t) + static_cast<size_t>(kv_off);
          const float p = scores[static_cast<size_t>(t - first)] / sum;
          for (int64_t d = 0; d < h.head_dim; ++d) o[d] += p * vc.Read(at + d);
        }
        if (gate) {
          for (int64_t d = 0; d < h.head_dim; ++d)
            o[d] *= 1.0f / (1.0f + std::exp(-qh[h.head_dim + d]));
        }
      }
    }
  }
  return Status::Ok();
}

Status GatedAct(std::span<const KernelArg> a) {
  TS_ASSIGN_OR_RETURN(uint32_t count, Scalar(a[2], "count"));
  TS_ASSIGN_OR_RETURN(uint32_t act, Scalar(a[3], "activation"));
  TS_ASSIGN_OR_RETURN(auto gate, View<float>(a[0], count, "gate"));
  TS_ASSIGN_OR_RETURN(auto up, View<const float>(a[1], count, "up"));
  if (act != kActivationSilu && act != kActivationGeluTanh)
    return InvalidArgument("unknown activation " + std::to_string(act));
  const float c = std::sqrt(2.0f / 3.14159265358979f);
  for (uint32_t i = 0; i < count; ++i) {
    const float g = gate[i];
    const float y = act == kActivationSilu
                        ? g / (1.0f + std::exp(-g))
                        : 0.5f * g * (1.0f + std::tanh(c * (g + 0.044715f * g * g * g)));
    gate[i] = y * up[i];
  }
  return Status::Ok();
}

Status Add(std::span<const KernelArg> a) {
  TS_ASSIGN_OR_RETURN(uint32_t count, Scalar(a[2], "count"));
  TS_ASSIGN_OR_RETURN(auto x, View<float>(a[0], count, "x"));
  TS_ASSIGN_OR_RETURN(auto y, View<const float>(a[1], count, "y"));
  for (uint32_t i = 0; i < count; ++i) x[i] += y[i];
  return Status::Ok();
}

Status KvCopy(std::span<const KernelArg> a) {
  TS_ASSIGN_OR_RETURN(uint32_t from, Scalar(a[2], "from"));
  TS_ASSIGN_OR_RETURN(uint32_t to, Scalar(a[3], "to"));
  TS_ASSIGN_OR_RETURN(uint32_t positions, Scalar(a[4], "positions"));
  TS_ASSIGN_OR_RETURN(uint32_t row, Scalar(a[5], "row floats"));
  TS_ASSIGN_OR_RETURN(uint32_t flags, Scalar(a[6], "flags"));
  for (int i = 0; i < 2; ++i) {
    TS_ASSIGN_OR_RETURN(KvView kv, KvView::Of(a[i], row, flags & kFlagKvBf16, "kv cache"));
    if (from >= kv.blocks() || to >= kv.blocks() || positions > kKvBlockTokens)
      return OutOfRange("kv copy outside the pool");
    kv.CopyRows(static_cast<size_t>(from) * kKvBlockTokens * row,
                static_cast<size_t>(to) * kKvBlockTokens * row, positions);
  }
  return Status::Ok();
}

Status Fence(std::span<const KernelArg> a) {
  TS_ASSIGN_OR_RETURN(auto status, View<uint32_t>(a[0], 1, "fence"));
  TS_ASSIGN_OR_RETURN(uint32_t value, Scalar(a[1], "fence value"));
  status[0] = value;
  return Status::Ok();
}

constexpr FakeKernel kDecoderKernels[kDecoderKernelCount] = {
    {"tessera_rmsnorm", 6, RmsNorm},      {"tessera_matmul_bf16", 8, Matmul},
    {"tessera_qk_rope_kv", 13, QkRopeKv}, {"tessera_attention", 10, Attention},
    {"tessera_gated_act", 4, GatedAct},   {"tessera_add", 3, Add},
    {"tessera_kv_copy", 7, KvCopy},       {"tessera_fence", 2, Fence},
};

}  // namespace

std::span<const FakeKernel> DecoderKernels() {
  return kDecoderKernels;
}

const FakeKernel* FindFakeKernel(std::string_view name) {
  for (const FakeKernel& k : kDecoderKernels)
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace tessera
