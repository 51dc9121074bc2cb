#include "backend/xdna/xdna_backend.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <vector>

#include "backend/kv_block_table.h"
#include "backend/xdna/device.h"
#include "backend/xdna/fake_kernels.h"
#include "backend/xdna/npu_queue.h"
#include "backend/xdna/planner.h"
#include "backend/xdna/xclbin.h"
#include "base/half.h"
#include "model/rope.h"
#include "model/tensor_convert.h"

namespace tessera {
namespace {

std::atomic<int64_t> g_passes{0}, g_chains{0}, g_retries{0}, g_faults{0}, g_queue_refusals{0},
    g_evictions{0};
std::atomic<uint64_t> g_clock{0};
std::atomic<bool> g_device_lost{false};  // orders passes for closing the least recently used model

}  // namespace

Expected<std::shared_ptr<XdnaDevice>> ProcessXdnaDevice(const NpuOptions& options) {
  static std::mutex mu;
  static std::shared_ptr<XdnaDevice> device;
  static std::string chosen;
  std::lock_guard lock(mu);
  if (device) {
    if (options.device != chosen) {
      return InvalidArgument("--npu-device '" + options.device + "': this process already uses '" +
                             chosen + "' (one NPU device per process)");
    }
    return device;
  }
  TS_ASSIGN_OR_RETURN(std::unique_ptr<XdnaDevice> made,
                      options.make_device ? options.make_device() : MakeXdnaDevice());
  device = std::move(made);
  chosen = options.device;
  std::fprintf(stderr, "tessera: NPU device: %s\n", device->description().name.c_str());
  return device;
}

namespace {

// Prompt rows per device pass; longer batches are split (a prompt chunk split in two is
// chunked prefill: the second part attends to the keys the first wrote).
constexpr int64_t kMaxPassRows = 128;

uint32_t Bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

class XdnaBackend;

// Every xdna backend of the process, for closing idle ones when another needs the room. Only
// the holder of the NPU queue's turn touches the device, so the others are idle by then.
struct Residency {
  std::mutex mu;
  std::vector<XdnaBackend*> backends;
};
Residency& Registry() {
  static Residency r;
  return r;
}

class XdnaBackend final : public Backend {
 public:
  explicit XdnaBackend(const BackendOptions& options) : options_(options) {}
  ~XdnaBackend() override {
    {
      std::lock_guard lock(Registry().mu);
      auto& all = Registry().backends;
      all.erase(std::remove(all.begin(), all.end(), this), all.end());
    }
    FreeDevice();
  }

  std::string name() const override {
    if (!device_) return "xdna";
    const DeviceDescription& d = device_->description();
    return std::string(d.fake ? "xdna-fake-" : "xdna-") + std::string(GenerationName(d.generation));
  }

