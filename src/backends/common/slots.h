// Slot bookkeeping both backends' step lists share.
#pragma once

#include <algorithm>
#include <vector>

namespace cujax::slots {

// Per input of a step: whether its slot can move into the step (this is the slot's last read,
// `release` lists it, and the step reads it once), so that the kernel holds the only reference
// to a dead value and may write its result into that memory.
inline std::vector<bool> moves_on_last_use(const std::vector<int>& inputs,
                                           const std::vector<int>& release) {
  std::vector<bool> move(inputs.size(), false);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const int s = inputs[k];
    move[k] = std::find(release.begin(), release.end(), s) != release.end() &&
              std::count(inputs.begin(), inputs.end(), s) == 1;
  }
  return move;
}

}  // namespace cujax::slots
