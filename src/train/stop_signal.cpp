#include "train/stop_signal.h"

#include <unistd.h>

#include <csignal>

#include <cstdio>

#include "data/utf8.h"

static volatile std::sig_atomic_t g_stop_requested = 0;
// What the second signal prints: formatted ahead of time, since a handler may only call async-signal-safe write().
static char g_note[1024];
static volatile std::sig_atomic_t g_note_length = 0;
static const char kNothingSaved[] = "second interrupt: exiting at once; this run has saved no checkpoint\n";

static void on_stop_signal(int) {
  if (g_stop_requested) {
    const int length = g_note_length;
    ssize_t ignored = length > 0 ? write(2, g_note, size_t(length)) : write(2, kNothingSaved, sizeof kNothingSaved - 1);
    (void)ignored;
    _exit(130);
  }
  g_stop_requested = 1;
}

void remember_checkpoint(const std::string& path, int step) {
  g_note_length = 0;  // a signal arriving while the note is rewritten prints the plain message
  const int n = std::snprintf(g_note, sizeof g_note, "second interrupt: exiting at once without saving; %s holds step %d\n",
                              escape_for_message(path).c_str(), step);
  g_note_length = n > 0 && n < int(sizeof g_note) ? n : 0;
}

void install_stop_handlers() {
  g_stop_requested = 0;
  g_note_length = 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGXFSZ, SIG_IGN);
}

bool stop_requested() { return g_stop_requested != 0; }
