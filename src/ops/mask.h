// Attention masks. Every mask this project knows lets query i see one contiguous run of keys [begin, end):
//   causal         [0, i+1)                      GPT
//   bidirectional  [0, T)                        BERT
//   prefix:N       [0, max(N, i+1)) clipped to T  prefix-LM (T5, UniLM): the first N positions see each other
//   window:W       [max(0, i+1-W), i+1)          sliding window (Longformer, Mistral)
// So the attention loops run over the allowed key ranges (for blocks of queries, their union): the mask shapes the
// work, not only the result.
#pragma once
#include <string>
#include <vector>

struct KeyRange {
  int begin;  // keys j with begin ≤ j < end
  int end;
};

struct AttentionMask {
  enum Kind { Causal, Bidirectional, Prefix, Window };
  Kind kind = Causal;
  int size = 0;  // N for prefix:N, W for window:W

  KeyRange keys_for(int query, int T) const;
  bool allows(int query, int key, int T) const;
  // True when some query may see a later position: next-token training then leaks the answer.
  bool sees_future(int T) const;
  std::string to_string() const;  // the same spelling parse() reads
  static AttentionMask parse(const std::string& text);  // throws with the accepted spellings
  bool operator==(const AttentionMask& other) const { return kind == other.kind && size == other.size; }
  bool operator!=(const AttentionMask& other) const { return !(*this == other); }
};

// One mask per layer, written "causal" when all layers agree or "m0,m1,..." otherwise.
std::string masks_to_string(const std::vector<AttentionMask>& masks);
std::vector<AttentionMask> parse_layer_masks(const std::string& text, int n_layer);
