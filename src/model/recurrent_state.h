// RecurrentState: the per-sequence state of recurrent (Gated DeltaNet) layers, fp32, one
// region per slot, allocated once at load. Unlike a KV cache it cannot be rewound, so a slot
// also keeps a few snapshots taken at chunk boundaries: a sequence can resume from its live
// state, from a snapshot, or from the start.
//
//   RecurrentState st;
//   st.Allocate(/*slots=*/1, /*layers=*/18, /*floats_per_layer=*/n, /*snapshots=*/2);
//   float* s = st.Live(slot, layer);        // the layer's conv history and matrices
//   st.Prepare(slot, start_pos);            // live state at start_pos, or an error
//   ...                                     // the layers update Live(slot, layer)
//   st.Finish(slot, start_pos + n, n > 1);  // the new position; a snapshot after a prompt chunk
// A state that was never allocated (a model without recurrent layers) makes Prepare, Finish
// and Resumable no-ops, so a backend calls them for every chunk.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace tessera {

class RecurrentState {
 public:
  // `kept`: states kept apart from any slot (Keep / Restore), e.g. at the end of a cached
  // prompt prefix, for a later sequence on another slot.
  Status Allocate(int slots, int64_t layers, int64_t floats_per_layer, int snapshots_per_slot,
                  int kept = 0);

  int slots() const { return slots_; }
  int kept() const { return kept_; }
  size_t bytes() const {
    return (live_.size() + saved_.size() + kept_states_.size()) * sizeof(float);
  }

  // Copies `slot`'s state after `pos` tokens (its live state or a snapshot at exactly pos) into
  // kept state `entry`. OutOfRange when the slot has no state at pos.
  Status Keep(int slot, int64_t pos, int entry);
  // Makes kept state `entry` `slot`'s live state, after `pos` tokens (the caller's record of
  // what it holds); the slot's snapshots are dropped.
  Status Restore(int entry, int slot, int64_t pos);

  float* Live(int slot, int64_t layer) {
    return live_.data() +
           (static_cast<size_t>(slot) * static_cast<size_t>(layers_) + static_cast<size_t>(layer)) *
               static_cast<size_t>(floats_);
  }
  int64_t position(int slot) const { return position_[static_cast<size_t>(slot)]; }
  void SetPosition(int slot, int64_t pos) { position_[static_cast<size_t>(slot)] = pos; }

  // Copies the live state into the slot's oldest snapshot (a snapshot already at this position
  // is refreshed instead).
  void Snapshot(int slot);

  // After a forward call: the live state is at `pos`; with `snapshot`, also keep a copy.
  void Finish(int slot, int64_t pos, bool snapshot) {
    if (slots_ == 0) return;
    SetPosition(slot, pos);
    if (snapshot) Snapshot(slot);
  }

  // The largest position <= wanted the slot can resume from: wanted itself when the live
  // state or a snapshot is there (or when there is no state), else the best snapshot or live
  // position below it, else 0.
  int64_t Resumable(int slot, int64_t wanted) const;

  // Makes the live state the state after `start_pos` tokens: zeros for 0, else the live state
  // or a snapshot at exactly that position. OutOfRange when neither is.
  Status Prepare(int slot, int64_t start_pos);

  // Makes `to`'s live state `from`'s state after `pos` tokens (its live state or a snapshot
  // at exactly pos; zeros for 0); `to`'s snapshots are dropped. OutOfRange when `from` has
  // no state at pos. A no-op without recurrent layers.
  Status CopyTo(int from, int to, int64_t pos);

 private:
  float* Saved(int slot, int k) {
    return saved_.data() +
           (static_cast<size_t>(slot) * static_cast<size_t>(snapshots_) + static_cast<size_t>(k)) *
               SlotFloats();
  }
  size_t SlotFloats() const { return static_cast<size_t>(layers_) * static_cast<size_t>(floats_); }

  int slots_ = 0;
  int64_t layers_ = 0;
  int64_t floats_ = 0;
  int snapshots_ = 0;
  int kept_ = 0;
  std::vector<float> kept_states_;       // [kept][layer][floats]
  std::vector<float> live_;              // [slot][layer][floats]
  std::vector<float> saved_;             // [slot][snapshot][layer][floats]
  std::vector<int64_t> position_;        // [slot]: tokens the live state has absorbed
  std::vector<int64_t> saved_position_;  // [slot][snapshot]; -1: empty
  std::vector<uint64_t> saved_age_;      // [slot][snapshot]: larger is newer
  uint64_t clock_ = 0;
};

}  // namespace tessera
