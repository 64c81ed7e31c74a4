#include "train/stop_signal.h"

#include <unistd.h>

#include <csignal>

static volatile std::sig_atomic_t g_stop_requested = 0;

static void on_stop_signal(int) {
  if (g_stop_requested) _exit(130);
  g_stop_requested = 1;
}

void install_stop_handlers() {
  g_stop_requested = 0;
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGXFSZ, SIG_IGN);
}

bool stop_requested() { return g_stop_requested != 0; }
