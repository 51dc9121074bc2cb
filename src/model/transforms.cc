#include "model/transforms.h"

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "base/half.h"
#include "format/dtype.h"

namespace tessera {
namespace {

// A checkpoint view: the source (kept alive, its mapped tensors still referenced) plus the
// tensors the transform wrote. Handed out through the aliasing shared_ptr constructor, so the
// caller sees a plain Checkpoint whose lifetime keeps all of this.
struct TransformedCheckpoint {
  std::shared_ptr<const Checkpoint> source;
  std::deque<std::vector<uint8_t>> buffers;  // deques: addresses stay put as they grow
  std::deque<TensorInfo> infos;
  Checkpoint checkpoint;

  const TensorInfo* AddTensor(TensorInfo info, std::vector<uint8_t> bytes) {
    buffers.push_back(std::move(bytes));
    info.data = std::span<const uint8_t>(buffers.back());
    infos.push_back(std::move(info));
    return &infos.back();
  }
};

std::shared_ptr<TransformedCheckpoint> StartView(std::shared_ptr<const Checkpoint> source) {
  auto view = std::make_shared<TransformedCheckpoint>();
  const Checkpoint& src = *source;
  view->checkpoint.dir = src.dir;
  view->checkpoint.config = src.config;
  view->checkpoint.generation = src.generation;
  view->checkpoint.has_generation_config = src.has_generation_config;
  view->checkpoint.tensors = src.tensors;  // refs into the source's files, rebound as needed
  view->source = std::move(source);
  return view;
}

std::shared_ptr<const Checkpoint> Finish(std::shared_ptr<TransformedCheckpoint> view) {
  const Checkpoint* ckpt = &view->checkpoint;
  return std::shared_ptr<const Checkpoint>(std::move(view), ckpt);
}

int64_t AttentionLayers(const ModelSpec& spec) {
  return spec.count(LayerKind::kAttention) + spec.count(LayerKind::kSlidingAttention);
}

// The tensor with each of its `groups` leading blocks (a KV head's rows) repeated `repeat`
// times in place: blocks g0 g0 g1 g1 ... for repeat 2. Folds are kept.
Expected<TensorRef> RepeatGroups(const TensorRef& ref, int64_t groups, int64_t repeat,
                                 TransformedCheckpoint& view) {
  const TensorInfo& t = *ref.info;
  const size_t total = t.data.size();
  if (t.shape.empty() || t.shape[0] % groups != 0 || total % static_cast<size_t>(groups) != 0 ||
      total != t.num_elements * DTypeSize(t.dtype)) {
    return Internal("tensor '" + t.name + "' does not split into " + std::to_string(groups) +
                    " KV heads");
  }
  const size_t block = total / static_cast<size_t>(groups);
  std::vector<uint8_t> bytes(total * static_cast<size_t>(repeat));
  uint8_t* out = bytes.data();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* head = t.data.data() + static_cast<size_t>(g) * block;
    for (int64_t r = 0; r < repeat; ++r, out += block) std::memcpy(out, head, block);
  }
  TensorInfo info;
  info.name = t.name;
  info.dtype = t.dtype;
  info.shape = t.shape;
  info.shape[0] *= repeat;
  info.num_elements = t.num_elements * static_cast<uint64_t>(repeat);
  info.file = t.file + " (KV heads repeated x" + std::to_string(repeat) + " in memory)";
  return TensorRef{view.AddTensor(std::move(info), std::move(bytes)), ref.offset, ref.scale};
}

// head_dim ones in `dtype`: 1 is exact in each weight dtype.
Expected<std::vector<uint8_t>> UnitWeights(DType dtype, int64_t n) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * DTypeSize(dtype));
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* at = bytes.data() + static_cast<size_t>(i) * DTypeSize(dtype);
    if (dtype == DType::kF32) {
      const float one = 1.0f;
      std::memcpy(at, &one, sizeof one);
    } else if (dtype == DType::kBF16 || dtype == DType::kF16) {
      const uint16_t one = dtype == DType::kBF16 ? FloatToBf16(1.0f) : FloatToF16(1.0f);
      std::memcpy(at, &one, sizeof one);
    } else {
      return Internal("no unit norm weights in dtype " + std::string(DTypeName(dtype)));
    }
  }
  return bytes;
}

}  // namespace

