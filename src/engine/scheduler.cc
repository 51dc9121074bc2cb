#include "engine/scheduler.h"

#include <algorithm>

#include "sampling/sampler.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int64_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b, int64_t limit) {
  const int64_t n =
      std::min({static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size()), limit});
  int64_t i = 0;
  while (i < n && a[static_cast<size_t>(i)] == b[static_cast<size_t>(i)]) ++i;
  return i;
}

}  // namespace

struct Scheduler::Sequence {
  uint64_t id = 0;
  SequenceRequest req;
  std::optional<Sampler> sampler;
  int64_t prompt_len = 0;
  // The prompt, then every generated token: positions [0, pos) are in the cache, tokens[pos..]
  // run next (the last generated token, or what remains of the prompt).
  std::vector<int32_t> tokens;
  int64_t pos = 0;
  // Where the run from pos ends: the prompt's end while the prompt runs, else the tokens'.
  // A resumed (preempted) sequence thus replays the tokens it generated as decode rows, one
  // per step, with the arithmetic they first ran with (prompt rows may round differently), so
  // preemption changes none of its results.
  int64_t RunEnd() const {
    return pos < prompt_len ? prompt_len : static_cast<int64_t>(tokens.size());
  }
  // Runs as a one-token input (a decode row): a generated token, or a lone prompt token.
  bool RunsOneToken() const { return pos >= prompt_len || RunEnd() - pos == 1; }
  std::vector<int32_t> blocks;  // block table: positions [i * B, i * B + B) in blocks[i]
  int64_t registered = 0;       // leading full blocks already offered to the prefix cache
  bool cancelled = false;
  bool admitted_once = false;
  // On a model whose slot state is recurrent: block boundaries where a prompt chunk ends and
  // the state is kept, so the next prompt with that beginning resumes from it on any slot.
  // They are where this prompt branches off a cached prefix it could not resume from, and
  // the request's keep_state_at; ascending. `block` is the cached block ending there (-1: the
  // sequence's own, registered by then).
  struct Cut {
    int64_t pos = 0;
    int32_t block = -1;
    uint32_t generation = 0;
  };
  std::vector<Cut> cuts;
  Clock::time_point submitted, admitted, first_token;
  SequenceResult result;
};

Scheduler::Scheduler(ModelExecutor& exec, Options options)
    : exec_(exec),
      options_(options),
      slots_(static_cast<size_t>(exec.max_slots())),
      pool_(exec.kv_blocks(), kKvBlockTokens),
      kept_(static_cast<size_t>(exec.kept_states())) {
  // Room for every slot's decode token plus one chunk.
  const int64_t room = exec.max_batch_tokens() - exec.max_slots();
  options_.chunk_tokens = std::max<int64_t>(1, std::min(options_.chunk_tokens, room));
  options_.busy_chunk_tokens =
      std::clamp<int64_t>(options_.busy_chunk_tokens, 1, options_.chunk_tokens);
  inputs_.reserve(slots_.size());
  input_slot_.reserve(slots_.size());
  prefilling_.reserve(slots_.size());
  logits_.resize(slots_.size() * static_cast<size_t>(exec.spec().vocab));
}

Scheduler::~Scheduler() = default;

