#include "engine/scheduler.h"

#include <algorithm>

#include "sampling/sampler.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

struct Scheduler::Sequence {
  uint64_t id = 0;
  SequenceRequest req;
  std::optional<Sampler> sampler;
  int64_t prompt_len = 0;
  int64_t pos = 0;       // positions of the slot's cache this sequence has filled
  int32_t pending = -1;  // the last generated token, to run in the next step
  bool cancelled = false;
  Clock::time_point submitted, admitted, first_token;
  SequenceResult result;
};

Scheduler::Scheduler(ModelExecutor& exec, Options options)
    : exec_(exec), options_(options), slots_(static_cast<size_t>(exec.max_slots())) {
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
  if (prompt_len > exec_.max_seq()) {
    return InvalidArgument("the prompt has " + std::to_string(prompt_len) +
                           " tokens, more than the context of " + std::to_string(exec_.max_seq()));
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
  s->req = std::move(req);
  s->submitted = Clock::now();
  s->result.prompt_tokens = prompt_len;
  const uint64_t id = s->id;
  waiting_.push_back(std::move(s));
  return id;
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
  // The free slot whose cache shares the longest prefix with the prompt; then the least
  // recently used (its cache is the least likely to be wanted again).
  int best = -1;
  size_t best_common = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = slots_[i];
    if (slot.seq) continue;
    size_t common = 0;
    if (options_.reuse_prefixes) {
      const size_t n = std::min(slot.cached.size(), s.req.prompt_ids.size());
      while (common < n && slot.cached[common] == s.req.prompt_ids[common]) ++common;
    }
    if (best < 0 || common > best_common ||
        (common == best_common && slot.last_used < slots_[static_cast<size_t>(best)].last_used)) {
      best = static_cast<int>(i);
      best_common = common;
    }
  }
  return best;
}

