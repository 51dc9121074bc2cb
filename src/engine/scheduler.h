// Scheduler: continuous batching over one ModelExecutor. Sequences wait in FCFS order for one
// of the executor's slots; each Step() runs one forward batch holding one decode token for
// every running sequence plus prompt chunks of admitted sequences within the step's token
// budget (chunked prefill: a long prompt delays the others by at most one chunk per step). The
// batch goes through each weight once (ModelExecutor::Step), and a sequence's tokens do not
// depend on what else was batched with it. Each sequence samples, stops and reports through
// its own callbacks.
//
// KV memory is the executor's block pool (backend.h), managed by a KvBlockPool: a sequence's
// block table grows as it does, and a new sequence shares the cached blocks of the longest
// prefix of its prompt that any earlier sequence computed (multi-turn chat, a shared system
// prompt, many questions about one text), copying a partly matching block rather than writing
// into a shared one. Cached blocks are evicted least recently used first. A prompt is admitted
// when its blocks (plus one spare block per running sequence) are available; when a decoding
// sequence finds no block, the most recently admitted sequence is preempted: its blocks go
// back to the pool (their prefix stays cached) and it waits to be resumed, recomputing what
// was evicted (its generated tokens replayed as decode rows, so no result changes). Models with
// per-slot state (recurrent layers, sliding rings) resume a prefix only as far as a slot's state
// can (its live state, a snapshot, or a busy slot's, copied); models whose per-slot state is
// recurrent alone also keep that state at a few block boundaries of each prompt (where its request
// says others will branch off, where it branched off a cached prompt, where its last chunk starts),
// so a cached prefix resumes on any slot.
//
//   Scheduler sched(exec, {});
//   SequenceRequest req{.prompt_ids = ids, .max_new_tokens = 64, .stop_ids = stops};
//   req.on_token = [&](int32_t id) { return stream(id); };      // false: stop here
//   req.on_finish = [&](const SequenceResult& r) { ... };
//   TS_ASSIGN_OR_RETURN(uint64_t id, sched.Submit(std::move(req)));
//   while (sched.HasWork()) TS_RETURN_IF_ERROR(sched.Step());
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/decoding.h"
#include "engine/kv_block_pool.h"
#include "engine/model_executor.h"
#include "sampling/sampling_params.h"