  Status LoadLayers(const Checkpoint& ckpt, LayerRange range, const KvCacheConfig& kv) override {
    if (ckpt.tensors.packed) {
      return Unsupported(ckpt.dir +
                         " is a package packed for the cpu backend; the xdna backend "
                         "reads the source checkpoint (bf16 weights on the NPU)");
    }
    spec_ = ckpt.tensors.spec;
    if (range.begin < 0 || range.end > spec_.layers || range.begin >= range.end) {
      return InvalidArgument("xdna: layer range outside the model");
    }
    for (int64_t i = range.begin; i < range.end; ++i) {
      if (!spec_.layer[static_cast<size_t>(i)].is_attention()) {
        return Unsupported("layer " + std::to_string(i) +
                           " is a gated-deltanet layer, which tessera's NPU program does not "
                           "run; place it on the cpu backend (fewer --npu-layers)");
      }
    }
    if (spec_.heads > 255 || spec_.kv_heads > 255 || spec_.head_dim > 2 * 65535 ||
        spec_.q_proj_rows() / spec_.heads > 65535) {
      return Unsupported("xdna: attention shape outside the decoder program's limits");
    }
    if (kv.pool_blocks() > INT32_MAX) return InvalidArgument("xdna: too many KV blocks");
    range_ = range;
    TS_ASSIGN_OR_RETURN(device_, ProcessXdnaDevice(options_.npu));
    TS_ASSIGN_OR_RETURN(NpuQueue * queue, ProcessNpuQueue(options_.npu));
    auto turn = queue->Wait();  // the device is touched by one model at a time
    if (!turn) return turn.status();

    // The plan, once: every limit of the generation checked, the layers grouped into command
    // chains that stay inside the driver's timeout; refused rather than guessed. Contexts that
    // other models hold are not counted against it: idle models are closed to make room.
    const NpuTarget& target = NpuTargetFor(device_->description().generation);
    PlanOptions plan_options;
    plan_options.max_context = kv.max_seq;
    plan_options.max_batch_rows = kMaxPassRows;
    plan_options.kv_slots = kv.max_slots;
    plan_options.command_timeout_ms = static_cast<double>(chain_timeout_.count());
    auto plan = PlanXdnaLayers(spec_, target, {range.begin, range.size()}, plan_options);
    if (!plan)
      return plan.status().WithContext("xdna plan for layers " + LayerText(0, range.size()));
    if (auto refusal = CheckPlan(*plan, target)) return refusal->status;
    TS_RETURN_IF_ERROR(AssignKernels(*plan, target));
    for (const PlanSubmission& sub : plan->submissions) {
      const int64_t first = sub.first_layer - range.begin;
      chains_.push_back({first, first + sub.layer_count});
    }
    kv_bf16_ = options_.kv_cache == KvCacheType::kBF16;
    max_seq_ = kv.max_seq;
    slots_ = kv.max_slots;
    kv_tables_.Init(kv);

    // Every buffer is described here with its host copy; MakeResident creates them.
    const int64_t R = kMaxPassRows;
    hidden_ = Scratch(R * spec_.hidden * 4, kKernelAdd, 0);
    xn_ = Scratch(R * spec_.hidden * 4, kKernelRmsNorm, 2);
    q_ = Scratch(R * spec_.q_proj_rows() * 4, kKernelMatmul, 3);
    k_ = Scratch(R * spec_.kv_dim * 4, kKernelMatmul, 3);
    v_ = Scratch(R * spec_.kv_dim * 4, kKernelMatmul, 3);
    attn_ = Scratch(R * spec_.q_dim * 4, kKernelAttention, 4);
    proj_ = Scratch(R * spec_.hidden * 4, kKernelMatmul, 3);
    gate_ = Scratch(R * spec_.intermediate * 4, kKernelMatmul, 3);
    up_ = Scratch(R * spec_.intermediate * 4, kKernelMatmul, 3);
    desc_ = Scratch((kDescriptorHeader + R * kDescriptorChunkWords + R * KvBlocksFor(max_seq_)) * 4,
                    kKernelAttention, 3);
    fence_ = Scratch(4, kKernelFence, 0);
    for (const RopeSpec& r : spec_.ropes) {
      const RopeTable table = RopeTable::Build(r, max_seq_);
      const int64_t half = table.half();
      std::vector<float> host(static_cast<size_t>(2 * max_seq_ * half));
      for (int64_t p = 0; p < max_seq_; ++p) {
        std::copy_n(table.cos_at(p), half, host.data() + p * half);
        std::copy_n(table.sin_at(p), half, host.data() + (max_seq_ + p) * half);
      }
      ropes_.push_back(Held(host.data(), host.size() * 4, kKernelQkRopeKv, 5));
    }
    const int64_t kv_bytes = kv.pool_blocks() * kKvBlockTokens * spec_.kv_dim * (kv_bf16_ ? 2 : 4);
    for (int64_t i = range.begin; i < range.end; ++i) {
      const LayerTensors& t = ckpt.tensors.layers[static_cast<size_t>(i)];
      Layer L;
      L.spec = spec_.layer[static_cast<size_t>(i)];
      TS_ASSIGN_OR_RETURN(L.input_norm, F32(t.input_norm, kKernelRmsNorm, 1));
      TS_ASSIGN_OR_RETURN(L.q, Bf16(t.q_proj));
      TS_ASSIGN_OR_RETURN(L.k, Bf16(t.k_proj));
      TS_ASSIGN_OR_RETURN(L.v, Bf16(t.v_proj));
      TS_ASSIGN_OR_RETURN(L.o, Bf16(t.o_proj));
      TS_ASSIGN_OR_RETURN(L.q_bias, F32(t.q_bias, kKernelMatmul, 2));
      TS_ASSIGN_OR_RETURN(L.k_bias, F32(t.k_bias, kKernelMatmul, 2));
      TS_ASSIGN_OR_RETURN(L.v_bias, F32(t.v_bias, kKernelMatmul, 2));
      TS_ASSIGN_OR_RETURN(L.o_bias, F32(t.o_bias, kKernelMatmul, 2));
      TS_ASSIGN_OR_RETURN(L.q_norm, F32(t.q_norm, kKernelQkRopeKv, 3));
      TS_ASSIGN_OR_RETURN(L.k_norm, F32(t.k_norm, kKernelQkRopeKv, 4));
      TS_ASSIGN_OR_RETURN(L.attn_out_norm, F32(t.attn_out_norm, kKernelRmsNorm, 1));
      TS_ASSIGN_OR_RETURN(L.post_attn_norm, F32(t.post_attn_norm, kKernelRmsNorm, 1));
      TS_ASSIGN_OR_RETURN(L.gate, Bf16(t.gate_proj));
      TS_ASSIGN_OR_RETURN(L.up, Bf16(t.up_proj));
      TS_ASSIGN_OR_RETURN(L.down, Bf16(t.down_proj));
      TS_ASSIGN_OR_RETURN(L.mlp_out_norm, F32(t.mlp_out_norm, kKernelRmsNorm, 1));
      L.kcache = Cache(kv_bytes);
      L.vcache = Cache(kv_bytes);
      layers_.push_back(L);
    }
    {
      std::lock_guard lock(Registry().mu);
      Registry().backends.push_back(this);
    }
    TS_RETURN_IF_ERROR(MakeResident());
    std::fprintf(stderr, "tessera: %s plan:\n%s\n", name().c_str(), DescribePlan(*plan).c_str());
    std::fprintf(stderr,
                 "tessera: %s: layers %lld-%lld in %zu command chains, %zu programs, %.1f MiB of "
                 "device buffers, weights bf16\n",
                 name().c_str(), static_cast<long long>(range.begin),
                 static_cast<long long>(range.end - 1), chains_.size(), programs_.size(),
                 static_cast<double>(DeviceBytes()) / (1 << 20));
    return Status::Ok();
  }