Expected<std::shared_ptr<const Checkpoint>> ReplicateKvHeads(std::shared_ptr<const Checkpoint> ckpt,
                                                             int64_t target_kv_heads) {
  if (!ckpt) return InvalidArgument("ReplicateKvHeads: no checkpoint");
  const ModelSpec& spec = ckpt->tensors.spec;
  const std::string what = "cannot replicate " + std::to_string(spec.kv_heads) + " KV heads to " +
                           std::to_string(target_kv_heads) + " (" + std::to_string(spec.heads) +
                           " query heads): ";
  if (ckpt->tensors.packed) {
    return InvalidArgument(what + ckpt->dir + " is a package of weights packed for the " +
                           ckpt->tensors.packed->layout +
                           " layout; replicate KV heads from the source checkpoint");
  }
  if (AttentionLayers(spec) == 0)
    return InvalidArgument(what + "the model has no attention layers");
  if (spec.kv_heads <= 0 || target_kv_heads <= 0 || target_kv_heads % spec.kv_heads != 0) {
    return InvalidArgument(what + "the target must be a positive multiple of " +
                           std::to_string(spec.kv_heads));
  }
  if (spec.heads % target_kv_heads != 0) {
    return InvalidArgument(what + "the target must divide the " + std::to_string(spec.heads) +
                           " query heads");
  }
  const int64_t repeat = target_kv_heads / spec.kv_heads;
  auto view = StartView(ckpt);
  ModelTensors& tensors = view->checkpoint.tensors;
  for (size_t i = 0; i < tensors.layers.size(); ++i) {
    if (!spec.layer[i].is_attention()) continue;
    LayerTensors& L = tensors.layers[i];
    if (!L.k_proj || !L.v_proj) {
      return Internal("layer " + std::to_string(i) + " has no k_proj/v_proj bound");
    }
    for (TensorRef* ref : {&L.k_proj, &L.v_proj, &L.k_bias, &L.v_bias}) {
      if (!*ref) continue;  // biases only where the family has them
      TS_ASSIGN_OR_RETURN(*ref, RepeatGroups(*ref, spec.kv_heads, repeat, *view));
    }
  }
  tensors.spec.kv_heads = target_kv_heads;
  tensors.spec.kv_dim = target_kv_heads * spec.head_dim;
  view->checkpoint.config.num_kv_heads = target_kv_heads;
  return Finish(std::move(view));
}

Expected<std::shared_ptr<const Checkpoint>> InjectIdentityQkNorm(
    std::shared_ptr<const Checkpoint> ckpt) {
  if (!ckpt) return InvalidArgument("InjectIdentityQkNorm: no checkpoint");
  const ModelSpec& spec = ckpt->tensors.spec;
  if (spec.qk_norm || spec.qk_norm_identity) {
    return InvalidArgument("cannot inject identity q/k norms: " + ckpt->dir + " already has " +
                           (spec.qk_norm ? "q_norm/k_norm" : "injected q/k norms"));
  }
  if (AttentionLayers(spec) == 0) {
    return InvalidArgument("cannot inject identity q/k norms: " + ckpt->dir +
                           " has no attention layers");
  }
  if (!ckpt->tensors.final_norm) return Internal("checkpoint has no final norm bound");
  // The dtype of the model's own norms, as a checkpoint that had q/k norms would hold them.
  const DType dtype = ckpt->tensors.final_norm->dtype;
  TS_ASSIGN_OR_RETURN(std::vector<uint8_t> ones, UnitWeights(dtype, spec.head_dim));
  auto view = StartView(ckpt);
  ModelTensors& tensors = view->checkpoint.tensors;
  const std::string& root = view->checkpoint.config.tensor_prefix;
  for (size_t i = 0; i < tensors.layers.size(); ++i) {
    if (!spec.layer[i].is_attention()) continue;
    LayerTensors& L = tensors.layers[i];
    for (auto [ref, name] : {std::pair{&L.q_norm, "q_norm"}, std::pair{&L.k_norm, "k_norm"}}) {
      TensorInfo info;
      info.name = root + "layers." + std::to_string(i) + ".self_attn." + name + ".weight";
      info.dtype = dtype;
      info.shape = {spec.head_dim};
      info.num_elements = static_cast<uint64_t>(spec.head_dim);
      info.file = "(identity q/k norm injected in memory)";
      *ref = TensorRef{view->AddTensor(std::move(info), ones)};
    }
  }
  tensors.spec.qk_norm_identity = true;  // qk_norm stays false: see transforms.h
  return Finish(std::move(view));
}

}  // namespace tessera