namespace tessera {

// Prompt tokens per scheduler step of a prefill (Scheduler::Options::chunk_tokens), also what
// an executor's step budget is sized for beside its slots' decode tokens.
inline constexpr int64_t kPrefillChunkTokens = 256;
// The smallest prompt chunk a step's row limit (Scheduler::Step) cuts a prompt to: at least
// three rows, so NextPromptRows never leaves a lone last row and chunking changes no result.
inline constexpr int64_t kMinPromptChunkRows = 8;

struct SequenceResult {
  Status status;  // not ok: the engine failed this sequence (its tokens so far stand)
  std::vector<int32_t> generated_ids;
  StopReason stop_reason = StopReason::kLength;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens whose cache was reused, not run
  int preemptions = 0;        // times the sequence gave its blocks back and resumed later
  double queue_ms = 0;        // submit to admission into a slot
  GenerateTimings timings;    // prefill_ms counts from admission; ttft_ms from submit
};

struct SequenceRequest {
  std::vector<int32_t> prompt_ids;
  int64_t max_new_tokens = 128;
  std::vector<int32_t> stop_ids;
  std::optional<ResolvedSamplingParams> sampling;  // absent: greedy
  // Each step's raw logits before a token is chosen (logprobs); may not keep the span.
  std::function<void(std::span<const float>)> on_logits;
  // May edit the row before the token is chosen (constrained decoding masks tokens out).
  std::function<void(std::span<float>)> constrain;
  // The prompt's last token's hidden state after the final norm ([hidden]), once, when the
  // prompt has been computed (pooled embeddings, score heads); may not keep the span. With
  // max_new_tokens 0 the sequence then ends (kLength), and a step of such sequences alone
  // skips the LM head. Such a sequence computes its own prompt (share_prompt_with is ignored).
  std::function<void(std::span<const float>)> on_final_hidden;
  // Each generated token, also a final stop token; false ends the sequence (kCancelled).
  std::function<bool(int32_t)> on_token;
  // Exactly once, when the sequence ends for any reason; its slot is free again.
  std::function<void(const SequenceResult&)> on_finish;
  // Use this slot instead of choosing one (tests of per-slot state).
  std::optional<int> pinned_slot;
  // Another choice of the same prompt (n > 1): this sequence waits until that one's prompt is
  // computed, then copies its cache and samples its first token from the same logits, so the
  // prompt runs once for all choices. Falls back to running the prompt itself when no slot is
  // free at that moment or the cache cannot be copied.
  std::optional<uint64_t> share_prompt_with;
  // A prompt position other prompts are likely to share up to (where a chat's last user
  // message starts, after a system prompt or a history). On a model whose slot state is
  // recurrent, a prompt chunk ends at the block boundary at or before it and the state there
  // is kept, so the next prompt with that beginning resumes from it on any slot. 0: none.
  int64_t keep_state_at = 0;
  // Who may share this sequence's cached prefixes (cache_scope.h): its prompt reuses only
  // blocks (and the recurrent states kept at their ends) computed under an equal scope, and the
  // blocks it computes are found only under it. Every resumed state is bounded by that match.
  CacheScope cache_scope{};
  // Waits in the queue (holding up the sequences behind it, FCFS) until this sequence has
  // ended: a shared prefix computed first is then found in the prefix cache (System One reads
  // a state once for all its questions).
  std::optional<uint64_t> after;
};

class Scheduler {
 public:
  struct Options {
    // A busy slot's cache is copied into a new sequence's slot when it holds at least this
    // many more prompt tokens than the slot's own (copying beats recomputing well before).
    int64_t min_copy_tokens = 16;
    // Prompt tokens per chunk (one fewer where that would leave a single token:
    // NextPromptRows); chunking changes no result.
    int64_t chunk_tokens = kPrefillChunkTokens;
    // The chunk while other sequences decode: how long a prompt may stall their next token
    // (one 128-row block of the cpu backend, so the prompt's results are the same either way).
    int64_t busy_chunk_tokens = 128;
    bool reuse_prefixes = true;  // the prefix cache (cached blocks, slot states)
  };

