// What a next-token model predicted in each sliding window of a long text, remembered per window (issue 48).
//
// A text longer than the block is scored with the windows of ./sample --score: block_size characters every
// block_size/2 (train/evaluate.h's score_windows). Typing one key into 10,000 characters used to run all 312
// windows of the tiny preset again. A window's predictions depend only on the characters it reads and the one
// after it (its last prediction's target): the model's weights and masks are fixed for one ExploredModel, and the
// score always runs under the masks the checkpoint was loaded with. So they are kept keyed by those characters,
// and a key recomputes only the windows whose characters it changed: the one or two it falls in, and the last
// window, which ends flush with the text.
//
// Memory is bounded: at most kMaxPositions predictions (about 150 bytes each) per model; the window used least
// recently goes first.
#pragma once
#include <array>
#include <cstddef>
#include <list>
#include <map>
#include <vector>

// One position's prediction of the character after it.
struct Prediction {
  double nats = 0;             // −ln p(the actual next character)
  long rank = 0;               // 1 + the characters ranked before it (as top orders them)
  int top_count = 0;           // how many of top_ids are used (min(10, vocabulary))
  std::array<int, 10> top_ids{};    // the most likely characters, most likely first
  std::array<double, 10> top_p{};   // their probabilities
};

class WindowCache {
 public:
  static constexpr size_t kMaxPositions = 1 << 18;  // ~40 MB: every window of a 65,536-character text at block 1024

  // The predictions of the window whose characters (and the one after its last) are `key`, or null. Valid until the
  // next put.
  const std::vector<Prediction>* find(const std::vector<int>& key);
  // Remembers them (key.size() − 1 predictions) and returns where they are kept; valid until the next put.
  const std::vector<Prediction>* put(const std::vector<int>& key, std::vector<Prediction> predictions);
  size_t windows() const { return index_.size(); }
  size_t positions() const { return positions_; }

 private:
  struct Entry {
    std::vector<int> key;
    std::vector<Prediction> predictions;
  };
  std::list<Entry> entries_;  // most recently used first
  std::map<std::vector<int>, std::list<Entry>::iterator> index_;
  size_t positions_ = 0;
};
