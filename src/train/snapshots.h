// Snapshots: the weights alone (no optimizer state) every N steps, kept in the run folder's snapshots/ so that the
// explorer can show a training run as it went (docs/explore.md's timeline: the head scores of every snapshot
// against the loss curve). ./train --snapshot-every N --snapshot-keep K; make induction keeps them by default.
//
// Names sort by step: OUT/snapshots/step-00000200.safetensors. Each is written atomically like every checkpoint
// (io/atomic_file.h: a crash leaves the old file or the new one). At most K are kept, thinned evenly: at step s the
// snapshots kept are those at multiples of the interval N·2^k, k the smallest with ⌊s / (N·2^k)⌋ + 1 ≤ K. The rule
// depends only on N, K and s, so a resumed run keeps the same files as one that never stopped.
#pragma once
#include <string>
#include <vector>

#include "data/objective.h"
#include "data/tokenizer.h"

class GPT;

struct SnapshotSettings {
  int every = 0;  // 0 = no snapshots
  int keep = 32;  // at most this many in snapshots/ (at least 2: the first and the newest)
};

// OUT/snapshots
std::string snapshot_folder(const std::string& out);
// "step-00000200.safetensors"
std::string snapshot_name(int step);
// The step a snapshot's name holds, or −1 when the name is not a snapshot's.
int snapshot_step(const std::string& name);
// The steps of the snapshots in `folder`, ascending (an absent folder: none).
std::vector<int> snapshot_steps(const std::string& folder);

// The spacing of the kept snapshots once step `step` is reached: every·2^k, k the smallest that keeps at most
// `keep` of the steps 0, every, 2·every, … ≤ step.
long snapshot_interval(const SnapshotSettings& s, int step);
// Whether a snapshot is written after `step` steps (step 0: the initial weights).
bool snapshot_due(const SnapshotSettings& s, int step);

// Writes OUT/snapshots/step-…safetensors of `model` (weights only) and removes the snapshots the interval at
// `step` no longer keeps. Throws naming the file when it cannot write.
void write_snapshot(const std::string& out, int step, const SnapshotSettings& s, const GPT& model,
                    const Tokenizer& tokenizer, Objective objective);

// Before a run writes any: a fresh run removes an earlier run's snapshots (they are not this run's), a resumed one
// those after the step it resumes from (that future is computed again). Returns how many it removed.
int prepare_snapshots(const std::string& out, bool resumed, int start_step);