  Status LoadHead(const Checkpoint&) override {
    return Unsupported(
        "the xdna backend does not run the LM head; end the placement with a cpu stage (e.g. "
        "xdna:12,cpu, or xdna:100%,cpu for every layer on the NPU and the head on the CPU)");
  }
  Status ComputeLogits(std::span<const float>, int64_t, std::span<float>, LogitRows) override {
    return Internal("xdna backend: no LM head");
  }
  Status FinalNorm(std::span<const float>, int64_t, std::span<float>) override {
    return Internal("xdna backend: no final norm");
  }

  Status ForwardLayers(const ForwardBatch& batch, std::span<float> hidden) override {
    if (layers_.empty()) return Internal("xdna backend: no layers loaded");
    if (hidden.size() != static_cast<size_t>(batch.total_tokens() * spec_.hidden)) {
      return Internal("xdna backend: hidden buffer does not match the batch");
    }
    for (const SequenceChunk& c : batch.chunks) {
      if (c.slot < 0 || c.slot >= slots_) return OutOfRange("KV slot out of range");
      if (c.start_pos < 0 || c.n_tokens <= 0 || c.start_pos + c.n_tokens > max_seq_) {
        return OutOfRange("position " + std::to_string(c.start_pos + c.n_tokens) +
                          " is past the KV cache capacity of " + std::to_string(max_seq_));
      }
    }
    TS_ASSIGN_OR_RETURN(NpuQueue * queue, ProcessNpuQueue(options_.npu));
    auto turn = queue->Wait();
    if (!turn) {
      ++g_queue_refusals;
      return turn.status();
    }
    TS_RETURN_IF_ERROR(MakeResident());
    ++g_passes;
    last_used_ = ++g_clock;
    // Split the batch into passes of at most kMaxPassRows rows, in order.
    pass_.clear();
    int64_t rows = 0;
    float* at = hidden.data();
    for (const SequenceChunk& c : batch.chunks) {
      for (int64_t done = 0; done < c.n_tokens;) {
        const int64_t n = std::min(c.n_tokens - done, kMaxPassRows - rows);
        SequenceChunk piece = c;
        piece.start_pos = c.start_pos + done;
        piece.n_tokens = n;
        pass_.push_back(piece);
        rows += n;
        done += n;
        if (rows == kMaxPassRows) {
          TS_RETURN_IF_ERROR(RunPass(rows, at));
          at += rows * spec_.hidden;
          rows = 0;
          pass_.clear();
        }
      }
    }
    if (rows > 0) TS_RETURN_IF_ERROR(RunPass(rows, at));
    return Status::Ok();
  }

