// Reading a whole input file (a corpus, a checkpoint) that the user named: only a regular file is read, so that
// /dev/zero cannot fill the memory and a FIFO cannot block forever, and the bytes read are exactly the size the
// file had when it was opened.
#pragma once
#include <string>

// The whole file at `path`. Throws std::runtime_error naming the path when it cannot be opened, is not a regular
// file (saying what it is instead: a directory, a FIFO, a device, a socket), or changed size while being read.
// The open never blocks (O_NONBLOCK), so a FIFO with no writer is refused at once.
std::string read_regular_file(const std::string& path);

// "a directory", "a FIFO (named pipe)", "a character device", …, for a file that is not a regular one.
std::string file_kind(unsigned mode);