Expected<uint64_t> Scheduler::Submit(SequenceRequest req) {
  const int64_t prompt_len = static_cast<int64_t>(req.prompt_ids.size());
  if (prompt_len == 0) return InvalidArgument("the prompt is empty: nothing to continue");
  if (req.max_new_tokens < 0) return InvalidArgument("max_new_tokens must be >= 0");
  if (req.on_final_hidden) req.share_prompt_with.reset();  // its own prompt's hidden row
  if (prompt_len > exec_.max_seq()) {
    return InvalidArgument("the prompt has " + std::to_string(prompt_len) +
                           " tokens, more than the context of " + std::to_string(exec_.max_seq()));
  }
  // The prompt and a first generated token must fit the pool even with nothing else running.
  const int64_t needed = KvBlocksFor(std::min(prompt_len + 1, exec_.max_seq()));
  if (needed > pool_.blocks()) {
    return ResourceExhausted(
        "the prompt has " + std::to_string(prompt_len) + " tokens: its KV cache needs " +
        std::to_string(needed) + " blocks of " + std::to_string(kKvBlockTokens) +
        " positions, more than the model's whole pool of " + std::to_string(pool_.blocks()) +
        " (raise --kv-memory or shorten the prompt)");
  }
  const int64_t vocab = exec_.spec().vocab;
  for (int32_t id : req.prompt_ids) {
    if (id < 0 || id >= vocab) {
      return InvalidArgument("prompt token id " + std::to_string(id) +
                             " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
    }
  }
  if (req.pinned_slot && (*req.pinned_slot < 0 || *req.pinned_slot >= slots())) {
    return InvalidArgument("slot " + std::to_string(*req.pinned_slot) + " does not exist");
  }
  auto s = std::make_unique<Sequence>();
  if (req.sampling && req.sampling->mode == SamplingMode::kSample) {
    TS_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(*req.sampling, vocab));
    TS_RETURN_IF_ERROR(sampler.AcceptPrompt(req.prompt_ids));
    s->sampler.emplace(std::move(sampler));
  }
  s->id = next_id_++;
  s->prompt_len = prompt_len;
  s->tokens.reserve(static_cast<size_t>(
      std::min(prompt_len + std::max<int64_t>(req.max_new_tokens, 0), exec_.max_seq()) + 1));
  s->tokens = req.prompt_ids;
  s->req = std::move(req);
  s->submitted = Clock::now();
  s->result.prompt_tokens = prompt_len;
  const uint64_t id = s->id;
  waiting_.push_back(std::move(s));
  return id;
}

int64_t Scheduler::PinPrefix(std::span<const int32_t> tokens, const CacheScope& scope,
                             size_t max_entries) {
  if (max_entries == 0) return 0;
  KvBlockPool::Match m = pool_.Lookup(tokens, static_cast<int64_t>(tokens.size()), scope);
  if (m.shared.empty()) return 0;
  // An entry this one covers (the same prefix, or one it extends) is replaced by it.
  for (auto it = pinned_.begin(); it != pinned_.end();) {
    if (it->size() <= m.shared.size() && std::equal(it->begin(), it->end(), m.shared.begin())) {
      for (int32_t b : *it) pool_.Unref(b);
      it = pinned_.erase(it);
    } else {
      ++it;
    }
  }
  for (int32_t b : m.shared) pool_.Ref(b);
  pinned_.push_back(m.shared);
  ReleasePins(max_entries);
  return static_cast<int64_t>(m.shared.size()) * kKvBlockTokens;
}

void Scheduler::ReleasePins(size_t keep) {
  while (pinned_.size() > keep) {
    for (int32_t b : pinned_.front()) pool_.Unref(b);
    pinned_.pop_front();
  }
}

void Scheduler::Cancel(uint64_t id) {
  for (auto& s : waiting_)
    if (s->id == id) s->cancelled = true;
  for (Slot& slot : slots_)
    if (slot.seq && slot.seq->id == id) slot.seq->cancelled = true;
}

int Scheduler::ChooseSlot(const Sequence& s) const {
  if (s.req.pinned_slot)
    return slots_[static_cast<size_t>(*s.req.pinned_slot)].seq ? -1 : *s.req.pinned_slot;
  // With per-slot state: the free slot whose state shares the longest prefix with the
  // tokens; then (and otherwise) the least recently used.
  const bool by_prefix = options_.reuse_prefixes && exec_.has_slot_state();
  int best = -1;
  int64_t best_common = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = slots_[i];
    if (slot.seq) continue;
    const int64_t common = by_prefix ? CommonPrefix(slot.cached, s.tokens, INT64_MAX) : 0;
    if (best < 0 || common > best_common ||
        (common == best_common && slot.last_used < slots_[static_cast<size_t>(best)].last_used)) {
      best = static_cast<int>(i);
      best_common = common;
    }
  }
  return best;
}