void Scheduler::Admit() {
  // FCFS: the head of the queue is admitted first; a later sequence never overtakes it.
  while (!waiting_.empty()) {
    Sequence& s = *waiting_.front();
    if (s.cancelled) {
      std::unique_ptr<Sequence> gone = std::move(waiting_.front());
      waiting_.pop_front();
      gone->result.stop_reason = StopReason::kCancelled;
      gone->result.queue_ms = MsBetween(gone->submitted, Clock::now());
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
    const int index = ChooseSlot(s);
    if (index < 0) return;
    Slot& slot = slots_[static_cast<size_t>(index)];
    int64_t common = 0;
    if (s.req.reuse_prefix_tokens) {
      common = *s.req.reuse_prefix_tokens;  // the caller vouches for its slot's cache
    } else if (options_.reuse_prefixes) {
      const size_t n = std::min(slot.cached.size(), s.req.prompt_ids.size());
      while (static_cast<size_t>(common) < n && slot.cached[static_cast<size_t>(common)] ==
                                                    s.req.prompt_ids[static_cast<size_t>(common)])
        ++common;
    }
    // At least the last prompt id runs (its logits choose the first token); recurrent layers
    // resume only from their live state or a snapshot.
    common = std::clamp<int64_t>(common, 0, s.prompt_len - 1);
    s.pos = exec_.ResumablePosition(index, common);
    if (!s.req.reuse_prefix_tokens && options_.reuse_prefixes) {
      s.pos = CopyPrefixFromBusySlot(s, index, s.pos);
    }
    slot.cached.assign(s.req.prompt_ids.begin(), s.req.prompt_ids.begin() + s.pos);
    slot.last_used = ++clock_;
    s.admitted = Clock::now();
    s.result.cached_tokens = s.pos;
    s.result.queue_ms = MsBetween(s.submitted, s.admitted);
    slot.seq = std::move(waiting_.front());
    waiting_.pop_front();
    ++running_;
    if (slot.seq->req.max_new_tokens == 0) Finish(index, StopReason::kLength);
  }
}

Scheduler::Sequence* Scheduler::Running(uint64_t id) {
  for (Slot& slot : slots_)
    if (slot.seq && slot.seq->id == id) return slot.seq.get();
  return nullptr;
}

int64_t Scheduler::CopyPrefixFromBusySlot(const Sequence& s, int index, int64_t own_common) {
  int best = -1;
  int64_t best_common = own_common + options_.min_copy_tokens - 1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& other = slots_[i];
    if (static_cast<int>(i) == index || !other.seq) continue;
    const size_t n = std::min(other.cached.size(), s.req.prompt_ids.size() - 1);
    int64_t common = 0;
    while (static_cast<size_t>(common) < n && other.cached[static_cast<size_t>(common)] ==
                                                  s.req.prompt_ids[static_cast<size_t>(common)])
      ++common;
    if (common > best_common) {
      best = static_cast<int>(i);
      best_common = common;
    }
  }
  if (best < 0) return own_common;
  const int64_t held = static_cast<int64_t>(slots_[static_cast<size_t>(best)].cached.size());
  // Recurrent layers copy only a state they hold (live or snapshot); try where they resume.
  const int64_t at = exec_.ResumablePosition(best, best_common);
  if (at <= own_common) return own_common;
  if (!exec_.CopySequence(best, index, at, held).ok()) {
    // A backend may have taken part of the copy: resume where the slot now can.
    return exec_.ResumablePosition(index, own_common);
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
    if (index < 0 ||
        !exec_.CopySequence(parent_index, index, parent.prompt_len, parent.prompt_len).ok()) {
      ++it;  // admitted later like any other sequence
      continue;
    }
    Slot& slot = slots_[static_cast<size_t>(index)];
    slot.cached = parent.req.prompt_ids;
    slot.last_used = ++clock_;
    child.pos = child.prompt_len;
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

void Scheduler::Finish(int index, StopReason reason, Status status) {
  Slot& slot = slots_[static_cast<size_t>(index)];
  std::unique_ptr<Sequence> s = std::move(slot.seq);
  --running_;
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
  s.pending = next;
}

Status Scheduler::Step() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].seq && slots_[i].seq->cancelled)
      Finish(static_cast<int>(i), StopReason::kCancelled);
  }
  Admit();
  // Decode tokens first (one per running sequence past its prompt), then prompt chunks in
  // admission order while the budget lasts; the oldest prompt always gets its chunk.
  inputs_.clear();
  input_slot_.clear();
  int64_t budget = exec_.max_batch_tokens();
  for (size_t i = 0; i < slots_.size(); ++i) {
    Sequence* s = slots_[i].seq.get();
    if (s == nullptr || s->pos < s->prompt_len) continue;
    inputs_.push_back({static_cast<int>(i), s->pos, std::span<const int32_t>(&s->pending, 1)});
    input_slot_.push_back(static_cast<int>(i));
    --budget;
  }
  std::vector<int>& prefilling = prefilling_;
  prefilling.clear();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Sequence* s = slots_[i].seq.get();
    if (s != nullptr && s->pos < s->prompt_len) prefilling.push_back(static_cast<int>(i));
  }
  std::sort(prefilling.begin(), prefilling.end(), [&](int a, int b) {
    return slots_[static_cast<size_t>(a)].seq->id < slots_[static_cast<size_t>(b)].seq->id;
  });
  for (int i : prefilling) {
    const Sequence& s = *slots_[static_cast<size_t>(i)].seq;
    const int64_t chunk = inputs_.empty() ? options_.chunk_tokens : options_.busy_chunk_tokens;
    const int64_t n = std::min(chunk, s.prompt_len - s.pos);
    if (n > budget) break;
    inputs_.push_back({i, s.pos,
                       std::span<const int32_t>(s.req.prompt_ids)
                           .subspan(static_cast<size_t>(s.pos), static_cast<size_t>(n))});
    input_slot_.push_back(i);
    budget -= n;
  }
  if (inputs_.empty()) return Status::Ok();
  const size_t vocab = static_cast<size_t>(exec_.spec().vocab);
  std::span<float> logits(logits_.data(), inputs_.size() * vocab);
  if (Status st = exec_.Step(inputs_, logits); !st.ok()) {
    for (int i : input_slot_) {
      slots_[static_cast<size_t>(i)].cached.clear();  // its cache is in an unknown state
      Finish(i, StopReason::kCancelled, st);
    }
    return st;
  }
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const int i = input_slot_[k];
    Slot& slot = slots_[static_cast<size_t>(i)];
    Sequence& s = *slot.seq;
    slot.cached.insert(slot.cached.end(), inputs_[k].tokens.begin(), inputs_[k].tokens.end());
    const bool prompt_done_now =
        s.pos < s.prompt_len &&
        s.pos + static_cast<int64_t>(inputs_[k].tokens.size()) >= s.prompt_len;
    s.pos += static_cast<int64_t>(inputs_[k].tokens.size());
    if (s.pos < s.prompt_len) continue;
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
