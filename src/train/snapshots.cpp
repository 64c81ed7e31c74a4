#include "train/snapshots.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "io/checkpoint.h"
#include "io/run_folder.h"

std::string snapshot_folder(const std::string& out) { return out + "/snapshots"; }

std::string snapshot_name(int step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%08d.safetensors", step);
  return name;
}

int snapshot_step(const std::string& name) {
  const std::string head = "step-", tail = ".safetensors";
  if (name.size() != head.size() + 8 + tail.size()) return -1;
  if (name.compare(0, head.size(), head) != 0 || name.compare(head.size() + 8, tail.size(), tail) != 0) return -1;
  const std::string digits = name.substr(head.size(), 8);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(digits);
}

std::vector<int> snapshot_steps(const std::string& folder) {
  std::vector<int> steps;
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return steps;
  while (const dirent* e = ::readdir(dir)) {
    const int step = snapshot_step(e->d_name);
    if (step >= 0) steps.push_back(step);
  }
  ::closedir(dir);
  std::sort(steps.begin(), steps.end());
  return steps;
}

long snapshot_interval(const SnapshotSettings& s, int step) {
  long interval = s.every;
  // The snapshots at multiples of `interval` up to `step`: ⌊step / interval⌋ + 1 of them (step 0 included).
  while (step / interval + 1 > s.keep) interval *= 2;
  return interval;
}

bool snapshot_due(const SnapshotSettings& s, int step) {
  if (s.every <= 0) return false;
  return step % snapshot_interval(s, step) == 0;
}

static void remove_snapshot(const std::string& folder, int step) {
  const std::string path = folder + "/" + snapshot_name(step);
  if (std::remove(path.c_str()) != 0 && errno != ENOENT)
    throw std::runtime_error("cannot remove " + path + ": " + std::strerror(errno));
}

void write_snapshot(const std::string& out, int step, const SnapshotSettings& s, const GPT& model,
                    const Tokenizer& tokenizer, Objective objective) {
  const std::string folder = snapshot_folder(out);
  if (::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("--snapshot-every: cannot create " + folder + ": " + std::strerror(errno));
  save_checkpoint(folder + "/" + snapshot_name(step), model, tokenizer, nullptr, objective);
  // Thinned evenly: every other one goes each time the count would pass `keep`.
  const long interval = snapshot_interval(s, step);
  for (int kept : snapshot_steps(folder))
    if (kept % interval != 0) remove_snapshot(folder, kept);
}

int prepare_snapshots(const std::string& out, bool resumed, int start_step) {
  const std::string folder = snapshot_folder(out);
  int removed = 0;
  for (int step : snapshot_steps(folder))
    if (!resumed || step > start_step) {
      remove_snapshot(folder, step);
      removed++;
    }
  // A snapshot's temporary left by a killed run ("step-….safetensors.tmp.<pid>", io/atomic_file.h): the names
  // it may hold are those of the temporaries in the folder whose prefix is a snapshot's name.
  std::vector<std::string> names;
  if (DIR* dir = ::opendir(folder.c_str())) {
    while (const dirent* e = ::readdir(dir)) {
      const std::string name = e->d_name;
      const size_t at = name.rfind(".tmp.");
      if (at != std::string::npos && snapshot_step(name.substr(0, at)) >= 0) names.push_back(name.substr(0, at));
    }
    ::closedir(dir);
  }
  removed += (int)remove_stale_temporaries(folder, names).size();
  return removed;
}