bool Scheduler::TakeBlocks(Sequence& s, const KvBlockPool::Match& m, int64_t start) {
  const int64_t full = start / kKvBlockTokens, rem = start % kKvBlockTokens;
  int32_t source = -1;  // the block whose first `rem` positions are copied
  if (rem > 0) {
    source = full < static_cast<int64_t>(m.shared.size()) ? m.shared[static_cast<size_t>(full)]
                                                          : m.partial;
  }
  // References first, so that allocating cannot evict what is about to be shared or copied.
  for (int64_t i = 0; i < full; ++i) pool_.Ref(m.shared[static_cast<size_t>(i)]);
  if (source >= 0) pool_.Ref(source);
  const int64_t fresh = KvBlocksFor(static_cast<int64_t>(s.tokens.size())) - full;
  // One spare block per running sequence, so that admitting this one does not preempt them.
  if (pool_.available() < fresh + running_) {
    for (int64_t i = 0; i < full; ++i) pool_.Unref(m.shared[static_cast<size_t>(i)]);
    if (source >= 0) pool_.Unref(source);
    return false;
  }
  s.blocks.assign(m.shared.begin(), m.shared.begin() + full);
  for (int64_t i = 0; i < fresh; ++i) s.blocks.push_back(pool_.Allocate());
  s.pos = full * kKvBlockTokens;
  if (source >= 0) {
    if (exec_.CopyKvBlock(source, s.blocks[static_cast<size_t>(full)], rem).ok()) s.pos = start;
    pool_.Unref(source);
  }
  s.registered = full;
  return true;
}

void Scheduler::Admit() {
  // FCFS: the head of the queue is admitted first; a later sequence never overtakes it.
  while (!waiting_.empty()) {
    Sequence& s = *waiting_.front();
    if (s.cancelled) {
      std::unique_ptr<Sequence> gone = std::move(waiting_.front());
      waiting_.pop_front();
      gone->result.stop_reason = StopReason::kCancelled;
      if (!gone->admitted_once) gone->result.queue_ms = MsBetween(gone->submitted, Clock::now());
      if (gone->req.on_finish) gone->req.on_finish(gone->result);
      continue;
    }
    if (s.req.share_prompt_with) {
      // Waits while the choice it shares a prompt with is still computing it.
      const Sequence* parent = Running(*s.req.share_prompt_with);
      if (parent != nullptr && parent->pos < parent->prompt_len &&
          parent->req.prompt_ids == s.req.prompt_ids) {
        return;
      }
      s.req.share_prompt_with.reset();
    }
    if (s.req.after) {
      // Waits for that sequence to end (it is ahead in the queue, or running).
      if (Running(*s.req.after) != nullptr) return;
      for (const auto& w : waiting_) {
        if (w->id == *s.req.after) return;
      }
      s.req.after.reset();
    }
    const int index = ChooseSlot(s);
    if (index < 0) return;
    Slot& slot = slots_[static_cast<size_t>(index)];
    // At least the last token runs (its logits choose the next one); of a prompt not yet
    // started, at least two, so its last token runs as a prompt row: a lone token would run as
    // a decode row, whose kernels may round differently (bf16 weights on the cpu backend), and
    // the result would depend on what was cached.
    const int64_t run_at_least =
        !s.admitted_once && static_cast<int64_t>(s.tokens.size()) >= 2 ? 2 : 1;
    const int64_t limit = static_cast<int64_t>(s.tokens.size()) - run_at_least;
    KvBlockPool::Match m;
    if (options_.reuse_prefixes) m = pool_.Lookup(s.tokens, limit, s.req.cache_scope);
    int64_t start = static_cast<int64_t>(m.shared.size()) * kKvBlockTokens + m.partial_tokens;
    if (start < s.prompt_len && s.prompt_len >= 2) {
      // A resumed sequence whose prompt runs again ends it with two prompt rows at least, as
      // it first ran (its generated tokens are then replayed as decode rows: RunEnd).
      start = std::min(start, s.prompt_len - 2);
    }
    if (exec_.has_slot_state()) {
      // Recurrent layers resume only from their live state or a snapshot; a busy slot's
      // state may be copied from further on, or a kept state restored.
      const int64_t own = options_.reuse_prefixes ? CommonPrefix(slot.cached, s.tokens, start) : 0;
      const int64_t at = exec_.ResumablePosition(index, own);
      const int64_t limit_blocks = start;
      start = options_.reuse_prefixes ? CopyPrefixFromBusySlot(s, index, at, start) : at;
      if (options_.reuse_prefixes) start = RestoreKeptState(m, index, start, limit_blocks);
      slot.cached.assign(s.tokens.begin(), s.tokens.begin() + start);
      PlanCuts(s, m, start, limit);
    }
    if (!TakeBlocks(s, m, start)) {
      if (running_ > 0) return;  // waits for blocks to come back
      // Nothing runs, so every block not shared or copied here is available: without reuse
      // the sequence fits (Submit checked), though the prefix it could share does not.
      slot.cached.clear();
      if (!pinned_.empty()) {
        ReleasePins(0);  // pinned prefixes give way to a prompt that needs their blocks
        continue;
      }
      if (!TakeBlocks(s, {}, 0)) {
        std::unique_ptr<Sequence> gone = std::move(waiting_.front());
        waiting_.pop_front();
        gone->result.status = ResourceExhausted("the KV block pool cannot hold this sequence");
        gone->result.stop_reason = StopReason::kContext;
        if (gone->req.on_finish) gone->req.on_finish(gone->result);
        continue;
      }
    }
    if (exec_.has_slot_state() && s.pos < start) {
      // A block copy failed: the slot state must go back to where the blocks are.
      s.pos = std::min(s.pos, exec_.ResumablePosition(index, s.pos));
      slot.cached.resize(static_cast<size_t>(s.pos));
    }
    slot.last_used = ++clock_;
    if (!s.admitted_once) {
      s.admitted_once = true;
      s.admitted = Clock::now();
      s.result.cached_tokens = s.pos;
      s.result.queue_ms = MsBetween(s.submitted, s.admitted);
    }
    slot.seq = std::move(waiting_.front());
    waiting_.pop_front();
    ++running_;
    if (slot.seq->req.max_new_tokens == 0 && !slot.seq->req.on_final_hidden) {
      Finish(index, StopReason::kLength);
    }
  }
}

