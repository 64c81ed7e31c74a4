#include "explore/timeline.h"

#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "lab/head_scores.h"
#include "train/snapshots.h"

using nlohmann::json;

namespace {

// A cell of metrics.csv as a number, or null when it is empty (no evaluation at that step).
json cell_number(const std::string& cell) {
  if (cell.empty()) return nullptr;
  char* end = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  if (end != cell.c_str() + cell.size() || !std::isfinite(v)) return nullptr;
  return v;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

// The evaluation rows of metrics.csv: step, train_loss, val_loss (columns found by their names in the header).
json read_losses(const std::string& path) {
  json steps = json::array(), train = json::array(), val = json::array();
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return {{"step", steps}, {"train_loss", train}, {"val_loss", val}};
  const std::vector<std::string> header = split_csv_line(line);
  int at_step = -1, at_train = -1, at_val = -1;
  for (int i = 0; i < (int)header.size(); i++) {
    if (header[i] == "step") at_step = i;
    if (header[i] == "train_loss") at_train = i;
    if (header[i] == "val_loss") at_val = i;
  }
  while (at_step >= 0 && std::getline(in, line)) {
    const std::vector<std::string> cells = split_csv_line(line);
    auto at = [&](int i) { return i >= 0 && i < (int)cells.size() ? cell_number(cells[i]) : json(nullptr); };
    const json step = at(at_step), t = at(at_train), v = at(at_val);
    if (step.is_null() || (t.is_null() && v.is_null())) continue;
    steps.push_back(step), train.push_back(t), val.push_back(v);
  }
  return {{"step", steps}, {"train_loss", train}, {"val_loss", val}};
}

json value_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json head_json(const HeadScores& s) {
  auto mean = [](const Mean& m) { return m.count ? value_or_null(m.value()) : json(nullptr); };
  return {{"previous_token", mean(s.previous_token)},
          {"induction", mean(s.induction)},
          {"duplicate_token", mean(s.duplicate_token)},
          {"ov_copying", s.has_ov ? value_or_null(s.ov_copying) : json(nullptr)},
          {"sink", s.probabilities ? mean(s.sink) : json(nullptr)},
          {"entropy_norm", s.probabilities ? mean(s.entropy_norm) : json(nullptr)}};
}

}  // namespace

json snapshot_scores(const std::string& path, bool* cached) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error(path + ": no such snapshot");
#ifdef __APPLE__
  const long long mtime = (long long)st.st_mtimespec.tv_sec * 1000000000LL + st.st_mtimespec.tv_nsec;
#else
  const long long mtime = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
#endif
  const std::string cache = path.substr(0, path.size() - std::string(".safetensors").size()) + ".scores.json";
  if (cached) *cached = false;
  {
    std::ifstream in(cache);
    if (in) {
      const json j = json::parse(in, nullptr, false);
      if (!j.is_discarded() && j.value("snapshot_bytes", -1LL) == (long long)st.st_size &&
          j.value("snapshot_mtime_ns", -1LL) == mtime && j.contains("heads")) {
        if (cached) *cached = true;
        return j["heads"];
      }
    }
  }
  Checkpoint ckpt = load_checkpoint(path);
  GPT& model = *ckpt.model;
  const int NH = model.config.n_head;
  const std::vector<HeadScores> scores = score_heads(model, ckpt.tokenizer.num_chars(), kProbeSequences, kProbeSeed);
  json heads = json::array();
  for (int l = 0; l < model.config.n_layer; l++) {
    json layer = json::array();
    for (int h = 0; h < NH; h++) layer.push_back(head_json(scores[(size_t)l * NH + h]));
    heads.push_back(layer);
  }
  const std::string text =
      json{{"snapshot_bytes", (long long)st.st_size}, {"snapshot_mtime_ns", mtime}, {"heads", heads}}.dump();
  try {
    write_file_atomically(cache, {{text.data(), text.size()}});
  } catch (const std::exception&) {
    // a folder we may not write: scored again next time
  }
  return heads;
}

json timeline_json(const std::string& run_folder) {
  json snapshots = json::array();
  const std::string folder = snapshot_folder(run_folder);
  for (int step : snapshot_steps(folder)) {
    bool cached = false;
    const json scores = snapshot_scores(folder + "/" + snapshot_name(step), &cached);
    snapshots.push_back({{"step", step}, {"name", "snapshots/" + snapshot_name(step)}, {"scores", scores},
                         {"cached", cached}});
  }
  return {{"metrics", read_losses(run_folder + "/metrics.csv")},
          {"snapshots", snapshots},
          {"probe", std::to_string(kProbeSequences) + " sequences of random characters, each repeated once (seed " +
                        std::to_string(kProbeSeed) + "; lab/head_scores.h score_heads)"}};
}
