#include "io/run_folder.h"

#include "io/checkpoint.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

// ---- the lock -------------------------------------------------------------------------------------------------

RunFolderLock::RunFolderLock(const std::string& dir) {
  const std::string path = dir + "/train.lock";
  // O_CLOEXEC: a program started by ./train must not inherit, and so keep holding, the lock. Created exclusively,
  // or (left by an earlier run) opened with O_NOFOLLOW, so a symbolic link planted there is never followed, and
  // O_NONBLOCK, so a FIFO cannot hang the open; then it must be a regular file before it is written.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == EEXIST) fd_ = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0 && errno == ELOOP)
    throw std::runtime_error("--out " + dir + ": " + path + " is a symbolic link; remove it (the lock is never "
                             "written through a link)");
  if (fd_ < 0) throw std::runtime_error("--out " + dir + ": cannot create " + path + ": " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error("--out " + dir + ": " + path + " is not a regular file; remove it");
  }
  // O_NOFOLLOW does not stop a hard link: a lock with a second name may be some other file too (planted, or a
  // snapshot's copy by `cp -al`), so it is locked but never written.
  const bool only_name = st.st_nlink == 1;
  // flock, not fcntl's F_SETLK: an flock belongs to the open file, not to the process, so it cannot be dropped by
  // some other part of the program closing another descriptor of the same file. LOCK_NB: refuse, never wait.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int reason = errno;
    char text[32] = {0};
    const ssize_t got = ::pread(fd_, text, sizeof text - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (reason != EWOULDBLOCK)
      throw std::runtime_error("--out " + dir + ": cannot lock " + path + ": " + std::strerror(reason));
    const std::string pid = got > 0 ? std::string(text, size_t(got)) : "";
    const bool known = !pid.empty() && pid.find_first_not_of("0123456789\n") == std::string::npos;
    throw std::runtime_error("--out " + dir + ": another ./train" +
                             (known ? " (process " + pid.substr(0, pid.find('\n')) + ")" : "") +
                             " is writing to this folder; wait for it to finish, or choose another --out");
  }
  // Ours: record our process id for the message above. Advisory only; nothing depends on it being there.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (only_name && (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size()))) {
    // The lock holds all the same; only the other run's message will lack the process id.
  }
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

// ---- an earlier run -------------------------------------------------------------------------------------------

void refuse_to_replace_run(const std::string& dir, const std::vector<std::string>& files, bool overwrite) {
  if (overwrite) return;
  std::string found;
  struct stat st;
  for (const std::string& file : files)
    if (::stat(file.c_str(), &st) == 0) found += (found.empty() ? "" : ", ") + file.substr(file.rfind('/') + 1);
  if (!found.empty())
    throw std::runtime_error("--out " + dir + " already holds an earlier run (" + found + "); continue it with " +
                             "--resume " + dir + ", replace it with --overwrite, or choose another --out");
}

void refuse_to_replace_another_checkpoint(const std::string& dir, const std::string& resumed_file, int resumed_step,
                                          bool overwrite) {
  const std::string own = checkpoint_path(dir);
  struct stat a, b;
  if (overwrite || ::stat(own.c_str(), &a) != 0) return;  // nothing there to lose
  if (::stat(resumed_file.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return;  // the same file
  std::string its_step = "unreadable";
  try {
    const Checkpoint there = load_checkpoint(own);
    its_step = there.resumable ? "step " + std::to_string(there.resume.step) : "weights only";
  } catch (const std::exception&) {
  }
  throw std::runtime_error("--resume " + resumed_file + " (step " + std::to_string(resumed_step) + ") would continue in " +
                           dir + " and replace its checkpoint " + own + " (" + its_step + "), cutting " + dir +
                           "/metrics.csv back to step " + std::to_string(resumed_step) + "; resume " + dir +
                           " itself to continue its newest checkpoint, give --out another folder, or --overwrite to "
                           "replace it");
}

// ---- temporaries of killed runs -------------------------------------------------------------------------------

std::vector<std::string> remove_stale_temporaries(const std::string& dir, const std::vector<std::string>& names) {
  std::vector<std::string> removed;
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return removed;
  const std::string marker = ".tmp.";
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    const size_t at = name.rfind(marker);
    if (at == std::string::npos || at == 0) continue;
    bool ours = false;
    for (const std::string& own : names) ours = ours || (own.size() == at && name.compare(0, at, own) == 0);
    if (!ours) continue;
    const std::string digits = name.substr(at + marker.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = pid_t(std::stol(digits));
    // kill with signal 0 only asks whether the process exists. EPERM means it does (another user's): keep it.
    if (pid <= 0 || pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(path.c_str()) == 0) removed.push_back(path);
  }
  ::closedir(listing);
  return removed;
}