Scheduler::Sequence* Scheduler::Running(uint64_t id) {
  for (Slot& slot : slots_)
    if (slot.seq && slot.seq->id == id) return slot.seq.get();
  return nullptr;
}

int64_t Scheduler::CopyPrefixFromBusySlot(const Sequence& s, int index, int64_t own,
                                          int64_t limit) {
  int best = -1;
  int64_t best_common = own + options_.min_copy_tokens - 1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& other = slots_[i];
    if (static_cast<int>(i) == index || !other.seq) continue;
    const int64_t common = CommonPrefix(other.cached, s.tokens, limit);
    if (common > best_common) {
      best = static_cast<int>(i);
      best_common = common;
    }
  }
  if (best < 0) return own;
  const int64_t held = static_cast<int64_t>(slots_[static_cast<size_t>(best)].cached.size());
  // Recurrent layers copy only a state they hold (live or snapshot); try where they resume.
  const int64_t at = exec_.ResumablePosition(best, best_common);
  if (at <= own) return own;
  if (!exec_.CopySlotState(best, index, at, held).ok()) {
    // A backend may have taken part of the copy: resume where the slot now can.
    return exec_.ResumablePosition(index, own);
  }
  return at;
}

bool Scheduler::HasWaitingChildren(uint64_t parent) const {
  for (const auto& w : waiting_)
    if (w->req.share_prompt_with == parent) return true;
  return false;
}

void Scheduler::ForkChildren(int parent_index, std::span<const float> raw_logits) {
  const Sequence& parent = *slots_[static_cast<size_t>(parent_index)].seq;
  const int64_t full = parent.prompt_len / kKvBlockTokens;
  const int64_t rem = parent.prompt_len % kKvBlockTokens;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    Sequence& child = **it;
    if (child.cancelled || child.req.share_prompt_with != parent.id ||
        child.req.prompt_ids != parent.req.prompt_ids) {
      ++it;
      continue;
    }
    child.req.share_prompt_with.reset();  // from here on an ordinary sequence
    int index = -1;
    for (size_t i = 0; i < slots_.size() && index < 0; ++i)
      if (!slots_[i].seq) index = static_cast<int>(i);
    // The prompt's full blocks are shared; its last, partial block is copied.
    const bool room = pool_.available() >= (rem > 0 ? 1 : 0) + running_;
    if (index < 0 || !room ||
        !exec_.CopySlotState(parent_index, index, parent.prompt_len, parent.prompt_len).ok()) {
      ++it;  // admitted later like any other sequence
      continue;
    }
    child.blocks.assign(parent.blocks.begin(), parent.blocks.begin() + full);
    for (int32_t b : child.blocks) pool_.Ref(b);
    if (rem > 0) {
      const int32_t b = pool_.Allocate();
      child.blocks.push_back(b);
      if (!exec_.CopyKvBlock(parent.blocks[static_cast<size_t>(full)], b, rem).ok()) {
        ReleaseBlocks(child, false);
        ++it;
        continue;
      }
    }
    child.registered = std::min(full, parent.registered);
    Slot& slot = slots_[static_cast<size_t>(index)];
    slot.cached = parent.req.prompt_ids;
    slot.last_used = ++clock_;
    child.pos = child.prompt_len;
    child.admitted_once = true;
    child.admitted = Clock::now();
    child.result.cached_tokens = child.prompt_len;
    child.result.queue_ms = MsBetween(child.submitted, child.admitted);
    slot.seq = std::move(*it);
    it = waiting_.erase(it);
    ++running_;
    if (slot.seq->req.max_new_tokens == 0) {
      Finish(index, StopReason::kLength);
      continue;
    }
    fork_row_.assign(raw_logits.begin(), raw_logits.end());  // each child samples a fresh copy
    TakeToken(index, fork_row_);
  }
}

