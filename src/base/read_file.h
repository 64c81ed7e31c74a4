// Reading a whole input file (a corpus, a checkpoint, a list of heads) that the user named: only a regular file is
// read, so that /dev/zero cannot fill the memory and a FIFO cannot block forever; its size is checked before a byte
// is allocated (a sparse 20 GB file is refused by name, not answered with std::bad_alloc); and the bytes read are
// exactly the size the file had when it was opened.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

// The whole file at `path`. Throws std::runtime_error naming the path when it cannot be opened, is not a regular
// file (saying what it is instead: a directory, a FIFO, a device, a socket), is larger than `max_bytes` (0: the
// machine's memory; `what` names the kind of file in that message, e.g. "a list of heads"), cannot be allocated,
// or changed size while being read. The open never blocks (O_NONBLOCK), so a FIFO with no writer is refused at once.
std::string read_regular_file(const std::string& path, uint64_t max_bytes = 0, const std::string& what = "");

// The same, but `check_prefix` first sees the file's first `prefix_bytes` bytes (fewer if it is shorter) and its
// size, and may throw to refuse it before the rest is read: a 3 GB file whose first 8 bytes cannot start a
// checkpoint is refused at once, not after reading 3 GB.
std::string read_regular_file(const std::string& path, size_t prefix_bytes,
                              const std::function<void(const std::string& prefix, uint64_t size)>& check_prefix);

// The machine's physical memory in bytes (0 if the system does not say).
uint64_t physical_memory_bytes();

// For a path that is a symbolic link to nothing: "is a symbolic link to something that does not exist (…); remove
// the link or create its target". "" for any other path.
std::string dangling_link(const std::string& path);

// "a directory", "a FIFO (named pipe)", "a character device", …, for a file that is not a regular one.
std::string file_kind(unsigned mode);
