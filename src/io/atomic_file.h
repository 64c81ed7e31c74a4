// Crash-safe file replacement: after a crash at any moment, `path` holds either the complete old file or the
// complete new one, never a half-written mix. Used for checkpoints, which take minutes of training to produce.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

// One piece of the file's contents. The file is the concatenation of the chunks, written straight from the
// caller's memory, so a large tensor is never copied into an intermediate buffer.
struct ByteChunk {
  const void* data;
  size_t size;
};

// Writes the chunks to temporary_path_for(path) (created exclusively, never through a link), flushes it to disk,
// renames it over `path` and flushes the directory (POSIX). Only a regular file at `path` is replaced: a symbolic
// link, a FIFO, a device or a directory there is refused by name and left alone. On failure removes the temporary
// file, leaves any existing file at `path` untouched and throws std::runtime_error naming the path and the reason.
void write_file_atomically(const std::string& path, const std::vector<ByteChunk>& chunks);

// The temporary file used while writing `path`: same directory (rename is only atomic within one file
// system), and the process id in the name so two processes writing the same checkpoint do not collide.
std::string temporary_path_for(const std::string& path);