void Scheduler::RegisterFullBlocks(Sequence& s) {
  while ((s.registered + 1) * kKvBlockTokens <= s.pos) {
    const size_t i = static_cast<size_t>(s.registered);
    pool_.Register(s.blocks[i], i > 0 ? s.blocks[i - 1] : -1,
                   std::span<const int32_t>(s.tokens).subspan(i * kKvBlockTokens, kKvBlockTokens),
                   s.req.cache_scope);
    ++s.registered;
  }
}

void Scheduler::PlanCuts(Sequence& s, const KvBlockPool::Match& m, int64_t start, int64_t limit) {
  s.cuts.clear();
  if (kept_.empty() || !options_.reuse_prefixes) return;
  auto add = [&](int64_t pos) {
    if (pos <= start || pos > limit || static_cast<int64_t>(s.tokens.size()) - pos < 2) return;
    for (const Sequence::Cut& c : s.cuts)
      if (c.pos == pos) return;
    Sequence::Cut c{pos, -1, 0};
    const size_t shared = static_cast<size_t>(pos / kKvBlockTokens);
    if (shared <= m.shared.size()) {
      c.block = m.shared[shared - 1];
      c.generation = pool_.generation(c.block);
    }
    s.cuts.push_back(c);
  };
  add(static_cast<int64_t>(m.shared.size()) * kKvBlockTokens);  // the branch point
  add(s.req.keep_state_at / kKvBlockTokens * kKvBlockTokens);
  std::sort(s.cuts.begin(), s.cuts.end(),
            [](const Sequence::Cut& a, const Sequence::Cut& b) { return a.pos < b.pos; });
}

int64_t Scheduler::NextCut(const Sequence& s) {
  for (const Sequence::Cut& c : s.cuts)
    if (c.pos > s.pos) return c.pos;
  return 0;
}

void Scheduler::KeepStateAtBlockEnd(int index) {
  if (kept_.empty() || !options_.reuse_prefixes) return;
  Sequence& s = *slots_[static_cast<size_t>(index)].seq;
  while (!s.cuts.empty() && s.cuts.front().pos < s.pos) s.cuts.erase(s.cuts.begin());
  if (!s.cuts.empty() && s.cuts.front().pos == s.pos) {
    const Sequence::Cut c = s.cuts.front();
    s.cuts.erase(s.cuts.begin());
    if (c.block >= 0) {  // a cached block's end: keyed by that block, if it still stands
      if (pool_.generation(c.block) == c.generation) KeepState(index, c.block, c.generation);
      return;
    }
  } else {
    // The last block boundary of a prompt: what a later prompt with the same beginning (a
    // system prompt, a document) can resume from on any slot.
    const int64_t remaining = static_cast<int64_t>(s.tokens.size()) - s.pos;
    if (s.pos == 0 || s.pos % kKvBlockTokens != 0 || remaining > options_.chunk_tokens) return;
  }
  const int32_t block = s.blocks[static_cast<size_t>(s.pos / kKvBlockTokens - 1)];
  if (!pool_.registered(block)) return;  // not findable (a duplicate of a cached prefix)
  KeepState(index, block, pool_.generation(block));
}

void Scheduler::KeepState(int index, int32_t block, uint32_t generation) {
  const int64_t pos = slots_[static_cast<size_t>(index)].seq->pos;
  size_t entry = 0;
  for (size_t e = 0; e < kept_.size(); ++e) {
    if (kept_[e].block == block && kept_[e].generation == generation) return;  // kept already
    if (kept_[e].used < kept_[entry].used) entry = e;  // empty entries have used == 0
  }
  if (!exec_.KeepSlotState(index, pos, static_cast<int>(entry)).ok()) return;
  kept_[entry] = {block, generation, pos, ++clock_};
}

