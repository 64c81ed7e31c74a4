// Write-to-temporary, fsync, rename, fsync-directory: the standard recipe for replacing a file so that a crash
// (of the process or of the machine) at any moment leaves either the old complete file or the new complete one.
//
// POSIX write() is used rather than stdio's fwrite: there is no user-space buffer, so every error (disk full,
// file too large) is reported by the call that caused it instead of surfacing later in fflush or fclose, and
// fsync needs the file descriptor anyway.
#include "io/atomic_file.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/read_file.h"

static std::runtime_error write_error(const std::string& path, const std::string& step, int error_number) {
  return std::runtime_error("cannot write '" + path + "': " + step + ": " + std::strerror(error_number));
}

static std::string directory_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// write() may legally write fewer bytes than asked or be interrupted by a signal, so loop until done.
static bool write_all(int fd, const void* data, size_t size) {
  const char* next = static_cast<const char*>(data);
  // macOS rejects single writes above INT_MAX bytes, and Linux stops short at about 2 GB anyway.
  const size_t max_single_write = size_t(1) << 30;
  while (size > 0) {
    const ssize_t written = ::write(fd, next, size < max_single_write ? size : max_single_write);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return false;
    if (written == 0) {  // cannot happen for a regular file; guard against looping forever
      errno = EIO;
      return false;
    }
    next += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

std::string temporary_path_for(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

// Creates the temporary exclusively: O_EXCL never follows a symbolic link and never opens a FIFO or a device that
// sits at that name. A regular file there was left by a crashed run that happened to have our pid: replaced.
static int create_temporary(const std::string& path, const std::string& temporary) {
  for (int attempt = 0; attempt < 2; attempt++) {
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
    struct stat st;
    if (::lstat(temporary.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::unlink(temporary.c_str()) != 0) break;
  }
  throw std::runtime_error("cannot write '" + path + "': its temporary file name '" + temporary +
                           "' is taken by something that is not a regular file; remove it");
}

void write_file_atomically(const std::string& path, const std::vector<ByteChunk>& chunks) {
  // rename() replaces whatever is at `path`: a symbolic link (not its target), a device node, a FIFO. Only a
  // regular file is ours to replace; anything else is refused, named, and left as it is.
  struct stat existing;
  if (::lstat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode))
    throw std::runtime_error("cannot write '" + path + "': it exists and is " + file_kind(existing.st_mode) +
                             ", not a regular file; it is left alone (remove it, or choose another name)");
  const std::string temporary = temporary_path_for(path);
  int fd = create_temporary(path, temporary);
  if (fd < 0) throw write_error(path, "cannot create temporary file '" + temporary + "'", errno);

  // Every failure below deletes the temporary; `path` itself is only ever touched by the rename.
  auto fail = [&](const std::string& step) {
    const int reason = errno;  // close/unlink may overwrite errno
    if (fd >= 0) ::close(fd);
    ::unlink(temporary.c_str());
    return write_error(path, step, reason);
  };

  for (const ByteChunk& chunk : chunks)
    if (!write_all(fd, chunk.data, chunk.size)) throw fail("writing temporary file '" + temporary + "'");

  // The data must be on disk before the rename is: file systems may commit the (small) rename before the
  // (large) data, and a power loss in between would leave `path` naming an empty or partial file.
  if (::fsync(fd) != 0) throw fail("flushing temporary file '" + temporary + "' to disk");
  // close can report write errors that were deferred (e.g. on network file systems).
  const int close_result = ::close(fd);
  fd = -1;
  if (close_result != 0) throw fail("closing temporary file '" + temporary + "'");

  // rename replaces `path` atomically: every reader, and every crash, sees either the old file or the new one.
  if (::rename(temporary.c_str(), path.c_str()) != 0) throw fail("renaming '" + temporary + "' over it");

  // The rename is a change to the directory, which has its own on-disk data. Until that is flushed a power
  // loss can bring back the old file, although the caller was told the new one is saved.
  const std::string directory = directory_of(path);
  const int directory_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd < 0)
    throw write_error(path, "file replaced, but cannot open directory '" + directory + "' to flush it", errno);
  // Some file systems cannot fsync a directory and say so with EINVAL; there is nothing more to do there.
  if (::fsync(directory_fd) != 0 && errno != EINVAL) {
    const int reason = errno;
    ::close(directory_fd);
    throw write_error(path, "file replaced, but flushing directory '" + directory + "' failed", reason);
  }
  ::close(directory_fd);
}
