// ./inspect serve: the explorer's local web server (cpp-httplib). It serves one self-contained page (page.h) and a
// small JSON API over the checkpoints of one run folder (docs/explore.md lists every endpoint and field):
//
//   GET  /                     the page
//   GET  /api/checkpoints      the folder's *.safetensors, newest first, and which one opens by default
//   GET  /api/model            ckpt → the model's shape, objective, masks, attention kinds, vocabulary
//   POST /api/score            ckpt, text → surprisal per character, top-5 predictions, bits/char
//   POST /api/attention        ckpt, text, position, layer, head → every head's row at position, one head's map
//   POST /api/next             ckpt, text, temperature, top_k, top_p → the next character's distribution
//   POST /api/refresh          ckpt, text, position, layer, head, map, temperature, top_k, top_p → score, attention
//                              and next at once, what the page asks after every key (one forward pass)
//   POST /api/generate         ckpt, text, n, temperature, top_k, top_p, seed → a stream of JSON lines, one token each
//   POST /api/fill             ckpt, text, blank → a masked LM's blanks filled
//   GET  /api/timeline         run → metrics.csv's losses and every snapshot's head scores (explore/timeline.h)
//   GET  /api/ablate           ckpt, text, heads, how → surprisal with heads knocked out, and its change (ablation.h)
//   GET  /api/lens             ckpt, text, pos → the logit lens and direct logit attribution at pos (explore/lens.h)
//   GET  /api/head             ckpt, text, position, layer, head → one head step by step (explore/head_steps.h)
//
// Parameters come as a query string or a form body (application/x-www-form-urlencoded); every API endpoint takes
// GET and POST alike. Bad input is answered with HTTP 400 and {"error": "..."} (an unknown checkpoint 404, one
// that changed on disk and cannot be read 409, a broken model 500), never a crash.
//
// Safety. It listens on 127.0.0.1 unless told otherwise, and then answers only requests whose Host header names
// a loopback address (a web page elsewhere cannot reach it by renaming itself, "DNS rebinding"). A request names
// a checkpoint by file name, and only names the server itself lists from the folder are ever opened. Bodies are
// capped at 1 MiB (65,536 characters for /api/score, however encoded), texts at the model's block size, generation at max_generate tokens.
//
// Concurrency. The server answers on several threads (several tabs at once); every use of a model holds one
// mutex, so requests are computed one at a time, and a generation holds it until it ends or its reader goes away.
// A checkpoint is loaded on first use and kept (at most kKeptModels of them); before every use the file's size,
// modification time and inode are compared with those it was loaded from, and a changed file is read again (a
// training run replaces it atomically, so the new file is whole) or, if it cannot be read, refused with 409.
#pragma once
#include <memory>
#include <string>
#include <vector>

struct ServeOptions {
  std::string host = "127.0.0.1";
  int max_generate = 2000;  // tokens per /api/generate request
};

class ExploreServer {
 public:
  // ckpt: a checkpoint file or a run folder (its ckpt.safetensors opens first). The folder is the file's folder.
  // Throws if the default checkpoint cannot be loaded.
  ExploreServer(const std::string& ckpt, const ServeOptions& options = {});
  ~ExploreServer();
  ExploreServer(const ExploreServer&) = delete;
  ExploreServer& operator=(const ExploreServer&) = delete;

  // Binds host:port (port 0 = any free port) and returns the port; throws std::runtime_error if it cannot.
  int bind(int port);
  // The first port from `first` that no other program listens on (trying `count` of them), else any free one. On a
  // loopback host the port must be free on both 127.0.0.1 and ::1.
  int bind_first_free(int first, int count);
  void run();   // serves until stop(); call after bind
  void stop();  // from any thread
  std::string url() const;  // http://host:port/ once bound

  const std::string& folder() const;
  std::vector<std::string> checkpoint_names() const;  // what /api/checkpoints lists

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Is `host` a loopback address or name (127.x.y.z, ::1, localhost)?
bool is_loopback_host(const std::string& host);