int64_t Scheduler::RestoreKeptState(const KvBlockPool::Match& m, int index, int64_t start,
                                    int64_t limit) {
  for (size_t i = m.shared.size(); i-- > 0;) {
    const int64_t pos = static_cast<int64_t>(i + 1) * kKvBlockTokens;
    if (pos <= start) break;
    if (pos > limit) continue;
    const int32_t block = m.shared[i];
    for (size_t e = 0; e < kept_.size(); ++e) {
      Kept& k = kept_[e];
      if (k.block != block || k.generation != pool_.generation(block) || k.pos != pos) continue;
      if (!exec_.RestoreSlotState(static_cast<int>(e), index, pos).ok()) return start;
      k.used = ++clock_;
      return pos;
    }
  }
  return start;
}

void Scheduler::ReleaseBlocks(Sequence& s, bool contents_good) {
  if (contents_good) {
    RegisterFullBlocks(s);
    const int64_t last = s.pos / kKvBlockTokens, rem = s.pos % kKvBlockTokens;
    if (rem > 0 && last < static_cast<int64_t>(s.blocks.size()) && s.registered == last) {
      const size_t i = static_cast<size_t>(last);
      pool_.Register(
          s.blocks[i], i > 0 ? s.blocks[i - 1] : -1,
          std::span<const int32_t>(s.tokens).subspan(i * kKvBlockTokens, static_cast<size_t>(rem)),
          s.req.cache_scope);
    }
  }
  for (int32_t b : s.blocks) pool_.Unref(b);
  s.blocks.clear();
  s.registered = 0;
}

void Scheduler::Preempt(int index) {
  Slot& slot = slots_[static_cast<size_t>(index)];
  std::unique_ptr<Sequence> s = std::move(slot.seq);
  --running_;
  ++preemptions_;
  ++s->result.preemptions;
  ReleaseBlocks(*s, true);
  s->pos = 0;
  // Back to the queue in submission order: it is resumed before anything submitted later.
  auto at = std::find_if(waiting_.begin(), waiting_.end(),
                         [&](const std::unique_ptr<Sequence>& w) { return w->id > s->id; });
  waiting_.insert(at, std::move(s));
}

bool Scheduler::GrowBlocks(int index, int64_t positions) {
  Sequence* s = slots_[static_cast<size_t>(index)].seq.get();
  const size_t needed = static_cast<size_t>(KvBlocksFor(positions));
  while (s->blocks.size() < needed) {
    const int32_t b = pool_.Allocate();
    if (b >= 0) {
      s->blocks.push_back(b);
      continue;
    }
    // The pool is dry: preempt the most recently admitted sequence (this one, if it is).
    int victim = -1;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].seq &&
          (victim < 0 || slots_[i].seq->id > slots_[static_cast<size_t>(victim)].seq->id)) {
        victim = static_cast<int>(i);
      }
    }
    if (victim == index && running_ == 1) {
      // Alone and still out of blocks: the pool cannot hold this sequence any longer.
      Finish(index, StopReason::kContext);
      return false;
    }
    Preempt(victim);
    if (victim == index) return false;
  }
  return true;
}

void Scheduler::Finish(int index, StopReason reason, Status status) {
  Slot& slot = slots_[static_cast<size_t>(index)];
  std::unique_ptr<Sequence> s = std::move(slot.seq);
  --running_;
  ReleaseBlocks(*s, status.ok());
  SequenceResult& r = s->result;
  r.status = std::move(status);
  r.stop_reason = reason;
  const Clock::time_point now = Clock::now();
  GenerateTimings& t = r.timings;
  t.prefill_tokens = s->prompt_len - r.cached_tokens;
  if (!r.generated_ids.empty()) {
    t.prefill_ms = MsBetween(s->admitted, s->first_token);
    t.ttft_ms = MsBetween(s->submitted, s->first_token);
    t.decode_ms = MsBetween(s->first_token, now);
    if (t.prefill_ms > 0)
      t.prefill_tok_s = static_cast<double>(t.prefill_tokens) / (t.prefill_ms / 1e3);
    const size_t decoded = r.generated_ids.size() - 1;
    if (decoded > 0 && t.decode_ms > 0) t.decode_tok_s = decoded / (t.decode_ms / 1e3);
  } else {
    t.prefill_ms = MsBetween(s->admitted, now);
  }
  if (s->req.on_finish) s->req.on_finish(r);
}