  Status CopySlotState(int from, int to, int64_t positions, int64_t source_positions) override {
    if (from < 0 || from >= slots_ || to < 0 || to >= slots_ || from == to || positions < 0 ||
        positions > source_positions || source_positions > max_seq_) {
      return InvalidArgument("xdna backend: bad sequence copy");
    }
    return Status::Ok();  // every position of every layer is in the block pool
  }
  Status KeepSlotState(int, int64_t, int) override { return Status::Ok(); }
  Status RestoreSlotState(int, int, int64_t) override { return Status::Ok(); }

  Status CopyKvBlock(int32_t from, int32_t to, int64_t positions) override {
    TS_RETURN_IF_ERROR(kv_tables_.CheckBlockCopy(from, to, positions));
    if (from == to) return Status::Ok();
    TS_ASSIGN_OR_RETURN(NpuQueue * queue, ProcessNpuQueue(options_.npu));
    auto turn = queue->Wait();
    if (!turn) return turn.status();
    TS_RETURN_IF_ERROR(MakeResident());
    runs_.clear();
    for (const Layer& L : layers_) {
      Push(kKernelKvCopy, {B(L.kcache), B(L.vcache), S(from), S(to), S(positions), S(spec_.kv_dim),
                           S(kv_bf16_ ? kFlagKvBf16 : 0)});
    }
    return RunChecked(0, static_cast<int64_t>(layers_.size()), /*reload=*/nullptr);
  }

  size_t resident_weight_bytes() const override { return weight_bytes_; }

  // Closes this model's programs and frees its device buffers, keeping what they hold (the KV
  // cache is read back first) so that its next pass reopens it as it was. Called by another
  // model holding the NPU turn.
  Status Evict() {
    if (!resident_) return Status::Ok();
    for (HostBuffer& b : bufs_) {
      if (b.readback && b.id >= 0) {
        TS_RETURN_IF_ERROR(device_->Sync(b.id, SyncDirection::kFromDevice));
        const std::span<uint8_t> m = device_->Map(b.id);
        b.host.assign(m.begin(), m.end());
      }
    }
    FreeDevice();
    ++g_evictions;
    std::fprintf(stderr,
                 "tessera: %s: layers %s closed on the NPU to make room (reopened on "
                 "their next pass)\n",
                 name().c_str(), LayerText(0, range_.size()).c_str());
    return Status::Ok();
  }
  bool resident() const { return resident_; }
  uint64_t last_used() const { return last_used_; }

 private:
  // A device buffer and the host's copy of what it must hold when (re)created: weights and
  // tables always, the KV cache after an eviction; empty for scratch.
  struct HostBuffer {
    size_t bytes = 0;
    int kernel = 0, arg = 0;  // the argument it is allocated for (device.h)
    std::vector<uint8_t> host;
    bool readback = false;  // KV: read back from the device before the buffer is freed
    BufferId id = -1;
  };
  using Buf = int;  // index into bufs_; -1: absent
  struct Layer {
    LayerSpec spec;
    Buf input_norm = -1, q = -1, k = -1, v = -1, o = -1;
    Buf q_bias = -1, k_bias = -1, v_bias = -1, o_bias = -1, q_norm = -1, k_norm = -1;
    Buf attn_out_norm = -1, post_attn_norm = -1, gate = -1, up = -1, down = -1;
    Buf mlp_out_norm = -1, kcache = -1, vcache = -1;
  };
  struct Chain {
    int64_t first, end;  // layer indices into layers_
  };
  // One hardware context: an xclbin of the plan with the decoder kernels of its family.
  struct Program {
    std::string xclbin;
    std::vector<int> kernels;  // DecoderKernel values, in the program's kernel order
    int columns = 0;
    ProgramId id = -1;
  };

  // The program of the plan's xclbin `name`, added on first use.
  std::vector<Program>::iterator ProgramFor(const std::string& name, const XdnaPlan& plan,
                                            const NpuTarget& target) {
    auto it = std::find_if(programs_.begin(), programs_.end(),
                           [&](const Program& p) { return p.xclbin == name; });
    if (it != programs_.end()) return it;
    Program p;
    p.xclbin = name;
    p.columns = target.columns;
    for (const NpuXclbin& px : plan.xclbins)
      if (px.name == name) p.columns = px.columns;
    return programs_.insert(programs_.end(), p);
  }

