#include "base/read_file.h"

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

std::string file_kind(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return S_ISREG(mode) ? "a regular file" : "not a regular file";
}

std::string dangling_link(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode) || ::stat(path.c_str(), &st) == 0) return "";
  return "is a symbolic link to something that does not exist (" + std::string(std::strerror(errno)) +
         "); remove the link or create its target";
}

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

namespace {

// Reads [offset, offset + size) of fd into dst; false at an early end of file (errno 0) or an error.
bool read_at(int fd, char* dst, size_t size, uint64_t offset) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, dst + got, size - got, off_t(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = 0;
      return false;
    }
    got += size_t(n);
  }
  return true;
}

std::string read_checked(const std::string& path, uint64_t max_bytes, const std::string& what, size_t prefix_bytes,
                         const std::function<void(const std::string&, uint64_t)>& check_prefix) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw std::runtime_error("cannot read '" + path + "': it is " + file_kind(st.st_mode) +
                             ", not a regular file; name a file");
  const uint64_t size = uint64_t(st.st_size);
  auto fail = [&path](const std::string& why) -> std::runtime_error {
    return std::runtime_error("cannot read '" + path + "': " + why);
  };
  auto shrank = [&]() {
    return fail(errno ? std::string(std::strerror(errno)) : std::string("the file shrank while being read"));
  };
  if (check_prefix) {
    std::string prefix(size_t(size < prefix_bytes ? size : prefix_bytes), '\0');
    if (!read_at(fd, &prefix[0], prefix.size(), 0)) throw shrank();
    check_prefix(prefix, size);
  }
  const uint64_t memory = physical_memory_bytes();
  if (max_bytes == 0 && memory > 0 && size > memory)
    throw fail("it is " + std::to_string(size) + " bytes, more than this machine's " + std::to_string(memory) +
               " bytes of memory");
  if (max_bytes != 0 && size > max_bytes)
    throw fail("it is " + std::to_string(size) + " bytes, more than " + what + " can be (at most " +
               std::to_string(max_bytes) + " bytes)");
  std::string bytes;
  try {
    bytes.resize(size_t(size));
  } catch (const std::bad_alloc&) {  // a memory limit (ulimit -v, a container) below the machine's memory
    throw fail("it is " + std::to_string(size) + " bytes, and there is not enough memory to read it");
  } catch (const std::length_error&) {
    throw fail("it is " + std::to_string(size) + " bytes, more than this program can hold in memory");
  }
  if (!read_at(fd, &bytes[0], bytes.size(), 0)) throw shrank();
  return bytes;
}

}  // namespace

std::string read_regular_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  return read_checked(path, max_bytes, what, 0, nullptr);
}

std::string read_regular_file(const std::string& path, size_t prefix_bytes,
                              const std::function<void(const std::string&, uint64_t)>& check_prefix) {
  return read_checked(path, 0, "", prefix_bytes, check_prefix);
}
