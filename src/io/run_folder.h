// The output folder of a training run (./train --out DIR): one run at a time, nothing of an earlier run replaced
// by accident, no temporary files of crashed runs left to pile up.
//
//   DIR/train.lock        an advisory flock(2) held for the whole run, holding the run's process id. The kernel
//                         releases it when the process ends in any way (exit, crash, SIGKILL), so a lock left by a
//                         killed run never blocks the next one; the file itself stays and is harmless.
//   DIR/<name>.tmp.<pid>  temporary files of the atomic writer (atomic_file.h) for the files a run writes; one whose
//                         process is gone was left by a run killed mid-write and is removed by the next run (only
//                         those names: a user's own "notes.tmp.123" is never touched).
#pragma once

#include <string>
#include <vector>

// Holds DIR/train.lock until destroyed. Throws std::runtime_error at once (never waits) when another process
// holds it, naming the folder and, when it has written it yet, that process's id. The lock file is created
// exclusively or opened without following a symbolic link, and must be a regular file: a link planted there is
// refused by name, never followed to truncate its target; one with a second name (a hard link) is locked, never
// written.
class RunFolderLock {
 public:
  explicit RunFolderLock(const std::string& dir);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};

// A fresh run must not silently replace an earlier run's results: throws, naming the folder and the files, if any
// of `files` (e.g. DIR/ckpt.safetensors, DIR/metrics.csv) exists, unless `overwrite` (./train --overwrite).
void refuse_to_replace_run(const std::string& dir, const std::vector<std::string>& files, bool overwrite);

// `./train --resume FILE` continues in DIR (FILE's folder unless --out says otherwise) and writes DIR's checkpoint.
// When that is another file than FILE (FILE is an older copy kept in the folder), resuming would replace it and cut
// metrics.csv back to FILE's step: throws, naming that checkpoint and its step, unless `overwrite`.
void refuse_to_replace_another_checkpoint(const std::string& dir, const std::string& resumed_file, int resumed_step,
                                          bool overwrite);

// Removes DIR's temporary files "<name>.tmp.<pid>", for each of `names` (the files the run writes), that are regular
// files and whose writing process no longer exists (kill(pid, 0) fails with ESRCH); a live process's are left
// alone. Returns the paths removed.
std::vector<std::string> remove_stale_temporaries(const std::string& dir, const std::vector<std::string>& names);
