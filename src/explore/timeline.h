// /api/timeline: a training run as it went. From the run folder (./train --snapshot-every, train/snapshots.h):
//   metrics.csv     the training and validation loss at every evaluation (train_loss, val_loss against step)
//   snapshots/      the weights every N steps: for each, the lab's head scores (lab/head_scores.h: previous-token,
//                   induction, duplicate-token, OV copying where the kind has an OV circuit, and the attention
//                   statistics where its weights are probabilities) on a fixed probe: score_heads' repeated random
//                   sequences (kProbeSequences of them, seed kProbeSeed), the text on which an induction head
//                   shows itself whatever the corpus
// Each snapshot's scores are computed once and cached beside it, snapshots/step-….scores.json, holding the
// snapshot's size and modification time: a snapshot written again (a resumed run) is scored again. A folder that
// cannot be written is scored at every request instead.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

constexpr int kProbeSequences = 8;
constexpr unsigned long long kProbeSeed = 48;

// {metrics: {step, train_loss, val_loss}, snapshots: [{step, name, scores: [[{…} per head] per layer], cached}],
// probe}. name: the snapshot as the server lists it ("snapshots/step-00000200.safetensors"). A folder without
// metrics.csv or snapshots/ has empty lists. Throws std::runtime_error naming a snapshot that cannot be loaded.
nlohmann::json timeline_json(const std::string& run_folder);

// One snapshot's head scores, cached beside it as described above; `cached` says whether the cache answered.
nlohmann::json snapshot_scores(const std::string& snapshot_path, bool* cached = nullptr);
