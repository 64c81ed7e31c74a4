#include "ops/mask.h"

#include "base/layer_list.h"

#include <algorithm>
#include <stdexcept>

KeyRange AttentionMask::keys_for(int i, int T) const {
  switch (kind) {
    case Causal: return {0, i + 1};
    case Bidirectional: return {0, T};
    case Prefix: return {0, std::min(T, std::max(size, i + 1))};
    case Window: return {std::max(0, i + 1 - size), i + 1};
  }
  return {0, 0};
}

bool AttentionMask::allows(int i, int j, int T) const {
  KeyRange r = keys_for(i, T);
  return r.begin <= j && j < r.end;
}

bool AttentionMask::sees_future(int T) const {
  for (int i = 0; i < T; i++)
    if (keys_for(i, T).end > i + 1) return true;
  return false;
}

std::string AttentionMask::to_string() const {
  switch (kind) {
    case Causal: return "causal";
    case Bidirectional: return "bidirectional";
    case Prefix: return "prefix:" + std::to_string(size);
    case Window: return "window:" + std::to_string(size);
  }
  return "?";
}

static int parse_mask_size(const std::string& text, const std::string& digits, int min_value) {
  bool ok = !digits.empty() && digits.size() <= 9 && std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
  int value = ok ? std::stoi(digits) : -1;
  if (!ok || value < min_value)
    throw std::runtime_error("mask '" + text + "': expected a whole number ≥ " + std::to_string(min_value) +
                             " after ':'");
  return value;
}

AttentionMask AttentionMask::parse(const std::string& text) {
  AttentionMask m;
  if (text == "causal") return m;
  if (text == "bidirectional") return m.kind = Bidirectional, m;
  if (text.rfind("prefix:", 0) == 0) return m.kind = Prefix, m.size = parse_mask_size(text, text.substr(7), 0), m;
  if (text.rfind("window:", 0) == 0) return m.kind = Window, m.size = parse_mask_size(text, text.substr(7), 1), m;
  throw std::runtime_error("unknown mask '" + text + "' (expected causal, bidirectional, prefix:N or window:W)");
}

std::string masks_to_string(const std::vector<AttentionMask>& masks) {
  std::vector<std::string> names;
  for (const AttentionMask& m : masks) names.push_back(m.to_string());
  return join_layer_list(names);
}

std::vector<AttentionMask> parse_layer_masks(const std::string& text, int n_layer) {
  std::vector<AttentionMask> masks;
  for (const std::string& item : split_layer_list(text, n_layer, "mask list")) masks.push_back(AttentionMask::parse(item));
  return masks;
}
