// Per-layer lists, as --layer-masks and --layer-attention spell them: one name for every layer ("causal"), or one
// per layer, comma-separated ("softmax,linear,linear,linear"). Both flags read and write them through these two
// functions, so they agree on the spelling.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

// The entries of `text`, one per layer: a single entry is repeated n_layer times. `what` names the list in the
// message when the count does not match ("mask list 'a,b' has 2 entries for 4 layers").
inline std::vector<std::string> split_layer_list(const std::string& text, int n_layer, const char* what) {
  std::vector<std::string> items;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (items.size() == 1) items.resize(n_layer, items[0]);
  if ((int)items.size() != n_layer)
    throw std::runtime_error(std::string(what) + " '" + text + "' has " + std::to_string(items.size()) +
                             " entries for " + std::to_string(n_layer) + " layers");
  return items;
}

// The inverse: one name when every layer agrees, else the comma-separated list.
inline std::string join_layer_list(const std::vector<std::string>& items) {
  if (!items.empty() && std::all_of(items.begin(), items.end(), [&](const std::string& s) { return s == items[0]; }))
    return items[0];
  std::string out;
  for (size_t l = 0; l < items.size(); l++) out += (l ? "," : "") + items[l];
  return out;
}
