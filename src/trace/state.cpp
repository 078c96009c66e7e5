#include "cujax/tree.h"

namespace cujax {

void State::set(const std::string& path, Array value) {
  auto it = index_.find(path);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_[path] = entries_.size();
  entries_.emplace_back(path, std::move(value));
}

const Array& State::at(const std::string& path) const {
  auto it = index_.find(path);
  if (it == index_.end()) throw Error("State has no entry '" + path + "'");
  return entries_[it->second].second;
}

Array& State::at(const std::string& path) {
  auto it = index_.find(path);
  if (it == index_.end()) throw Error("State has no entry '" + path + "'");
  return entries_[it->second].second;
}

}  // namespace cujax