  // Which of the plan's xclbins runs each decoder kernel: the one the plan gives the op the
  // kernel computes (matmuls: the decode program's family; the fence and the KV copy go with the
  // vector kernels).
  Status AssignKernels(const XdnaPlan& plan, const NpuTarget& target) {
    auto family = [&](NpuOpKind kind) -> std::string {
      for (const LayerPlan& l : plan.layers)
        for (const PlannedOp& op : l.ops)
          if (op.kind == kind && !op.decode_programs.empty())
            return plan.programs[static_cast<size_t>(op.decode_programs[0])].xclbin;
      return "";
    };
    const std::pair<DecoderKernel, NpuOpKind> uses[] = {
        {kKernelRmsNorm, NpuOpKind::kRmsNorm},
        {kKernelMatmul, NpuOpKind::kMatmul},
        {kKernelQkRopeKv, NpuOpKind::kQkNormRopeKvWrite},
        {kKernelAttention, NpuOpKind::kAttention},
        {kKernelGatedAct, NpuOpKind::kGatedActivation},
        {kKernelAdd, NpuOpKind::kResidualAdd},
        {kKernelKvCopy, NpuOpKind::kResidualAdd},
        {kKernelFence, NpuOpKind::kResidualAdd}};
    for (const auto& [kernel, op] : uses) {
      const std::string x = family(op);
      if (x.empty()) return Internal("xdna: the plan has no program for a decoder kernel");
      auto it = ProgramFor(x, plan, target);
      placed_[kernel] = {static_cast<int>(it - programs_.begin()),
                         static_cast<int>(it->kernels.size())};
      it->kernels.push_back(kernel);
    }
    // Prompt rows go through the plan's prefill (gemm) program when it has one.
    for (const LayerPlan& l : plan.layers) {
      for (const PlannedOp& op : l.ops) {
        if (op.kind != NpuOpKind::kMatmul || op.prefill_programs.empty()) continue;
        const std::string& x = plan.programs[static_cast<size_t>(op.prefill_programs[0])].xclbin;
        auto it = ProgramFor(x, plan, target);
        if (std::find(it->kernels.begin(), it->kernels.end(), kKernelMatmul) == it->kernels.end()) {
          prefill_matmul_ = {static_cast<int>(it - programs_.begin()),
                             static_cast<int>(it->kernels.size())};
          it->kernels.push_back(kKernelMatmul);
        }
        return Status::Ok();
      }
    }
    return Status::Ok();
  }

  Buf Add(HostBuffer b) {
    bufs_.push_back(std::move(b));
    return static_cast<Buf>(bufs_.size() - 1);
  }
  Buf Scratch(int64_t bytes, int kernel, int arg) {
    return Add({static_cast<size_t>(bytes), kernel, arg, {}, false, -1});
  }
  Buf Held(const void* data, size_t bytes, int kernel, int arg) {
    HostBuffer b{bytes, kernel, arg, {}, false, -1};
    b.host.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
    return Add(std::move(b));
  }
  Buf Cache(int64_t bytes) {
    return Add({static_cast<size_t>(bytes), kKernelQkRopeKv, 7, {}, true, -1});
  }
  // An optional fp32 tensor (norms, biases); -1 when the model has none.
  Expected<Buf> F32(const TensorRef& t, int kernel, int arg) {
    if (!t) return Buf{-1};
    TS_RETURN_IF_ERROR(WidenToF32(t, &scratch_));
    weight_bytes_ += scratch_.size() * sizeof(float);
    return Held(scratch_.data(), scratch_.size() * 4, kernel, arg);
  }
  // A matrix, rounded to bf16 once (the NPU's weight format).
  Expected<Buf> Bf16(const TensorRef& t) {
    if (!t) return Internal("xdna: a projection the layer needs is missing");
    TS_RETURN_IF_ERROR(WidenToF32(t, &scratch_));
    std::vector<uint16_t> bf(scratch_.size());
    for (size_t i = 0; i < bf.size(); ++i) bf[i] = FloatToBf16(scratch_[i]);
    weight_bytes_ += bf.size() * 2;
    return Held(bf.data(), bf.size() * 2, kKernelMatmul, 1);
  }
  size_t DeviceBytes() const {
    size_t n = 0;
    for (const HostBuffer& b : bufs_) n += b.bytes;
    return n;
  }