void Scheduler::TakeToken(int index, std::span<float> logits) {
  Sequence& s = *slots_[static_cast<size_t>(index)].seq;
  if (s.req.on_logits) s.req.on_logits(logits);
  if (s.req.constrain) s.req.constrain(logits);
  int32_t next;
  if (s.sampler) {
    auto sampled = s.sampler->Sample(logits);  // edits logits in place
    Status accepted = sampled ? s.sampler->Accept(*sampled) : sampled.status();
    if (!accepted.ok()) return Finish(index, StopReason::kCancelled, accepted);
    next = *sampled;
  } else {
    next = ArgMax(logits);
  }
  s.result.generated_ids.push_back(next);
  s.tokens.push_back(next);
  if (s.result.generated_ids.size() == 1) s.first_token = Clock::now();
  const bool keep_going = !s.req.on_token || s.req.on_token(next);
  const auto& stops = s.req.stop_ids;
  if (std::find(stops.begin(), stops.end(), next) != stops.end()) {
    return Finish(index, StopReason::kStopToken);
  }
  if (!keep_going || s.cancelled) return Finish(index, StopReason::kCancelled);
  if (static_cast<int64_t>(s.result.generated_ids.size()) >= s.req.max_new_tokens) {
    return Finish(index, StopReason::kLength);
  }
  if (s.pos >= exec_.max_seq()) return Finish(index, StopReason::kContext);
}

int Scheduler::decoding() const {
  int n = 0;
  for (const Slot& slot : slots_)
    if (slot.seq && slot.seq->pos >= slot.seq->prompt_len) ++n;
  return n;
}

void Scheduler::DropCancelledWaiting() {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (!(*it)->cancelled) {
      ++it;
      continue;
    }
    std::unique_ptr<Sequence> gone = std::move(*it);
    it = waiting_.erase(it);
    gone->result.stop_reason = StopReason::kCancelled;
    if (!gone->admitted_once) gone->result.queue_ms = MsBetween(gone->submitted, Clock::now());
    if (gone->req.on_finish) gone->req.on_finish(gone->result);
  }
}