  // The executor's max_batch_tokens is the step's token budget; it must hold a decode token
  // for every slot plus one chunk.
  Scheduler(ModelExecutor& exec, Options options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a sequence (validated: a prompt inside the vocabulary and the context); its
  // callbacks run inside Step().
  Expected<uint64_t> Submit(SequenceRequest req);
  // Ends a sequence at the next step (kCancelled); unknown or finished ids are ignored.
  void Cancel(uint64_t id);
  // Keeps the cached whole blocks of the longest prefix of `tokens` cached under `scope` from
  // eviction, as one entry of a least-recently-pinned list of at most `max_entries` (the oldest
  // is let go): for prefixes later requests are expected to extend. Pins are let go when a prompt
  // could not be admitted otherwise. Returns the positions pinned.
  int64_t PinPrefix(std::span<const int32_t> tokens, const CacheScope& scope, size_t max_entries);
  size_t pinned_prefixes() const { return pinned_.size(); }

  bool HasWork() const { return !waiting_.empty() || running_ > 0; }
  // One forward batch; an engine error fails the sequences of that batch (each is finished
  // with the error) and is also returned. `max_rows` bounds the batch (the worker's time slice
  // while other models wait, worker/step_slicer.h): every decoding sequence still gets its
  // token, and the oldest prompt a chunk of at least kMinPromptChunkRows; other prompt chunks
  // fit in what is left. Without it the executor's whole budget is used. A cancelled sequence
  // leaves the queue at the next step wherever it waits in it.
  Status Step(std::optional<int64_t> max_rows = std::nullopt);
  // Rows (tokens) the last Step() ran, and how many of them were decode rows.
  int64_t last_step_rows() const { return last_step_rows_; }
  int64_t last_step_decode_rows() const { return last_step_decode_rows_; }
  // Running sequences past their prompt (a token of theirs is awaited at every step).
  int decoding() const;

  int slots() const { return static_cast<int>(slots_.size()); }
  int running() const { return running_; }
  int waiting() const { return static_cast<int>(waiting_.size()); }
  const KvBlockPool& kv_pool() const { return pool_; }
  int64_t preemptions() const { return preemptions_; }
  const ModelExecutor& executor() const { return exec_; }

 private:
  struct Sequence;
  struct Slot {
    std::unique_ptr<Sequence> seq;  // null: free
    std::vector<int32_t> cached;    // the tokens its per-slot state holds at positions 0..
    uint64_t last_used = 0;
  };

  void Admit();
  void DropCancelledWaiting();  // finishes every cancelled sequence still in the queue
  int ChooseSlot(const Sequence& s) const;
  // Where `s` starts in slot `index` (models with per-slot state): a longer prefix (up to
  // `limit`) copied from a busy slot's state, else `own` (what the slot itself resumes).
  int64_t CopyPrefixFromBusySlot(const Sequence& s, int index, int64_t own, int64_t limit);
  // Gives `s` the blocks of its first `start` positions (shared from `m`, or copied) and fresh
  // ones for the rest of its tokens; false (nothing taken) when the pool cannot spare them.
  bool TakeBlocks(Sequence& s, const KvBlockPool::Match& m, int64_t start);
  // Grows a running sequence's table to hold `positions`, preempting newer sequences when the
  // pool is dry; false when it cannot (the sequence itself was preempted or finished).
  bool GrowBlocks(int index, int64_t positions);
  void Preempt(int index);
  // After a prompt chunk: keeps the slot's recurrent state when the chunk ended on the prompt's
  // last block boundary or on one of its cuts (Sequence::cuts).
  void KeepStateAtBlockEnd(int index);
  // The sequence's cuts after admission at `start` with match m (positions up to `limit`).
  void PlanCuts(Sequence& s, const KvBlockPool::Match& m, int64_t start, int64_t limit);
  // The first cut past the sequence's position; 0: none.
  static int64_t NextCut(const Sequence& s);
  // Keeps the slot's state at its position as the state at the end of `block` (executor's
  // kept states, least recently used replaced).
  void KeepState(int index, int32_t block, uint32_t generation);
  // A kept state at the end of one of m's shared blocks, past `start` and within `limit`,
  // restored into slot `index`: where the sequence starts now.
  int64_t RestoreKeptState(const KvBlockPool::Match& m, int index, int64_t start, int64_t limit);
  // Registers the sequence's blocks that have filled up since the last call.
  void RegisterFullBlocks(Sequence& s);
  // Returns the table's blocks to the pool (registering the last partial one when its
  // contents are good).
  void ReleaseBlocks(Sequence& s, bool contents_good);
  // After `parent` computed its prompt: admits the choices waiting to share it.
  void ForkChildren(int parent_index, std::span<const float> raw_logits);
  Sequence* Running(uint64_t id);
  bool HasWaitingChildren(uint64_t parent) const;
  void Finish(int slot, StopReason reason, Status status = Status::Ok());
  // After a step: choose the sequence's next token from its logits row; false when it ended.
  void TakeToken(int slot, std::span<float> logits);

  ModelExecutor& exec_;
  Options options_;
  std::vector<Slot> slots_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  KvBlockPool pool_;
  // Recurrent states kept at the end of a cached block (the executor's kept states):
  // valid while the block's generation stands.
  struct Kept {
    int32_t block = -1;
    uint32_t generation = 0;
    int64_t pos = 0;
    uint64_t used = 0;  // 0: empty
  };
  std::vector<Kept> kept_;
  std::deque<std::vector<int32_t>> pinned_;  // PinPrefix entries (their blocks), oldest first
  void ReleasePins(size_t keep);
  int64_t preemptions_ = 0;
  int64_t last_step_rows_ = 0;
  int64_t last_step_decode_rows_ = 0;
  int running_ = 0;
  uint64_t next_id_ = 1;
  uint64_t clock_ = 0;
  // Step scratch, kept between steps.
  std::vector<ModelExecutor::StepInput> inputs_;
  std::vector<int> input_slot_;
  std::vector<int> prefilling_;
  std::vector<float> logits_;
  std::vector<float> final_hidden_;  // [slots, hidden] when a step's sequences ask for it
  std::vector<float> fork_logits_;   // a parent's raw row, kept for its waiting choices
  std::vector<float> fork_row_;      // a copy of it for one choice's sampler to edit
};

}  // namespace tessera