  // Opens the programs and creates every buffer from its host copy, closing idle models
  // (least recently used first) while the device has no room. The caller holds the NPU turn.
  Status MakeResident() {
    if (resident_) return Status::Ok();
    while (true) {
      Status st = OpenAll();
      if (st.ok()) return Status::Ok();
      FreeDevice();
      if (st.code() != ErrorCode::kResourceExhausted || !EvictOne()) {
        return ResourceExhausted(
            "the NPU cannot hold " + name() + " layers " + LayerText(0, range_.size()) + " (" +
            std::to_string(DeviceBytes() >> 20) + " MiB, " + std::to_string(programs_.size()) +
            " hardware contexts) even with every idle model closed: " + st.message());
      }
    }
  }
  Status OpenAll() {
    for (Program& p : programs_) {
      NpuProgram np;
      np.name = "tessera." + p.xclbin;
      XclbinSpec x;
      x.column_width = static_cast<uint16_t>(p.columns);
      np.xclbin = BuildXclbin(x);  // the container the device validates
      for (int k : p.kernels)
        np.kernels.push_back({std::string(DecoderKernels()[static_cast<size_t>(k)].name), {}});
      TS_ASSIGN_OR_RETURN(p.id, device_->OpenProgram(np));
    }
    for (HostBuffer& b : bufs_) {
      const auto [program, slot] = placed_[b.kernel];
      TS_ASSIGN_OR_RETURN(
          b.id, device_->AllocateBuffer(b.bytes, BufferKind::kData,
                                        programs_[static_cast<size_t>(program)].id, slot, b.arg));
      if (!b.host.empty()) {
        std::memcpy(device_->Map(b.id).data(), b.host.data(), b.bytes);
        TS_RETURN_IF_ERROR(device_->Sync(b.id, SyncDirection::kToDevice));
        if (b.readback) b.host = {};  // the device holds the KV cache again
      }
    }
    resident_ = true;
    return Status::Ok();
  }
  // Frees what this model holds on the device (its host copies stay).
  void FreeDevice() {
    if (!device_) return;
    for (HostBuffer& b : bufs_) {
      if (b.id >= 0) (void)device_->FreeBuffer(b.id);
      b.id = -1;
    }
    for (Program& p : programs_) {
      if (p.id >= 0) (void)device_->CloseProgram(p.id);
      p.id = -1;
    }
    resident_ = false;
  }
  // Closes the least recently used other resident model; false when there is none.
  bool EvictOne() {
    std::lock_guard lock(Registry().mu);
    XdnaBackend* victim = nullptr;
    for (XdnaBackend* b : Registry().backends) {
      if (b != this && b->resident() && (!victim || b->last_used() < victim->last_used()))
        victim = b;
    }
    if (victim == nullptr) return false;
    if (Status st = victim->Evict(); !st.ok()) {
      std::fprintf(stderr, "tessera: closing an idle NPU model: %s\n", st.message().c_str());
      victim->FreeDevice();
    }
    return true;
  }

  BufferId Id(Buf b) const { return bufs_[static_cast<size_t>(b)].id; }
  RunArg B(Buf b) const { return RunArg::Buffer(Id(b)); }
  static RunArg S(int64_t v) { return RunArg::Scalar(static_cast<uint32_t>(v)); }
  static RunArg F(double v) { return RunArg::Scalar(Bits(static_cast<float>(v))); }
  void Push(DecoderKernel kernel, std::vector<RunArg> args) {
    const auto [program, slot] = placed_[kernel];
    runs_.push_back({programs_[static_cast<size_t>(program)].id, slot, std::move(args)});
  }

  void Matmul(Buf x, Buf w, Buf bias, Buf y, int64_t rows, int64_t n, int64_t k) {
    Push(kKernelMatmul,
         {B(x), B(w), B(bias >= 0 ? bias : x), B(y), S(rows), S(n), S(k), S(bias >= 0 ? 1 : 0)});
    if (rows > 1 && prefill_matmul_.first >= 0) {  // the gemm program's kernel
      runs_.back().program = programs_[static_cast<size_t>(prefill_matmul_.first)].id;
      runs_.back().kernel = prefill_matmul_.second;
    }
  }
  void Norm(Buf x, Buf w, Buf y, int64_t rows, int64_t n) {
    Push(kKernelRmsNorm, {B(x), B(w), B(y), S(rows), S(n), F(spec_.eps)});
  }
  void Residual(Buf x, Buf y, int64_t count) { Push(kKernelAdd, {B(x), B(y), S(count)}); }

