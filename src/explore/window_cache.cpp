#include "explore/window_cache.h"

const std::vector<Prediction>* WindowCache::find(const std::vector<int>& key) {
  const auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  entries_.splice(entries_.begin(), entries_, it->second);  // now the most recently used
  return &it->second->predictions;
}

const std::vector<Prediction>* WindowCache::put(const std::vector<int>& key, std::vector<Prediction> predictions) {
  const auto old = index_.find(key);
  if (old != index_.end()) {
    positions_ -= old->second->predictions.size();
    entries_.erase(old->second);
    index_.erase(old);
  }
  positions_ += predictions.size();
  entries_.push_front({key, std::move(predictions)});
  index_[key] = entries_.begin();
  // The least recently used go first, never the one just kept.
  while (positions_ > kMaxPositions && entries_.size() > 1) {
    const Entry& last = entries_.back();
    positions_ -= last.predictions.size();
    index_.erase(last.key);
    entries_.pop_back();
  }
  return &entries_.front().predictions;
}