Status Scheduler::Step(std::optional<int64_t> max_rows) {
  last_step_rows_ = 0;
  last_step_decode_rows_ = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].seq && slots_[i].seq->cancelled)
      Finish(static_cast<int>(i), StopReason::kCancelled);
  }
  // A cancelled job's queued sequences end now, not when they would have reached the head.
  DropCancelledWaiting();
  Admit();
  // Decoding sequences get the blocks for their next position, oldest first (a dry pool
  // preempts the newest).
  std::vector<int>& order = prefilling_;
  order.clear();
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].seq) order.push_back(static_cast<int>(i));
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return slots_[static_cast<size_t>(a)].seq->id < slots_[static_cast<size_t>(b)].seq->id;
  });
  for (int i : order) {
    Sequence* s = slots_[static_cast<size_t>(i)].seq.get();
    if (s != nullptr) GrowBlocks(i, s->pos + 1);
  }
  // Decode tokens first (one per running sequence past its prompt), then prompt chunks in
  // admission order while the budget lasts; the oldest prompt always gets its chunk.
  inputs_.clear();
  input_slot_.clear();
  int64_t budget = exec_.max_batch_tokens();
  // A row limit cuts prompt chunks only: the decode rows below always run.
  int64_t prompt_rows_left = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Sequence* s = slots_[i].seq.get();
    if (s == nullptr || !s->RunsOneToken()) continue;
    inputs_.push_back({static_cast<int>(i), s->pos,
                       std::span<const int32_t>(s->tokens).subspan(static_cast<size_t>(s->pos), 1),
                       s->blocks});
    input_slot_.push_back(static_cast<int>(i));
    --budget;
  }
  last_step_decode_rows_ = static_cast<int64_t>(inputs_.size());
  if (max_rows) {
    prompt_rows_left = std::max(kMinPromptChunkRows, *max_rows - last_step_decode_rows_);
  }
  order.erase(std::remove_if(order.begin(), order.end(),
                             [&](int i) {
                               const Sequence* s = slots_[static_cast<size_t>(i)].seq.get();
                               return s == nullptr || s->RunsOneToken();
                             }),
              order.end());
  for (int i : order) {
    const Sequence& s = *slots_[static_cast<size_t>(i)].seq;
    int64_t chunk = inputs_.empty() ? options_.chunk_tokens : options_.busy_chunk_tokens;
    if (max_rows) {
      chunk = std::min(chunk, prompt_rows_left);
      if (chunk < kMinPromptChunkRows && s.RunEnd() - s.pos > chunk) break;  // no room left
    }
    int64_t n = NextPromptRows(s.RunEnd() - s.pos, chunk);
    // A chunk ends at the next cut (two rows at least, so it runs as prompt rows).
    if (const int64_t cut = NextCut(s); cut - s.pos >= 2 && cut < s.pos + n) n = cut - s.pos;
    if (n > budget) break;
    prompt_rows_left -= n;
    inputs_.push_back({i, s.pos,
                       std::span<const int32_t>(s.tokens).subspan(static_cast<size_t>(s.pos),
                                                                  static_cast<size_t>(n)),
                       s.blocks});
    input_slot_.push_back(i);
    budget -= n;
  }
  if (inputs_.empty()) return Status::Ok();
  for (const ModelExecutor::StepInput& in : inputs_)
    last_step_rows_ += static_cast<int64_t>(in.tokens.size());
  // Logits are needed by the inputs that end their sequence's tokens, unless all of those
  // only want the final hidden row; that row is computed when a prompt asking for it ends.
  bool need_logits = false, need_hidden = false;
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const Sequence& s = *slots_[static_cast<size_t>(input_slot_[k])].seq;
    const int64_t end = s.pos + static_cast<int64_t>(inputs_[k].tokens.size());
    if (end < static_cast<int64_t>(s.tokens.size())) continue;
    const bool hidden_now = s.req.on_final_hidden && s.pos < s.prompt_len && end >= s.prompt_len;
    need_hidden = need_hidden || hidden_now;
    need_logits = need_logits || !(hidden_now && s.req.max_new_tokens == 0);
  }
  const size_t vocab = static_cast<size_t>(exec_.spec().vocab);
  const size_t width = static_cast<size_t>(exec_.spec().hidden);
  std::span<float> logits;
  if (need_logits) logits = std::span<float>(logits_.data(), inputs_.size() * vocab);
  std::span<float> final_hidden;
  if (need_hidden) {
    if (final_hidden_.size() < slots_.size() * width) final_hidden_.resize(slots_.size() * width);
    final_hidden = std::span<float>(final_hidden_.data(), inputs_.size() * width);
  }
  if (Status st = exec_.Step(inputs_, logits, final_hidden); !st.ok()) {
    for (int i : input_slot_) {
      slots_[static_cast<size_t>(i)].cached.clear();  // its state is unknown
      Finish(i, StopReason::kCancelled, st);
    }
    return st;
  }
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const int i = input_slot_[k];
    Slot& slot = slots_[static_cast<size_t>(i)];
    Sequence& s = *slot.seq;
    const int64_t ran = static_cast<int64_t>(inputs_[k].tokens.size());
    if (exec_.has_slot_state()) {
      slot.cached.insert(slot.cached.end(), inputs_[k].tokens.begin(), inputs_[k].tokens.end());
    }
    const bool prompt_done_now = s.pos < s.prompt_len && s.pos + ran >= s.prompt_len;
    s.pos += ran;
    RegisterFullBlocks(s);
    if (ran > 1) KeepStateAtBlockEnd(i);
    if (s.pos < static_cast<int64_t>(s.tokens.size())) continue;  // more prompt to run
    if (prompt_done_now && s.req.on_final_hidden) {
      s.req.on_final_hidden(final_hidden.subspan(k * width, width));
      if (s.req.max_new_tokens == 0) {
        Finish(i, StopReason::kLength);
        continue;
      }
    }
    if (prompt_done_now && HasWaitingChildren(s.id)) {
      // The raw row (sampling edits it in place) is kept for the choices sharing this prompt.
      fork_logits_.assign(logits.begin() + static_cast<std::ptrdiff_t>(k * vocab),
                          logits.begin() + static_cast<std::ptrdiff_t>((k + 1) * vocab));
      // The children take their tokens now, while the parent's cache holds just the prompt.
      ForkChildren(i, fork_logits_);
    }
    TakeToken(i, logits.subspan(k * vocab, vocab));
  }
  return Status::Ok();
}

}  // namespace tessera