  // The runs of one layer over `rows` rows.
  void LayerRuns(const Layer& L, int64_t rows) {
    const ModelSpec& d = spec_;
    const int64_t q_stride = d.output_gate ? 2 * d.head_dim : d.head_dim;
    Norm(hidden_, L.input_norm, xn_, rows, d.hidden);
    Matmul(xn_, L.q, L.q_bias, q_, rows, d.q_proj_rows(), d.hidden);
    Matmul(xn_, L.k, L.k_bias, k_, rows, d.kv_dim, d.hidden);
    Matmul(xn_, L.v, L.v_bias, v_, rows, d.kv_dim, d.hidden);
    const uint32_t heads = PackHeads(d.heads, d.kv_heads, d.head_dim);
    const uint32_t kv_flag = kv_bf16_ ? kFlagKvBf16 : 0;
    const RopeSpec& rope = d.ropes[static_cast<size_t>(L.spec.rope)];
    Push(kKernelQkRopeKv,
         {B(q_), B(k_), B(v_), B(L.q_norm >= 0 ? L.q_norm : q_), B(L.k_norm >= 0 ? L.k_norm : k_),
          B(ropes_[static_cast<size_t>(L.spec.rope)]), B(desc_), B(L.kcache), B(L.vcache),
          RunArg::Scalar(heads), S(rope.rotary_dim | q_stride << 16),
          S((d.qk_norm ? kFlagQkNorm : 0) | kv_flag), F(d.eps)});
    Push(kKernelAttention,
         {B(q_), B(L.kcache), B(L.vcache), B(desc_), B(attn_), RunArg::Scalar(heads), S(q_stride),
          S(L.spec.window), F(d.attention_scale),
          S((d.output_gate ? kFlagOutputGate : 0) | kv_flag)});
    Matmul(attn_, L.o, L.o_bias, proj_, rows, d.hidden, d.q_dim);
    if (L.attn_out_norm >= 0) Norm(proj_, L.attn_out_norm, proj_, rows, d.hidden);
    Residual(hidden_, proj_, rows * d.hidden);
    Norm(hidden_, L.post_attn_norm, xn_, rows, d.hidden);
    Matmul(xn_, L.gate, -1, gate_, rows, d.intermediate, d.hidden);
    Matmul(xn_, L.up, -1, up_, rows, d.intermediate, d.hidden);
    Push(kKernelGatedAct,
         {B(gate_), B(up_), S(rows * d.intermediate),
          S(d.activation == Activation::kGeluTanh ? kActivationGeluTanh : kActivationSilu)});
    Matmul(gate_, L.down, -1, proj_, rows, d.hidden, d.intermediate);
    if (L.mlp_out_norm >= 0) Norm(proj_, L.mlp_out_norm, proj_, rows, d.hidden);
    Residual(hidden_, proj_, rows * d.hidden);
  }

  // Writes the pass's batch descriptor (kernels read block tables from it).
  Status WriteDescriptor(int64_t rows) {
    std::span<uint8_t> bytes = device_->Map(Id(desc_));
    int32_t* w = reinterpret_cast<int32_t*>(bytes.data());
    const size_t capacity = bytes.size() / 4;
    w[0] = static_cast<int32_t>(pass_.size());
    w[1] = static_cast<int32_t>(rows);
    size_t tables = kDescriptorHeader + pass_.size() * kDescriptorChunkWords;
    int64_t first_row = 0;
    for (size_t i = 0; i < pass_.size(); ++i) {
      const SequenceChunk& c = pass_[i];
      TS_ASSIGN_OR_RETURN(const int32_t* table, kv_tables_.For(c));
      const int64_t blocks = KvBlocksFor(c.start_pos + c.n_tokens);
      if (tables + static_cast<size_t>(blocks) > capacity) return Internal("xdna: descriptor full");
      int32_t* cw = w + kDescriptorHeader + i * kDescriptorChunkWords;
      cw[0] = static_cast<int32_t>(c.start_pos);
      cw[1] = static_cast<int32_t>(c.n_tokens);
      cw[2] = static_cast<int32_t>(first_row);
      cw[3] = static_cast<int32_t>(tables);
      cw[4] = static_cast<int32_t>(blocks);
      std::copy_n(table, blocks, w + tables);
      tables += static_cast<size_t>(blocks);
      first_row += c.n_tokens;
    }
    return device_->Sync(Id(desc_), SyncDirection::kToDevice, 0, tables * 4);
  }

  // One pass: rows [rows, hidden] at `x` through every chain of layers, in place.
  Status RunPass(int64_t rows, float* x) {
    TS_RETURN_IF_ERROR(WriteDescriptor(rows));
    const size_t bytes = static_cast<size_t>(rows * spec_.hidden) * sizeof(float);
    const BufferId hidden = Id(hidden_);
    for (const Chain& chain : chains_) {
      runs_.clear();
      for (int64_t l = chain.first; l < chain.end; ++l)
        LayerRuns(layers_[static_cast<size_t>(l)], rows);
      // The chain's input is the host's copy: a retried chain starts from it again.
      auto upload = [&]() -> Status {
        std::memcpy(device_->Map(hidden).data(), x, bytes);
        return device_->Sync(hidden, SyncDirection::kToDevice, 0, bytes);
      };
      TS_RETURN_IF_ERROR(RunChecked(chain.first, chain.end, upload));
      TS_RETURN_IF_ERROR(device_->Sync(hidden, SyncDirection::kFromDevice, 0, bytes));
      std::memcpy(x, device_->Map(hidden).data(), bytes);
    }
    return Status::Ok();
  }

