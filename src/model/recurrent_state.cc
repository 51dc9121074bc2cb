#include "model/recurrent_state.h"

#include <algorithm>
#include <new>
#include <string>

namespace tessera {

Status RecurrentState::Allocate(int slots, int64_t layers, int64_t floats_per_layer,
                                int snapshots_per_slot, int kept) {
  if (slots <= 0 || layers < 0 || floats_per_layer <= 0 || snapshots_per_slot < 0 || kept < 0) {
    return InvalidArgument("recurrent state sizes must be positive");
  }
  const long double per_slot = static_cast<long double>(layers) * floats_per_layer;
  const long double total = per_slot * (slots * (1 + snapshots_per_slot) + kept);
  if (total > static_cast<long double>(1ull << 34)) {
    return ResourceExhausted("recurrent state of " + std::to_string(slots) +
                             " slots is too large; lower --parallel");
  }
  slots_ = slots;
  layers_ = layers;
  floats_ = floats_per_layer;
  snapshots_ = snapshots_per_slot;
  try {
    live_.assign(static_cast<size_t>(per_slot) * static_cast<size_t>(slots), 0.0f);
    saved_.assign(static_cast<size_t>(per_slot) * static_cast<size_t>(slots) *
                      static_cast<size_t>(snapshots_per_slot),
                  0.0f);
    kept_states_.assign(static_cast<size_t>(per_slot) * static_cast<size_t>(kept), 0.0f);
  } catch (const std::bad_alloc&) {
    live_.clear();
    saved_.clear();
    kept_states_.clear();
    return ResourceExhausted("out of memory allocating the recurrent state");
  }
  kept_ = kept;
  position_.assign(static_cast<size_t>(slots), 0);
  saved_position_.assign(static_cast<size_t>(slots * snapshots_per_slot), -1);
  saved_age_.assign(static_cast<size_t>(slots * snapshots_per_slot), 0);
  return Status::Ok();
}

void RecurrentState::Snapshot(int slot) {
  if (snapshots_ == 0) return;
  const size_t base = static_cast<size_t>(slot) * static_cast<size_t>(snapshots_);
  int target = 0;
  for (int k = 0; k < snapshots_; ++k) {
    if (saved_position_[base + k] == position(slot)) {
      target = k;
      break;
    }
    if (saved_age_[base + k] < saved_age_[base + target]) target = k;
  }
  std::copy_n(Live(slot, 0), SlotFloats(), Saved(slot, target));
  saved_position_[base + target] = position(slot);
  saved_age_[base + target] = ++clock_;
}

int64_t RecurrentState::Resumable(int slot, int64_t wanted) const {
  if (slots_ == 0 || slot < 0 || slot >= slots_) return wanted;
  int64_t best = position(slot) <= wanted ? position(slot) : 0;
  const size_t base = static_cast<size_t>(slot) * static_cast<size_t>(snapshots_);
  for (int k = 0; k < snapshots_; ++k) {
    const int64_t p = saved_position_[base + k];
    if (p >= 0 && p <= wanted) best = std::max(best, p);
  }
  return best;
}

Status RecurrentState::Prepare(int slot, int64_t start_pos) {
  if (slots_ == 0) return Status::Ok();
  if (start_pos == 0) {
    std::fill_n(Live(slot, 0), SlotFloats(), 0.0f);
    SetPosition(slot, 0);
    return Status::Ok();
  }
  if (position(slot) == start_pos) return Status::Ok();
  const size_t base = static_cast<size_t>(slot) * static_cast<size_t>(snapshots_);
  for (int k = 0; k < snapshots_; ++k) {
    if (saved_position_[base + k] == start_pos) {
      std::copy_n(Saved(slot, k), SlotFloats(), Live(slot, 0));
      SetPosition(slot, start_pos);
      return Status::Ok();
    }
  }
  return OutOfRange("the recurrent state of slot " + std::to_string(slot) + " is at " +
                    std::to_string(position(slot)) + " tokens and has no snapshot at " +
                    std::to_string(start_pos) + "; resume from ResumablePosition() or from 0");
}

Status RecurrentState::CopyTo(int from, int to, int64_t pos) {
  if (slots_ == 0) return Status::Ok();
  if (from < 0 || from >= slots_ || to < 0 || to >= slots_ || from == to) {
    return InvalidArgument("recurrent state: bad slots to copy");
  }
  // Where `from`'s state at pos is, checked before `to` is touched (a refusal leaves it as
  // it was).
  int found = -1;  // -1: the live state (or zeros for 0)
  if (pos != 0 && position(from) != pos) {
    const size_t base = static_cast<size_t>(from) * static_cast<size_t>(snapshots_);
    for (int k = 0; k < snapshots_; ++k)
      if (saved_position_[base + k] == pos) found = k;
    if (found < 0) {
      return OutOfRange("no recurrent state at position " + std::to_string(pos) + " to copy");
    }
  }
  const size_t to_base = static_cast<size_t>(to) * static_cast<size_t>(snapshots_);
  for (int k = 0; k < snapshots_; ++k) saved_position_[to_base + k] = -1;
  if (pos == 0) {
    std::fill_n(Live(to, 0), SlotFloats(), 0.0f);
  } else if (found < 0) {
    std::copy_n(Live(from, 0), SlotFloats(), Live(to, 0));
  } else {
    std::copy_n(Saved(from, found), SlotFloats(), Live(to, 0));
  }
  SetPosition(to, pos);
  return Status::Ok();
}

Status RecurrentState::Keep(int slot, int64_t pos, int entry) {
  if (slots_ == 0) return Status::Ok();
  if (slot < 0 || slot >= slots_ || entry < 0 || entry >= kept_) {
    return InvalidArgument("recurrent state: bad slot or kept state");
  }
  const float* source = nullptr;
  if (position(slot) == pos) source = Live(slot, 0);
  const size_t base = static_cast<size_t>(slot) * static_cast<size_t>(snapshots_);
  for (int k = 0; k < snapshots_ && source == nullptr; ++k)
    if (saved_position_[base + k] == pos) source = Saved(slot, k);
  if (source == nullptr) {
    return OutOfRange("no recurrent state at position " + std::to_string(pos) + " to keep");
  }
  std::copy_n(source, SlotFloats(),
              kept_states_.data() + static_cast<size_t>(entry) * SlotFloats());
  return Status::Ok();
}

Status RecurrentState::Restore(int entry, int slot, int64_t pos) {
  if (slots_ == 0) return Status::Ok();
  if (slot < 0 || slot >= slots_ || entry < 0 || entry >= kept_ || pos < 0) {
    return InvalidArgument("recurrent state: bad slot or kept state");
  }
  const size_t base = static_cast<size_t>(slot) * static_cast<size_t>(snapshots_);
  for (int k = 0; k < snapshots_; ++k) saved_position_[base + k] = -1;
  std::copy_n(kept_states_.data() + static_cast<size_t>(entry) * SlotFloats(), SlotFloats(),
              Live(slot, 0));
  SetPosition(slot, pos);
  return Status::Ok();
}

}  // namespace tessera
