// Ctrl-C during training. The first SIGINT or SIGTERM asks the run to finish its current step, save and stop
// cleanly; a second one leaves at once. The checkpoint on disk is whole either way, because every write goes to
// a temporary file that is renamed into place (io/atomic_file.h).
#pragma once
#include <string>

// Installs the handlers (and ignores SIGXFSZ, so that a write past a file-size limit fails with EFBIG, is
// reported and its temporary file removed, instead of killing the process). Clears any earlier request.
void install_stop_handlers();
// True once SIGINT or SIGTERM has arrived since install_stop_handlers().
bool stop_requested();
// Records the checkpoint the run last completed, so that a second signal, which exits at once, can say which file
// holds which step ("second interrupt: exiting at once without saving; out/ckpt.safetensors holds step 40").
void remember_checkpoint(const std::string& path, int step);