  // Runs runs_ plus a fence as one chain, again from the start after a fault.
  // `reload` (may be empty) puts the chain's input back on the device before each attempt.
  Status RunChecked(int64_t first, int64_t end, const std::function<Status()>& reload) {
    const size_t body = runs_.size();
    std::string last;
    for (int attempt = 0; attempt < kMaxChainAttempts; ++attempt) {
      if (reload) TS_RETURN_IF_ERROR(reload());
      const uint32_t token = ++fence_value_;
      runs_.resize(body);
      Push(kKernelFence, {B(fence_), RunArg::Scalar(token)});
      ++g_chains;
      if (attempt > 0) ++g_retries;
      TS_ASSIGN_OR_RETURN(ChainResult r, device_->RunChain(runs_, chain_timeout_));
      if (r.state == RunState::kDeviceLost) {
        g_device_lost = true;
        return DeviceLost("the NPU was lost running layers " + LayerText(first, end) + ": " +
                          r.detail + "; restart tessera once `tessera doctor` passes");
      }
      if (r.state == RunState::kCompleted) {
        TS_RETURN_IF_ERROR(device_->Sync(Id(fence_), SyncDirection::kFromDevice));
        uint32_t seen = 0;
        std::memcpy(&seen, device_->Map(Id(fence_)).data(), 4);
        if (seen == token) return Status::Ok();
        last = "the chain reported completion but its fence was not written (nothing ran)";
      } else {
        last = std::string(RunStateName(r.state)) + ": " + r.detail;
      }
      ++g_faults;
      std::fprintf(stderr,
                   "tessera: %s: layers %s: %s; running the chain again (attempt %d of %d)\n",
                   name().c_str(), LayerText(first, end).c_str(), last.c_str(), attempt + 2,
                   kMaxChainAttempts);
    }
    return DeadlineExceeded("the NPU failed layers " + LayerText(first, end) + " " +
                            std::to_string(kMaxChainAttempts) + " times: " + last);
  }
  std::string LayerText(int64_t first, int64_t end) const {
    return std::to_string(range_.begin + first) + "-" + std::to_string(range_.begin + end - 1);
  }

  BackendOptions options_;
  ModelSpec spec_;
  LayerRange range_;
  std::shared_ptr<XdnaDevice> device_;
  std::vector<Program> programs_;
  std::pair<int, int> placed_[kDecoderKernelCount] = {};  // kernel -> {program, its slot}
  std::pair<int, int> prefill_matmul_ = {-1, -1};         // the gemm program's matmul
  bool resident_ = false;
  uint64_t last_used_ = 0;
  bool kv_bf16_ = false;
  int64_t max_seq_ = 0;
  int slots_ = 0;
  KvBlockTables kv_tables_;
  std::vector<HostBuffer> bufs_;
  std::vector<Layer> layers_;
  std::vector<Chain> chains_;
  std::vector<Buf> ropes_;
  Buf hidden_ = -1, xn_ = -1, q_ = -1, k_ = -1, v_ = -1, attn_ = -1, proj_ = -1;
  Buf gate_ = -1, up_ = -1, desc_ = -1, fence_ = -1;
  size_t weight_bytes_ = 0;
  uint32_t fence_value_ = 0;
  std::chrono::milliseconds chain_timeout_{2000};
  std::vector<SequenceChunk> pass_;
  std::vector<Run> runs_;
  std::vector<float> scratch_;
};

}  // namespace

Expected<std::unique_ptr<Backend>> MakeXdnaBackend(const BackendOptions& options) {
  // The decoder program's weights are bf16 whatever --dtype asks of the cpu stages; the load
  // log says so.
  return std::unique_ptr<Backend>(std::make_unique<XdnaBackend>(options));
}

XdnaCounters ReadXdnaCounters() {
  return {g_passes.load(),         g_chains.load(),    g_retries.load(),    g_faults.load(),
          g_queue_refusals.load(), g_evictions.load(), g_device_lost.load()};
}

}  // namespace tessera
