// bench/bench.cpp — how fast plaingpt trains and samples, and where the time of a training step goes.
//
//   make bench                  the full run (a few minutes on two cores); prints tables, writes bench/results.json
//   BENCH_QUICK=1 make bench    the same tables with fewer repeats and shorter sweeps (about a minute)
//   build/bench/bench --step tiny --threads 2 [--threads-split batch|ops|auto] [--warmup W] [--repeats R]
//                               one preset's training step in this process: prints one JSON line (ms of every
//                               timed step, median, tokens/s, peak RSS, the analytic estimate). `make bench` runs
//                               each preset this way in a fresh process, so each peak RSS is that preset's alone;
//                               bench/compare.py uses the same mode against the PyTorch twin.
//   build/bench/bench --split [--threads 2] [--quick]
//                               batch-split against op-split threads (train/replicas.h): a training step's median ms
//                               for shapes from one sequence per thread to the small preset (make bench-split).
//   build/bench/bench --mixers [--quick] [--json PATH]
//                               every registered mixer kind: training step and decoding per token against T, the
//                               kinds alternated round by round, one thread: only section 7, the last of
//                               `make bench` (make bench-mixers; docs/recall.md, docs/mamba.md, docs/rwkv.md).
//   build/bench/bench --sample --threads 1 [-n 500]
//                               sampling speed through the KV-cache Decoder (tiny model), one JSON line.
//   build/bench/bench --sample-bound [--rounds 5] [-n 500] [--repeats 5]
//                               only section 4: sampling on 1 and 2 threads against the bound measured in the same
//                               run (a token's matrix-vector products as single-threaded sgemv), alternated rounds.
//   build/bench/bench --sgemm-rate --threads 2
//                               the machine's sgemm rate (section 1's large shape), one JSON line: bench/compare.py
//                               prints each side's step as a share of it.
//   build/bench/bench --plot CHART.json OUT.svg
//                               draws a chart with src/lab/plot.h (bench/frontier.py's loss-vs-time plot): JSON
//                               {title, x_label, y_label, log_x, series: [{label, x, y, colour, dashed}]}.
//
// Benchmarks must run without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (mk/bench.mk unsets them); we warn if they
// are set. The machine may be shared: every number is a median of repeated measurements.
//
// FLOPs of a training step (the PaLM / nanoGPT "MFU" count, per token, forward + backward):
//   6·N + 12·L·C·T     N = parameters except the position embedding (the tied wte counts once: it is the LM
//                      head's matrix product), L layers, C width, T sequence length.
// 6·N is the matrix products (2 FLOPs per multiply-add, forward 1×, backward 2×); 12·L·C·T is attention's
// Q·Kᵀ and P·V (forward 4·T·C per layer per token, backward twice that). It counts the full T×T score matrix
// even for a causal mask, which our kernel skips half of — the standard convention, so numbers compare with
// other implementations. LayerNorm, GELU, softmax, AdamW are not counted (they are not FLOP-bound).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/muon.h"
#include "ops/softmax_attention.h"
#include "base/blas.h"
#include "ops/cross_entropy.h"
#include "model/decoder.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/linear_attention.h"
#include "model/mixers/registry.h"
#include "model/model.h"
#include "base/rng.h"
#include "generate/generate.h"
#include "generate/sampling.h"
#include "base/runtime.h"
#include "base/decode_team.h"
#include "base/threads.h"
#include "lab/plot.h"
#include "train/loop.h"
#include "train/plan.h"
#include "train/replicas.h"
#include "train/trainer.h"

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---- small helpers -------------------------------------------------------------------------------------------

static double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

static double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double peak_rss_mb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // Linux reports KiB
}

// The 1-minute load average: on a shared machine, anything well above our own thread count means the numbers
// are inflated by other work.
static double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = std::nan("");
  f >> l;
  return l;
}

static const double kMB = 1024.0 * 1024.0;

// CPU time of the whole process (every thread), ms. On a busy machine a 1-thread measurement in CPU time is
// close to what the code would take alone; at 2 threads it also counts the time libgomp spins at barriers.
static double process_cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Timing {
  double median = 0, min = 0, cpu = 0;  // ms per call: wall median, wall fastest, CPU-time median
};

// Runs f once to warm up (unless warm is false), then times it until `max_reps` calls or, after `min_reps`,
// `budget_ms` of calls.
template <class F>
static Timing measure(F&& f, int min_reps, int max_reps, double budget_ms, bool warm = true) {
  if (warm) f();
  std::vector<double> t, c;
  double total = 0;
  while ((int)t.size() < max_reps && ((int)t.size() < min_reps || total < budget_ms)) {
    const auto t0 = Clock::now();
    const double c0 = process_cpu_ms();
    f();
    c.push_back(process_cpu_ms() - c0);
    t.push_back(ms_since(t0));
    total += t.back();
  }
  return {median(t), *std::min_element(t.begin(), t.end()), median(c)};
}

static std::vector<float> randn(size_t n, float scale, Rng& rng) {
  std::vector<float> v(n);
  for (float& x : v) x = (float)(scale * rng.normal());
  return v;
}

static std::vector<int> random_tokens(size_t n, int V, Rng& rng) {
  std::vector<int> v(n);
  for (int& x : v) x = rng.below(V);
  return v;
}

static std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (status != 0) throw std::runtime_error("command failed (" + std::to_string(status) + "): " + cmd);
  return out;
}

static std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

static std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "build/bench/bench";
  buf[n] = 0;
  return buf;
}

// ---- presets and the FLOP count ------------------------------------------------------------------------------

struct BenchPreset {
  std::string name;
  ModelConfig model;
  int batch;
};

static BenchPreset get_preset(const std::string& name) {
  TrainConfig t = preset(name);  // trainer.h: the same presets ./train uses
  t.model.vocab_size = 65;       // Tiny Shakespeare's character set
  return {name, t.model, t.batch};
}

// Parameters in the FLOP count: all but the position embedding (see the header comment).
static double flop_params(const ModelConfig& c) {
  const double all = (double)total_floats(gpt_tensor_table(c));
  return all - (double)c.block_size * c.n_embd;
}

// Model FLOPs per token of one training step at sequence length T: 6·N + 12·L·C·T.
static double flops_per_token(const ModelConfig& c, int T) {
  return 6.0 * flop_params(c) + 12.0 * c.n_layer * c.n_embd * (double)T;
}

// ---- sgemm: what the machine can do --------------------------------------------------------------------------

// GFLOP/s of C = A·B with A (M, K), B (K, N), row-major, as linear_forward calls it: `threads` OpenMP threads each
// run single-threaded sgemm on their own block of rows.
struct Rate {
  double median = 0, best = 0;  // GFLOP/s
};
static Rate sgemm_gflops(int threads, int M, int N, int K, int reps) {
  Rng rng(3);
  std::vector<float> A = randn((size_t)M * K, 1, rng), Bm = randn((size_t)K * N, 1, rng), Cm((size_t)M * N);
  set_threads(threads);
  auto run = [&] {
#pragma omp parallel num_threads(threads)
    {
      const int me = omp_get_thread_num(), n = omp_get_num_threads();
      const int r0 = (int)((long)M * me / n), r1 = (int)((long)M * (me + 1) / n);
      if (r1 > r0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, N, K, 1.0f, A.data() + (size_t)r0 * K, K,
                    Bm.data(), N, 0.0f, Cm.data() + (size_t)r0 * N, N);
    }
  };
  const Timing t = measure(run, reps, reps, 0);
  return {2.0 * M * N * K / (t.median * 1e6), 2.0 * M * N * K / (t.min * 1e6)};
}

// "The machine's sgemm rate": the small preset's MLP product, large enough that OpenBLAS runs at its best.
constexpr int kRateM = 4096;
constexpr int kRateN = 1536;
constexpr int kRateK = 384;

// ---- a full training step ------------------------------------------------------------------------------------

struct StepTimes {
  std::vector<double> ms, cpu_ms;  // wall and CPU (all threads) time of each timed step
  double median_ms = 0, median_cpu_ms = 0;
  bool batch_split = false;  // the threads took slices of the batch (train/replicas.h)
};

// ./train's step (train_step, train/loop.h) without its data loading and logging: zero_grad, forward, backward,
// clip, AdamW, with the threads shared as ./train shares them (--threads-split, train/replicas.h). The ops'
// own times are the per-op breakdown's (below).
static StepTimes time_training_steps(const ModelConfig& c, int B, int threads, int warmup, int reps,
                                     const std::string& split = "auto") {
  set_threads(threads);
  GPT model(c);
  model.init_weights(1337);
  TrainConfig cfg;  // AdamW at its defaults, on a 2000-step schedule, the threads shared as `split` says
  cfg.model = c;
  cfg.batch = B;
  cfg.optimizer = "adamw";
  cfg.steps = 2000;
  cfg.threads_split = split;
  const TrainPlan plan = plan_training(cfg);
  const bool batch_split = choose_split(plan.threads_split, threads, B, false) == ThreadSplit::Batch;
  Replicas replicas(model, batch_split ? threads : 1);
  AdamW state;
  Learner learner{replicas, plan.optimizer->kind, state};
  Rng rng(42);
  const int T = c.block_size;
  std::vector<int> x = random_tokens((size_t)B * T, c.vocab_size, rng), y = random_tokens(x.size(), c.vocab_size, rng);
  StepTimes st;
  st.batch_split = batch_split;
  for (int i = 0; i < warmup + reps; i++) {
    const auto t0 = Clock::now();
    const double cpu0 = process_cpu_ms();
    const StepResult step = train_step(learner, cfg, i, {x.data(), y.data(), B, T});
    const double wall = ms_since(t0), cpu = process_cpu_ms() - cpu0;
    if (!step.updated) throw std::runtime_error("benchmark step diverged");
    if (i < warmup) continue;
    st.ms.push_back(wall), st.cpu_ms.push_back(cpu);
  }
  st.median_ms = median(st.ms);
  st.median_cpu_ms = median(st.cpu_ms);
  return st;
}

// ---- per-op breakdown ----------------------------------------------------------------------------------------

struct OpRow {
  std::string name;
  int count;  // calls per training step
  Timing fwd, bwd;
  double step_ms() const { return count * (fwd.median + bwd.median); }
  double step_min_ms() const { return count * (fwd.min + bwd.min); }
  double step_cpu_ms() const { return count * (fwd.cpu + bwd.cpu); }
};

// Times every op of one training step on its own, called straight from src/ on buffers of the step's shapes.
// Each op is warm in cache here, which it may not be inside the step; the "other" row of the table is the
// difference from the measured step (residual adds, memsets, cache misses).
static std::vector<OpRow> op_breakdown(const ModelConfig& c, int B, int T, int threads, int min_reps, double budget_ms,
                                       bool warm, const AttentionMask& mask = AttentionMask{}) {
  set_threads(threads);
  const int C = c.n_embd, NH = c.n_head, V = c.vocab_size, L = c.n_layer, BT = B * T;
  const float scale = 1.0f / std::sqrt((float)(C / NH));
  Rng rng(11);
  const int max_reps = 200;
  auto timed = [&](auto&& f) { return measure(f, min_reps, max_reps, budget_ms, warm); };
  std::vector<OpRow> rows;

  {  // token + position embedding
    std::vector<int> tok = random_tokens(BT, V, rng);
    std::vector<float> wte = randn((size_t)V * C, 0.02f, rng), wpe = randn((size_t)T * C, 0.02f, rng);
    std::vector<float> out((size_t)BT * C), dwte(wte.size()), dwpe(wpe.size());
    Timing f = timed([&] { embedding_forward(out.data(), tok.data(), wte.data(), wpe.data(), B, T, C); });
    Timing b = timed([&] { embedding_backward(dwte.data(), dwpe.data(), out.data(), tok.data(), B, T, C); });
    rows.push_back({"embedding", 1, f, b});
  }
  {  // LayerNorm: ln_1 and ln_2 of every block, and ln_f
    std::vector<float> x = randn((size_t)BT * C, 1, rng), w = randn(C, 1, rng), bias = randn(C, 0.1f, rng);
    std::vector<float> y(x.size()), mean(BT), rstd(BT), dy = randn(x.size(), 1, rng), dx(x.size()), dw(C), db(C);
    Timing f = timed([&] { layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), BT, C); });
    Timing b = timed([&] {
      layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(), BT, C);
    });
    rows.push_back({"layernorm", 2 * L + 1, f, b});
  }
  auto linear = [&](const char* name, int IC, int OC) {
    std::vector<float> x = randn((size_t)BT * IC, 1, rng), w = randn((size_t)IC * OC, 0.02f, rng), bias(OC);
    std::vector<float> y((size_t)BT * OC), dy = randn(y.size(), 1e-3f, rng), dx(x.size()), dw(w.size()), db(OC);
    Timing f = timed([&] { linear_forward(y.data(), x.data(), w.data(), bias.data(), BT, IC, OC); });
    Timing b = timed([&] {
      linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), BT, IC, OC);
    });
    rows.push_back({name, L, f, b});
  };
  linear("linear qkv (C→3C)", C, 3 * C);
  {  // attention
    std::vector<float> qkv = randn((size_t)BT * 3 * C, 1, rng), lse((size_t)B * NH * T), out((size_t)BT * C);
    std::vector<float> dout = randn(out.size(), 1e-3f, rng), dqkv(qkv.size());
    Timing f = timed([&] { attention_forward(out.data(), lse.data(), qkv.data(), mask, scale, B, T, C, NH); });
    Timing b = timed([&] {
      attention_backward(dqkv.data(), dout.data(), qkv.data(), lse.data(), out.data(), mask, scale, B, T, C, NH);
    });
    rows.push_back({"attention", L, f, b});
  }
  linear("linear attn proj (C→C)", C, C);
  linear("linear mlp fc (C→4C)", C, 4 * C);
  {  // GELU
    const size_t n = (size_t)BT * 4 * C;
    std::vector<float> x = randn(n, 1, rng), y(n), dy = randn(n, 1e-3f, rng), dx(n), slope(n);
    Timing f = timed([&] { gelu_forward(y.data(), x.data(), n); });
    Timing b = timed([&] {  // as the step's backward runs it (model/block.h): gelu(fc) and its slope, then the multiply
      gelu_recompute(y.data(), slope.data(), x.data(), n);
      gelu_backward_from_slope(dx.data(), slope.data(), dy.data(), n);
    });
    rows.push_back({"gelu", L, f, b});
  }
  linear("linear mlp proj (4C→C)", 4 * C, C);
  {  // LM head (tied) and the loss
    std::vector<float> x = randn((size_t)BT * C, 1, rng), wte = randn((size_t)V * C, 0.02f, rng);
    std::vector<float> logits((size_t)BT * V), dlogits = randn(logits.size(), 1e-3f, rng), dx(x.size()), dwte(wte.size());
    Timing f = timed([&] { lm_head_forward(logits.data(), x.data(), wte.data(), BT, C, V); });
    Timing b = timed([&] { lm_head_backward(dx.data(), dwte.data(), dlogits.data(), x.data(), wte.data(), BT, C, V); });
    rows.push_back({"lm_head (tied wte)", 1, f, b});
    std::vector<float> probs(logits.size()), losses(BT), dz(logits.size());
    std::vector<int> targets = random_tokens(BT, V, rng);
    int count = BT;
    Timing cf = timed([&] { count = cross_entropy_forward(probs.data(), losses.data(), logits.data(), targets.data(), BT, V).count; });
    Timing cb = timed([&] { cross_entropy_backward(dz.data(), probs.data(), targets.data(), count, BT, V); });
    rows.push_back({"cross-entropy", 1, cf, cb});
  }
  {  // the optimizer side: zero_grad, clip, AdamW (on a real model's arenas)
    GPT model(c);
    model.init_weights(5);
    for (float& g : model.grads_memory()) g = (float)(1e-3 * rng.normal());
    AdamW opt;
    AdamWConfig cfg;
    opt.update(model, cfg, 1e-4f);  // the first update allocates m and v: keep that out of the timings
    Timing z = timed([&] { model.zero_grad(); });
    rows.push_back({"zero_grad", 1, Timing{}, z});
    Timing clip = timed([&] { clip_global_norm(model.grads_memory(), cfg.grad_clip); });
    rows.push_back({"grad clip (global norm)", 1, Timing{}, clip});
    Timing upd = timed([&] { opt.update(model, cfg, 1e-4f); });
    rows.push_back({"adamw update", 1, Timing{}, upd});
  }
  return rows;
}

// ---- sampling ----------------------------------------------------------------------------------------------------

// Tokens per second generating n tokens with generate() (the Decoder's KV cache, ./sample's path and its thread
// choice) and the default sampling options, from a one-token prompt.
static double sampling_tokens_per_s(int threads, int n, int reps, double* fastest = nullptr) {
  set_threads(threads);
  BenchPreset p = get_preset("tiny");
  GPT model(p.model);
  model.init_weights(1337);
  SamplingOptions options;
  std::vector<double> rates;
  for (int r = 0; r < reps + 1; r++) {
    Rng rng(r + 1);
    const auto t0 = Clock::now();
    generate(model, {0}, n, options, rng, /*mask_token=*/-1, [](int) {});
    const double ms = ms_since(t0);
    if (r > 0) rates.push_back(n / (ms / 1000.0));
  }
  if (fastest) *fastest = *std::max_element(rates.begin(), rates.end());
  return median(rates);
}

// The bound for sampling: the matrix-vector products one token needs (per layer q|k|v C→3C, the attention output
// C→C, the MLP C→4C and 4C→C; then the LM head V×C), timed as single-threaded OpenBLAS sgemv calls on the tiny
// model's own weights in a token's order. The weights (~3 MB) do not fit in a core's L2, so, as in a real token, they
// stream from L3 and the time is set by how fast one core reads them. Also timed: the same calls each repeated on
// one matrix (it stays in L2: a stricter bound no token can reach, since a token reads each matrix once), and our
// matvec / lm_head_matvec (ops/linear.h) on the same weights in the same order, the decoder's products.
struct TokenProducts {
  double sgemv_us = 0;      // OpenBLAS sgemv, weights streamed as a token reads them: the bound
  double sgemv_fastest_us = 0;  // the same, the fastest run
  double sgemv_hot_us = 0;  // OpenBLAS sgemv, each shape repeated on one matrix (cache-hot), summed over the token
  double matvec_us = 0;     // ours, weights streamed
  double matvec2_us = 0;    // ours, two rows through each weight read (matvec2), the same products
  double split_mixer_us = 0;  // two rows, the mixer's products one row at a time (its second read L2-hot)
  double team2_us = 0;      // matvec2 on the same products split over a DecodeTeam of 2 threads (base/decode_team.h)
  double mflop = 0;         // 2 × multiply-adds of one token's products
};

static TokenProducts token_products(int n, int reps) {
  set_threads(1);  // one OpenMP thread, and OpenBLAS single-threaded inside it
  BenchPreset p = get_preset("tiny");
  GPT model(p.model);
  model.init_weights(1337);
  const ModelConfig& c = p.model;
  const int C = c.n_embd, V = c.vocab_size;
  const GPTParams& w = model.params();
  struct Product {
    const float *weight, *bias;
    int IC, OC;
  };
  std::vector<Product> products;  // a token's order; the LM head is separate (its weight is stored [out, in])
  for (int l = 0; l < c.n_layer; l++) {
    const BlockParams& h = w.h[l];
    const std::string attn = "h." + std::to_string(l) + ".attn.";
    products.push_back({model.parameter(attn + "c_attn.weight"), model.parameter(attn + "c_attn.bias"), C, 3 * C});
    products.push_back({model.parameter(attn + "c_proj.weight"), model.parameter(attn + "c_proj.bias"), C, C});
    products.push_back({h.mlp_fc_w, h.mlp_fc_b, C, 4 * C});
    products.push_back({h.mlp_proj_w, h.mlp_proj_b, 4 * C, C});
  }
  TokenProducts r;
  for (const Product& q : products) r.mflop += 2e-6 * q.IC * q.OC;
  r.mflop += 2e-6 * V * C;
  std::vector<float> x(4 * C), y(4 * C);
  Rng rng(5);
  for (float& v : x) v = (float)rng.normal();
  auto sgemv = [&](const Product& q) {  // y = b + xᵀ·W, W (IC, OC) row-major: y = Wᵀ·x
    std::copy(q.bias, q.bias + q.OC, y.begin());
    cblas_sgemv(CblasRowMajor, CblasTrans, q.IC, q.OC, 1.0f, q.weight, q.OC, x.data(), 1, 1.0f, y.data(), 1);
  };
  auto sgemv_head = [&] {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, V, C, 1.0f, w.wte, C, x.data(), 1, 0.0f, y.data(), 1);
  };
  // µs per token: the median over `reps` runs of n tokens' products back to back, each run timed as a whole (as
  // sampling_tokens_per_s times n sampled tokens, so that a shared machine's interruptions weigh alike on both).
  double fastest = 0;
  auto token_us = [&](const std::function<void()>& token) {
    std::vector<double> t;
    for (int r = 0; r < reps + 1; r++) {  // the first run warms up
      const auto t0 = Clock::now();
      for (int i = 0; i < n; i++) token();
      if (r > 0) t.push_back(1000 * ms_since(t0) / n);
    }
    fastest = *std::min_element(t.begin(), t.end());
    return median(t);
  };
  r.sgemv_us = token_us([&] {
    for (const Product& q : products) sgemv(q);
    sgemv_head();
  });
  r.sgemv_fastest_us = fastest;
  r.matvec_us = token_us([&] {
    for (const Product& q : products) matvec(y.data(), x.data(), q.weight, q.bias, q.IC, q.OC);
    lm_head_matvec(y.data(), x.data(), w.wte, C, V);
  });
  std::vector<float> x1(4 * C), y1(4 * C);
  for (float& v : x1) v = (float)rng.normal();
  r.matvec2_us = token_us([&] {
    for (const Product& q : products)
      matvec2(y.data(), y1.data(), x.data(), x1.data(), q.weight, q.bias, q.IC, q.OC);
    lm_head_matvec(y.data(), x.data(), w.wte, C, V);
  });
  r.split_mixer_us = token_us([&] {
    for (size_t k = 0; k < products.size(); k++) {
      const Product& q = products[k];
      if (k % 4 < 2) {  // q|k|v and the attention output: each row's mixer step reads its own
        matvec(y.data(), x.data(), q.weight, q.bias, q.IC, q.OC);
        matvec(y1.data(), x1.data(), q.weight, q.bias, q.IC, q.OC);
      } else {
        matvec2(y.data(), y1.data(), x.data(), x1.data(), q.weight, q.bias, q.IC, q.OC);
      }
    }
    lm_head_matvec(y.data(), x.data(), w.wte, C, V);
  });
  {
    DecodeTeam team(2);
    const DecodeTeam::Scope scope(&team);
    r.team2_us = token_us([&] {
      for (const Product& q : products)
        matvec2(y.data(), y1.data(), x.data(), x1.data(), q.weight, q.bias, q.IC, q.OC);
      lm_head_matvec(y.data(), x.data(), w.wte, C, V);
    });
  }
  // Hot: layer 0's four products (every layer has the same shapes) and the head, each repeated on its own matrix.
  for (int k = 0; k < 5; k++) {
    const int times = k < 4 ? c.n_layer : 1;
    r.sgemv_hot_us += times * token_us([&] { k < 4 ? sgemv(products[k]) : sgemv_head(); });
  }
  return r;
}

// Where a sampled token's time goes (1 thread): n tokens through the Decoder and sample_token as generate() runs
// them, each push and each sample_token timed, µs per token summed over the run and divided by n. A push steps the
// token and, from position shadow_start() on (all of them once the window has slid), its shadow (model/decoder.h);
// a slide is only a swap of states. Also timed apart, on fresh contexts (reset() each time): a one-row step
// (positions 1 … shadow_start()−1) and a two-row one (shadow_start() … block−1). Their difference also holds the
// attention over the longer context and how the machine's load moved between them: a rough figure. What the
// shadow costs against the slides it replaces is main's breakdown against this one, side by side
// (docs/performance.md).
struct TokenTimes {
  double step_us = 0;         // per one-row step, fresh contexts
  double shadow_step_us = 0;  // per two-row step (the token and its shadow), fresh contexts
  double push_per_token_us = 0, sample_per_token_us = 0;
};
static TokenTimes token_breakdown(int n) {
  set_threads(1);
  BenchPreset p = get_preset("tiny");
  GPT model(p.model);
  model.init_weights(1337);
  Decoder decoder(model);
  SamplingOptions options;
  Rng rng(1);
  std::vector<std::pair<float, int>> scratch;
  double push = 0, sample = 0;
  const int block = p.model.block_size, start = decoder.shadow_start();
  const float* logits = decoder.push(0);
  for (int i = 0; i < n; i++) {
    const auto t0 = Clock::now();
    const int next = sample_token(logits, p.model.vocab_size, options, rng, scratch);
    const auto t1 = Clock::now();
    logits = decoder.push(next);
    push += 1000 * ms_since(t1);
    sample += 1000 * std::chrono::duration<double, std::milli>(t1 - t0).count();
  }
  double one = 0, two = 0;
  int ones = 0, twos = 0;
  for (int r = 0; r < std::max(1, n / block); r++) {
    decoder.reset();
    for (int pos = 0; pos < block; pos++) {
      const auto t0 = Clock::now();
      decoder.push(pos % p.model.vocab_size);
      const double us = 1000 * ms_since(t0);
      if (pos >= start) two += us, twos++;
      else if (pos > 0) one += us, ones++;
    }
  }
  TokenTimes t;
  t.step_us = one / std::max(ones, 1), t.shadow_step_us = two / std::max(twos, 1);
  t.push_per_token_us = push / n, t.sample_per_token_us = sample / n;
  return t;
}

// Section 4 of `make bench` and `bench --sample-bound`: rounds alternating the bound, 1 thread and 2 threads,
// medians of each. Returns the JSON and prints the table.
static json sampling_against_bound(int rounds, int n, int reps) {
  std::vector<double> bound, hot, ours_products, ours_two_rows, ours_split_mixer, ours_team2, tps1, tps2, step,
      shadow_step, push_tok, sample_tok;
  double mflop = 0, fastest_bound = INFINITY, fastest1 = 0, fastest2 = 0;
  for (int r = 0; r < rounds; r++) {
    const TokenProducts t = token_products(n, reps);
    bound.push_back(t.sgemv_us), hot.push_back(t.sgemv_hot_us), ours_products.push_back(t.matvec_us);
    ours_two_rows.push_back(t.matvec2_us), ours_split_mixer.push_back(t.split_mixer_us);
    ours_team2.push_back(t.team2_us);
    mflop = t.mflop;
    double f1 = 0, f2 = 0;
    tps1.push_back(sampling_tokens_per_s(1, n, reps, &f1));
    tps2.push_back(sampling_tokens_per_s(2, n, reps, &f2));
    fastest_bound = std::min(fastest_bound, t.sgemv_fastest_us);
    fastest1 = std::max(fastest1, f1), fastest2 = std::max(fastest2, f2);
    const TokenTimes b = token_breakdown(4 * n);
    step.push_back(b.step_us), shadow_step.push_back(b.shadow_step_us), push_tok.push_back(b.push_per_token_us);
    sample_tok.push_back(b.sample_per_token_us);
  }
  const double b = median(bound), h = median(hot), m = median(ours_products), t1 = median(tps1), t2 = median(tps2);
  const double bound_tps = 1e6 / b;
  std::printf("  a token's products: %.2f MFLOP over %.1f MB of weights (tiny model)\n", mflop, mflop / 2 * 4);
  std::printf("  %-58s %8.1f µs  = %6.0f tokens/s  (%.0f GFLOP/s)\n",
              "bound: OpenBLAS sgemv, 1 thread, the token's products", b, bound_tps, mflop / b * 1e3);
  std::printf("  %-58s %8.1f µs  = %6.0f tokens/s\n", "  the same shapes each repeated on one matrix (L2-hot)", h,
              1e6 / h);
  std::printf("  %-58s %8.1f µs\n", "  our matvec, the same products", m);
  std::printf("  %-58s %8.1f µs\n", "  our matvec2, the same products for two rows", median(ours_two_rows));
  std::printf("  %-58s %8.1f µs\n", "  two rows, the mixers' products one row at a time", median(ours_split_mixer));
  std::printf("  %-58s %8.1f µs\n", "  our matvec2 split over a DecodeTeam of 2 threads", median(ours_team2));
  std::printf("  sampling, 1 thread:  %8.0f tokens/s = %5.1f µs/token = %4.1f%% of the bound (%4.1f%% of L2-hot)\n", t1,
              1e6 / t1, 100 * t1 / bound_tps, 100 * t1 * h / 1e6);
  std::printf("  sampling, 2 threads: %8.0f tokens/s = %5.1f µs/token = %4.1f%% of the bound (%4.1f%% of L2-hot); "
              "2 threads / 1: %.2f\n",
              t2, 1e6 / t2, 100 * t2 / bound_tps, 100 * t2 * h / 1e6, t2 / t1);
  std::printf("  (medians of %d rounds, each: bound, 1 thread, 2 threads; each figure the median of %d runs of %d "
              "tokens, wall clock)\n",
              rounds, reps, n);
  std::printf("  fastest runs (the least disturbed on a shared machine): bound %.1f µs; 1 thread %.0f tokens/s = "
              "%.1f%%; 2 threads %.0f tokens/s = %.1f%%\n",
              fastest_bound, fastest1, 100 * fastest1 * fastest_bound / 1e6, fastest2,
              100 * fastest2 * fastest_bound / 1e6);
  const int block = get_preset("tiny").model.block_size, shadow_start = block - block / 2;  // Decoder's
  std::printf("  where a token's time goes (1 thread, %d tokens, each push timed): per token, pushes %.1f + "
              "sample_token %.1f = %.1f µs;\n  once the window has slid every push steps two rows, the token and its "
              "shadow, and a slide only swaps states (no re-encode);\n  fresh contexts: a one-row step (positions "
              "1…%d) %.1f µs, a two-row one (%d…%d) %.1f µs\n",
              4 * n, median(push_tok), median(sample_tok), median(push_tok) + median(sample_tok), shadow_start - 1,
              median(step), shadow_start, block - 1, median(shadow_step));
  return {{"tokens", n},
          {"rounds", rounds},
          {"token_mflop", mflop},
          {"bound_sgemv_us", b},
          {"bound_tokens_per_s", bound_tps},
          {"sgemv_l2_hot_us", h},
          {"matvec_us", m},
          {"matvec2_us", median(ours_two_rows)},
          {"matvec2_team2_us", median(ours_team2)},
          {"tokens_per_s_1_thread", t1},
          {"tokens_per_s_2_threads", t2},
          {"fraction_of_bound_1_thread", t1 / bound_tps},
          {"fraction_of_bound_2_threads", t2 / bound_tps},
          {"fastest", {{"bound_us", fastest_bound}, {"tokens_per_s_1_thread", fastest1},
                       {"tokens_per_s_2_threads", fastest2}}},
          {"step_us", median(step)},
          {"shadow_step_us", median(shadow_step)},
          {"per_token_us", {{"pushes", median(push_tok)}, {"sample_token", median(sample_tok)}}},
          {"rounds_tokens_per_s_1_thread", tps1},
          {"rounds_tokens_per_s_2_threads", tps2},
          {"rounds_bound_us", bound}};
}

// ---- batch-split against op-split (--split) --------------------------------------------------------------------
// The crossover behind --threads-split auto (train/replicas.h): the same training step (forward, backward, clip,
// AdamW) with its threads taking slices of the batch or sharing every op, alternated in one process, for the tiny
// widths at batches from 2 (one sequence per thread) to 32, the frontier shape and the small preset.
static void split_crossover(int threads, bool quick) {
  struct Shape {
    std::string label;
    ModelConfig model;
    int batch;
  };
  std::vector<Shape> shapes;
  const BenchPreset tiny = get_preset("tiny"), frontier = get_preset("frontier"), small = get_preset("small");
  for (int B : {2, 4, 12, 32}) shapes.push_back({"tiny widths, batch " + std::to_string(B), tiny.model, B});
  shapes.push_back({"frontier (block 128, batch 16)", frontier.model, frontier.batch});
  ModelConfig long_tiny = tiny.model;
  long_tiny.block_size = 256;
  shapes.push_back({"tiny widths, block 256, batch 32", long_tiny, 32});
  if (!quick) {
    shapes.push_back({"small (6×384, block 256), batch 8", small.model, 8});
    shapes.push_back({"small (6×384, block 256, batch 64)", small.model, small.batch});
  }
  std::printf("batch-split against op-split, %d threads: median ms of a training step (forward, backward, clip, "
              "AdamW), rounds alternated (load average %.1f)\n", threads, load_average());
  std::printf("  %-36s %10s %10s %8s %8s\n", "shape", "ops ms", "batch ms", "ops/batch", "auto");
  for (const Shape& sh : shapes) {
    const bool big = sh.model.n_embd >= 384;
    const int rounds = big ? 2 : (quick ? 2 : 3), warmup = big ? 1 : 3, reps = big ? 2 : (quick ? 10 : 20);
    std::vector<double> ops, batch;
    for (int r = 0; r < rounds; r++) {
      for (int k = 0; k < 2; k++) {  // A B, then B A
        const bool batch_first = r % 2 == 1;
        const bool run_batch = (k == 0) == batch_first;
        const double ms =
            time_training_steps(sh.model, sh.batch, threads, warmup, reps, run_batch ? "batch" : "ops").median_ms;
        (run_batch ? batch : ops).push_back(ms);
      }
    }
    const ThreadSplit chosen = choose_split(SplitChoice::Auto, threads, sh.batch, false);
    std::printf("  %-36s %10.2f %10.2f %7.2fx %8s\n", sh.label.c_str(), median(ops), median(batch),
                median(ops) / median(batch), to_string(chosen));
    std::fflush(stdout);
  }
}

// ---- child-process modes -------------------------------------------------------------------------------------

static json step_report(const std::string& name, int threads, int warmup, int reps, const std::string& split) {
  BenchPreset p = get_preset(name);
  StepTimes st = time_training_steps(p.model, p.batch, threads, warmup, reps, split);
  const double tokens = (double)p.batch * p.model.block_size;
  const double gflop = tokens * flops_per_token(p.model, p.model.block_size) / 1e9;
  return {{"impl", "plaingpt"},
          {"blas_core", blas_core()},
          {"preset", name},
          {"threads", threads},
          {"threads_split", st.batch_split ? "batch" : "ops"},
          {"batch", p.batch},
          {"block_size", p.model.block_size},
          {"warmup", warmup},
          {"ms", st.ms},
          {"median_ms", st.median_ms},
          {"min_ms", *std::min_element(st.ms.begin(), st.ms.end())},
          {"cpu_ms", st.cpu_ms},
          {"median_cpu_ms", st.median_cpu_ms},
          {"load_average", load_average()},
          {"tokens_per_s", tokens / (st.median_ms / 1000.0)},
          {"gflop_per_step", gflop},
          {"gflops", gflop / (st.median_ms / 1000.0)},
          {"peak_rss_mb", peak_rss_mb()},
          {"estimate_mb", estimate_training_bytes(p.model, p.batch) / kMB},
          {"params", total_floats(gpt_tensor_table(p.model))}};
}

// The optimizer's part of a tiny-preset step alone (optim/muon.h): Muon on the blocks' linear weights and AdamW on
// the rest, on gradients of the clipped size, and NS5 by itself on each matrix shape of the model.
static json muon_step_report(int threads, int reps) {
  set_threads(threads);
  BenchPreset p = get_preset("tiny");
  GPT model(p.model);
  Rng rng(5);
  const double scale = 1.0 / std::sqrt((double)model.num_params());  // a gradient of global norm ~1, as clipped
  for (float& g : model.grads_memory()) g = (float)(scale * rng.normal());
  AdamW adamw;
  AdamWConfig cfg;
  Muon muon;
  const Timing t_adamw = measure([&] { adamw.update(model, cfg, 1e-3f, muon_updates); }, reps, reps, 0);
  const Timing t_muon = measure([&] { muon.update(model, adamw.m, 0.95f, 0.1f, 1e-3f); }, reps, reps, 0);
  json shapes = json::array();
  for (const TensorSpec& t : model.table()) {
    if (!muon_updates(t) || t.name.rfind("h.0.", 0) != 0) continue;  // one layer's shapes
    const int rows = (int)t.shape[0], cols = (int)t.shape[1];
    std::vector<float> u = randn(t.numel, 0.01f, rng), out(t.numel), scratch(newton_schulz5_scratch(rows, cols));
    const Timing ns = measure([&] { newton_schulz5(out.data(), u.data(), rows, cols, scratch.data()); }, reps, reps, 0);
    shapes.push_back({{"tensor", t.name.substr(4)}, {"rows", rows}, {"cols", cols}, {"ns5_ms", ns.median}});
  }
  return {{"impl", "plaingpt"}, {"blas_core", blas_core()}, {"threads", threads},
          {"muon_update_ms", t_muon.median}, {"muon_update_min_ms", t_muon.min}, {"adamw_rest_ms", t_adamw.median},
          {"newton_schulz5_one_layer", shapes}, {"load_average", load_average()}};
}

// ---- the full benchmark --------------------------------------------------------------------------------------

struct Options {
  bool quick = false;
  std::string json_path = "bench/results.json";
};

static void hr() { std::printf("%s\n", std::string(100, '-').c_str()); }

static void write_json(const json& j, const std::string& path) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << j.dump(2) << "\n";
}

// The table: ops sorted by their share of the step, three ways: wall-time medians; the fastest call of each op
// against the fastest step (on a busy machine other work only ever adds time, so at 2 threads these are the
// steadier shares); and CPU time (medians of the process's CPU time; at 1 thread the most reliable columns, at 2
// threads they also count libgomp's spinning at barriers).
static void print_breakdown(const std::string& title, const std::vector<OpRow>& rows, const json& step, json& out) {
  const double step_ms = step["median_ms"], step_cpu_ms = step["median_cpu_ms"], step_min_ms = step["min_ms"];
  std::printf("\n%s — measured step: median %.2f ms, fastest %.2f ms, CPU %.2f ms\n", title.c_str(), step_ms,
              step_min_ms, step_cpu_ms);
  std::printf("  %-28s %5s %8s %8s %9s %7s %9s %7s %9s %7s\n", "op", "calls", "fwd ms", "bwd ms", "ms/step", "% step",
              "fastest", "% step", "CPU ms", "% CPU");
  double sum = 0, sum_cpu = 0;
  json arr = json::array();
  std::vector<OpRow> sorted = rows;
  std::stable_sort(sorted.begin(), sorted.end(), [](const OpRow& a, const OpRow& b) { return a.step_cpu_ms() > b.step_cpu_ms(); });
  for (const OpRow& r : sorted) {
    sum += r.step_ms(), sum_cpu += r.step_cpu_ms();
    std::printf("  %-28s %5d %8.3f %8.3f %9.2f %6.1f%% %9.2f %6.1f%% %9.2f %6.1f%%\n", r.name.c_str(), r.count,
                r.fwd.median, r.bwd.median, r.step_ms(), 100 * r.step_ms() / step_ms, r.step_min_ms(),
                100 * r.step_min_ms() / step_min_ms, r.step_cpu_ms(), 100 * r.step_cpu_ms() / step_cpu_ms);
    arr.push_back({{"op", r.name}, {"calls", r.count}, {"fwd_ms", r.fwd.median}, {"bwd_ms", r.bwd.median},
                   {"fwd_min_ms", r.fwd.min}, {"bwd_min_ms", r.bwd.min}, {"fwd_cpu_ms", r.fwd.cpu},
                   {"bwd_cpu_ms", r.bwd.cpu}, {"ms_per_step", r.step_ms()},
                   {"pct_of_step", 100 * r.step_ms() / step_ms}, {"cpu_ms_per_step", r.step_cpu_ms()},
                   {"pct_of_step_cpu", 100 * r.step_cpu_ms() / step_cpu_ms}, {"min_ms_per_step", r.step_min_ms()}});
  }
  double sum_min = 0;
  for (const OpRow& r : rows) sum_min += r.step_min_ms();
  const double other = step_ms - sum, other_cpu = step_cpu_ms - sum_cpu, other_min = step_min_ms - sum_min;
  std::printf("  %-28s %5s %8s %8s %9.2f %6.1f%% %9.2f %6.1f%% %9.2f %6.1f%%\n", "other (step − sum of ops)", "", "",
              "", other, 100 * other / step_ms, other_min, 100 * other_min / step_min_ms, other_cpu,
              100 * other_cpu / step_cpu_ms);
  out = {{"step_ms", step_ms}, {"step_cpu_ms", step_cpu_ms}, {"step_min_ms", step_min_ms}, {"ops", arr},
         {"other_ms", other}, {"sum_ops_ms", sum}, {"other_cpu_ms", other_cpu}, {"sum_ops_cpu_ms", sum_cpu},
         {"other_min_ms", other_min}, {"sum_ops_min_ms", sum_min}};
}

static std::string machine_description() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return trim(line.substr(line.find(':') + 2));
  return "unknown CPU";
}

static json mixers_cost(bool quick);  // section 7, below

static int run_full(const Options& o) {
  const auto start = Clock::now();
  json results;
  const std::vector<int> thread_list = {1, 2};
  const int max_threads = 2;
  std::string commit;
  try {
    commit = trim(run_capture("git rev-parse --short HEAD 2>/dev/null; git status --porcelain src 2>/dev/null | head -1"));
    if (commit.find('\n') != std::string::npos) commit = commit.substr(0, commit.find('\n')) + " (src/ modified)";
  } catch (...) {
  }
  char date[64];
  std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  std::string corename = blas_core(), blasconfig = "?";
#ifndef PLAINGPT_ACCELERATE
  blasconfig = openblas_get_config();
#endif
  std::printf("plaingpt benchmark%s — %s, commit %s\n", o.quick ? " (quick)" : "", date, commit.c_str());
  std::printf("machine: %s, %d cores; %s\n", machine_description().c_str(), default_threads(),
              blas_kernel().c_str());
  std::printf("load average at start: %.2f (above ~2 the machine is shared and times are inflated)\n", load_average());
  // OPENBLAS_CORETYPE set by this program's own start-up (base/runtime.h) is what a user gets; one set outside is not.
  for (const char* var : {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"})
    if (std::getenv(var) && !(std::string(var) == "OPENBLAS_CORETYPE" && !openblas_own_choice().empty()))
      std::printf("WARNING: %s is set (%s): benchmark numbers will not be representative; run through `make bench`\n",
                  var, std::getenv(var));
  results["meta"] = {{"date", date}, {"commit", commit}, {"cpu", machine_description()}, {"cores", default_threads()},
                     {"openblas_config", blasconfig}, {"openblas_core", corename},
                     {"openblas_own_choice", openblas_own_choice()}, {"quick", o.quick},
                     {"load_average_start", load_average()}};
  results["flops_formula"] =
      "per token: 6*N + 12*L*C*T, N = parameters except wpe (tied wte counted once), full TxT attention counted";

  // 1. sgemm ------------------------------------------------------------------------------------------------------
  hr();
  std::printf("1. sgemm (row-major C = A·B, threads split rows, single-threaded OpenBLAS each — as linear_forward)\n");
  struct Shape {
    const char* what;
    int M, N, K;
  };
  const std::vector<Shape> shapes = {{"tiny mlp fc  768x512x128", 768, 512, 128},
                                     {"small mlp fc 4096x1536x384", kRateM, kRateN, kRateK}};
  std::printf("  %-30s %22s %22s\n", "shape M x N x K", "1 thread median (best)", "2 threads median (best)");
  json sg = json::array();
  double machine_rate[3] = {0, 0, 0};
  for (const Shape& s : shapes) {
    Rate r[3];
    for (int t : thread_list) r[t] = sgemm_gflops(t, s.M, s.N, s.K, o.quick ? 5 : 11);
    std::printf("  %-30s %10.1f (%5.1f) GF/s %10.1f (%5.1f) GF/s\n", s.what, r[1].median, r[1].best, r[2].median,
                r[2].best);
    sg.push_back({{"shape", s.what}, {"M", s.M}, {"N", s.N}, {"K", s.K}, {"gflops_1t", r[1].median},
                  {"gflops_2t", r[2].median}, {"best_gflops_1t", r[1].best}, {"best_gflops_2t", r[2].best}});
    machine_rate[1] = r[1].median, machine_rate[2] = r[2].median;  // the large shape is "the machine's sgemm rate"
  }
  std::printf("  machine sgemm rate (the large shape, median): %.1f GFLOP/s on 1 thread, %.1f on 2\n", machine_rate[1],
              machine_rate[2]);
  results["sgemm"] = {{"shapes", sg}, {"rate_1t", machine_rate[1]}, {"rate_2t", machine_rate[2]}};
  write_json(results, o.json_path);

  // 2. training steps, each preset in its own process ----------------------------------------------------------
  hr();
  std::printf("2. training step = forward + backward + clip + AdamW, random tokens; median after warm-up; each row in a\n"
              "   fresh process (so peak RSS is that preset's). Model FLOPs/token = 6·N + 12·L·C·T (N excludes wpe)\n");
  std::printf("  %-6s %3s %5s %5s %10s %18s %9s %10s %8s %7s %8s %8s %7s\n", "preset", "thr", "split", "reps", "ms/step",
              "(min–max)",
              "CPU ms", "tokens/s", "GFLOP/s", "%sgemm", "RSS MB", "est. MB", "RSS/est");
  json steps = json::array();
  std::map<std::string, json> step_json;  // "tiny/2/ops" → that run's report
  const std::string exe = self_exe();
  struct StepRun {
    const char* preset;
    int threads;
    const char* env;    // extra environment for the child ("" = none)
    const char* split;  // --threads-split: auto is ./train's default; ops is what section 3's breakdown adds up
  };
  std::vector<StepRun> runs = {{"tiny", 1, "", "auto"},      {"tiny", 2, "", "auto"},
                               {"tiny", 2, "", "ops"},       {"tiny", 2, "OMP_WAIT_POLICY=ACTIVE", "auto"},
                               {"small", 1, "", "auto"},     {"small", 2, "", "auto"},
                               {"small", 2, "", "ops"}};
  for (const StepRun& run : runs) {
    {
      const char* name = run.preset;
      const int t = run.threads;
      const bool small = std::string(name) == "small";
      if (o.quick && small && t == 1) continue;
      const int warmup = small ? 1 : (o.quick ? 3 : 5);
      const int reps = small ? (o.quick ? 1 : (t == 1 ? 2 : 3)) : (o.quick ? 10 : 30);
      const std::string cmd = std::string(*run.env ? "env " : "") + run.env + " " + exe + " --step " + name +
                              " --threads " + std::to_string(t) + " --threads-split " + run.split + " --warmup " +
                              std::to_string(warmup) + " --repeats " + std::to_string(reps);
      json r = json::parse(run_capture(cmd));
      r["env"] = run.env;
      const std::vector<double> ms = r["ms"];
      const double med = r["median_ms"], gf = r["gflops"], rss = r["peak_rss_mb"], est = r["estimate_mb"];
      char range[64];
      std::snprintf(range, sizeof range, "(%.1f–%.1f)", *std::min_element(ms.begin(), ms.end()),
                    *std::max_element(ms.begin(), ms.end()));
      const std::string split = r["threads_split"];
      std::printf("  %-6s %3d %5s %5d %10.2f %18s %9.1f %10.0f %8.1f %6.1f%% %8.1f %8.1f %7.2f\n", name, t,
                  t == 1 ? "-" : split.c_str(), reps, med, range,
                  (double)r["median_cpu_ms"], (double)r["tokens_per_s"], gf, 100 * gf / machine_rate[t], rss, est,
                  rss / est);
      if (*run.env) std::printf("  %-6s     └ the row above's child ran with %s (idle threads spin instead of sleeping)\n", "", run.env);
      r["pct_of_sgemm"] = 100 * gf / machine_rate[t];
      steps.push_back(r);
      if (!*run.env) step_json[std::string(name) + "/" + std::to_string(t) + "/" + run.split] = r;
      std::fflush(stdout);
    }
  }
  results["training_steps"] = steps;
  write_json(results, o.json_path);

  // 3. per-op breakdown -------------------------------------------------------------------------------------------
  hr();
  std::printf("3. per-op breakdown: each op of one step timed on its own on buffers of the step's shapes, × calls per step,\n"
              "   vs the measured step (section 2). Ops run warm in cache here; \"other\" = step − sum of ops\n");
  json breakdowns = json::array();
  struct BD {
    const char* name;
    int threads;
  };
  std::vector<BD> bds = {{"tiny", 1}, {"tiny", 2}};
  if (!o.quick) bds.push_back({"small", 2});  // a small step's ops take ~one step per repeat: the full run only
  for (const BD& bd : bds) {
    BenchPreset p = get_preset(bd.name);
    const bool small = p.name == "small";
    // tiny: warm-up call, then repeats for ≥ 3 calls and ~100 ms per op; small: two calls each, no warm-up (each
    // op takes 10–1000 ms, so one call is its own warm-up as far as timers go)
    std::vector<OpRow> rows = small ? op_breakdown(p.model, p.batch, p.model.block_size, bd.threads, 2, 0, false)
                                    : op_breakdown(p.model, p.batch, p.model.block_size, bd.threads, 3,
                                                   o.quick ? 30 : 100, true);
    const std::string key = p.name + "/" + std::to_string(bd.threads) + (bd.threads == 1 ? "/auto" : "/ops");
    json j;
    if (!step_json.count(key)) continue;
    print_breakdown(std::string(bd.name) + " preset, " + std::to_string(bd.threads) + " thread(s)", rows,
                    step_json[key], j);
    j["preset"] = bd.name, j["threads"] = bd.threads;
    breakdowns.push_back(j);
    std::fflush(stdout);
  }
  results["breakdown"] = breakdowns;
  write_json(results, o.json_path);

  // 4. sampling ---------------------------------------------------------------------------------------------------
  hr();
  const int n_sample = 500;
  std::printf("4. sampling: %d tokens through Decoder (KV cache, window slides at block_size), tiny model,\n"
              "   temperature 0.8, top-k 40, top-p 0.95, against the bound measured here\n", n_sample);
  results["sampling"] = sampling_against_bound(o.quick ? 3 : 5, n_sample, o.quick ? 3 : 5);
  write_json(results, o.json_path);
  std::fflush(stdout);

  // 5. cost growth ------------------------------------------------------------------------------------------------
  hr();
  BenchPreset tiny = get_preset("tiny");
  std::printf("5. cost growth: tiny model (%d layers, %d wide), %d threads; attention = fwd+bwd of all layers from\n"
              "   per-op timing; its share of the step shows where T² takes over\n",
              tiny.model.n_layer, tiny.model.n_embd, max_threads);
  std::printf("  %-12s %5s %5s %10s %10s %9s %13s %8s %10s %8s\n", "sweep", "B", "T", "ms/step", "CPU ms", "tokens/s",
              "attention ms", "attn %", "attn % CPU", "GFLOP/s");
  json growth = json::array();
  std::vector<int> blocks = {64, 128, 256, 512, 1024};
  if (o.quick) blocks.pop_back();
  std::vector<std::pair<int, int>> points;  // (B, T)
  for (int T : blocks) points.push_back({tiny.batch, T});
  for (int B : {4, 8, 16, 32}) points.push_back({B, 64});
  for (size_t i = 0; i < points.size(); i++) {
    const int B = points[i].first, T = points[i].second;
    ModelConfig c = tiny.model;
    c.block_size = T;
    const double tokens = (double)B * T;
    const int reps = tokens >= 6000 ? (o.quick ? 1 : 3) : (o.quick ? 3 : 10);
    StepTimes st = time_training_steps(c, B, max_threads, tokens >= 6000 ? 1 : 2, reps);
    // only the attention op is needed here
    set_threads(max_threads);
    const int C = c.n_embd, NH = c.n_head;
    Rng rng(13);
    std::vector<float> qkv = randn((size_t)B * T * 3 * C, 1, rng), lse((size_t)B * NH * T), out((size_t)B * T * C);
    std::vector<float> dout = randn(out.size(), 1e-3f, rng), dqkv(qkv.size());
    const float scale = 1.0f / std::sqrt((float)(C / NH));
    const AttentionMask causal;
    const Timing at = measure([&] {
      attention_forward(out.data(), lse.data(), qkv.data(), causal, scale, B, T, C, NH);
      attention_backward(dqkv.data(), dout.data(), qkv.data(), lse.data(), out.data(), causal, scale, B, T, C, NH);
    }, o.quick ? 2 : 3, 50, o.quick ? 50 : 150);
    const double att = at.median * c.n_layer, att_cpu = at.cpu * c.n_layer;
    const double gf = tokens * flops_per_token(c, T) / 1e9 / (st.median_ms / 1000);
    const char* sweep = i < blocks.size() ? "block size" : "batch";
    std::printf("  %-12s %5d %5d %10.2f %10.2f %9.0f %13.2f %7.1f%% %9.1f%% %8.1f\n", sweep, B, T, st.median_ms,
                st.median_cpu_ms, tokens / (st.median_ms / 1000), att, 100 * att / st.median_ms,
                100 * att_cpu / st.median_cpu_ms, gf);
    growth.push_back({{"sweep", sweep}, {"B", B}, {"T", T}, {"ms_per_step", st.median_ms},
                      {"cpu_ms_per_step", st.median_cpu_ms}, {"tokens_per_s", tokens / (st.median_ms / 1000)},
                      {"attention_ms", att}, {"attention_cpu_ms", att_cpu}, {"attention_pct", 100 * att / st.median_ms},
                      {"attention_pct_cpu", 100 * att_cpu / st.median_cpu_ms}, {"gflops", gf}});
    std::fflush(stdout);
  }
  results["growth"] = growth;
  write_json(results, o.json_path);

  // 6. attention alone ------------------------------------------------------------------------------------------
  // One thread, so the growth with T is the kernel's own and not the scheduler's; CPU time (in parentheses) is the
  // steadier number on a busy machine.
  hr();
  const int AB = 4, att_threads = 1;
  std::printf("6. attention forward+backward alone: B=%d, C=%d, %d heads, %d thread; ms wall median (CPU ms)\n", AB,
              tiny.model.n_embd, tiny.model.n_head, att_threads);
  std::printf("  %6s %18s %18s %18s %12s %14s\n", "T", "full", "causal", "window:32", "causal/full",
              "window µs / T");
  json att_table = json::array();
  std::vector<int> Ts = {64, 128, 256, 512, 1024};
  if (o.quick) Ts.pop_back();
  set_threads(att_threads);
  for (int T : Ts) {
    const int C = tiny.model.n_embd, NH = tiny.model.n_head;
    Rng rng(17);
    std::vector<float> qkv = randn((size_t)AB * T * 3 * C, 1, rng), lse((size_t)AB * NH * T), out((size_t)AB * T * C);
    std::vector<float> dout = randn(out.size(), 1e-3f, rng), dqkv(qkv.size());
    const float scale = 1.0f / std::sqrt((float)(C / NH));
    Timing tm[3];
    const AttentionMask masks[3] = {AttentionMask::parse("bidirectional"), AttentionMask::parse("causal"),
                                    AttentionMask::parse("window:32")};
    for (int m = 0; m < 3; m++)
      tm[m] = measure([&] {
        attention_forward(out.data(), lse.data(), qkv.data(), masks[m], scale, AB, T, C, NH);
        attention_backward(dqkv.data(), dout.data(), qkv.data(), lse.data(), out.data(), masks[m], scale, AB, T, C, NH);
      }, 3, 100, o.quick ? 40 : 150);
    char cell[3][40];
    for (int m = 0; m < 3; m++) std::snprintf(cell[m], sizeof cell[m], "%8.3f (%7.3f)", tm[m].median, tm[m].cpu);
    std::printf("  %6d %18s %18s %18s %12.2f %14.2f\n", T, cell[0], cell[1], cell[2], tm[1].cpu / tm[0].cpu,
                1000 * tm[2].cpu / T);
    att_table.push_back({{"T", T}, {"full_ms", tm[0].median}, {"causal_ms", tm[1].median}, {"window32_ms", tm[2].median},
                         {"full_cpu_ms", tm[0].cpu}, {"causal_cpu_ms", tm[1].cpu}, {"window32_cpu_ms", tm[2].cpu}});
    std::fflush(stdout);
  }
  results["attention_only"] = {{"B", AB}, {"C", tiny.model.n_embd}, {"n_head", tiny.model.n_head},
                               {"threads", att_threads}, {"rows", att_table}};
  hr();
  results["mixers"] = mixers_cost(o.quick);

  const double total_s = ms_since(start) / 1000;
  results["meta"]["wall_s"] = total_s;
  results["meta"]["load_average_end"] = load_average();
  write_json(results, o.json_path);
  hr();
  std::printf("wrote %s in %.0f s\n", o.json_path.c_str(), total_s);
  return 0;
}

// ---- 7. every mixer kind: cost per token against T, alternated -------------------------------------------
// The tiny model at block size T with every layer of one kind, for each kind the registry holds (softmax, linear,
// Mamba with H = 4 heads of P = 2C/4 = 64 channels, N = 16, K = 4, RWKV-7 with D = 32, …), one thread. The kinds
// are timed in turn within each round (a training step of each, then decoding with each, then the next round), so
// load that comes and goes on a shared machine falls on all of them alike; every number is the median over the
// rounds.
//   train µs/token   one training step (forward, zero_grad, backward, clip, AdamW) at B = 4, / (4·T)
//   decode µs/token  Decoder::push for the tokens at context lengths T/2 … T−1 after pushing the first T/2
//                    (no slide): softmax reads its key/value cache, the others update a fixed state
//   state floats     what one layer keeps while decoding at context T (Mixer::state_floats): softmax 2·C·T,
//                    linear H·(HS² + HS)... (its z is C = H·HS), Mamba H·P·N + (K−1)·(E + 2N), RWKV-7 C + H·N²
static json mixers_cost(bool quick) {
  BenchPreset tiny = get_preset("tiny");
  std::vector<std::string> kinds;
  for (const MixerKind* kind : mixer_kinds()) kinds.push_back(kind->name);
  const int K = (int)kinds.size(), B = 4, rounds = quick ? 2 : 5;
  std::printf("7. every mixer kind, cost per token against T: tiny model (%d layers, %d wide, %d heads), 1 thread, "
              "B = %d, µs per token (median of %d alternated rounds); x/%s is the ratio to %s\n",
              tiny.model.n_layer, tiny.model.n_embd, tiny.model.n_head, B, rounds, kinds[0].c_str(), kinds[0].c_str());
  std::printf("  %5s | %-8s | %9s %9s %9s | %9s %9s\n", "T", "kind", "train", "decode", "state", "train x/", "dec x/");
  set_threads(1);
  json rows = json::array();
  std::vector<int> Ts = {64, 128, 256, 512, 1024};
  if (quick) Ts.pop_back();
  for (int T : Ts) {
    struct Contender {
      std::unique_ptr<GPT> model;
      std::unique_ptr<Replicas> one;  // the model alone (one thread here)
      AdamW optimizer;
      std::unique_ptr<Learner> learner;
      std::vector<double> train_us, decode_us;
      size_t state = 0;
    };
    std::vector<Contender> cs(K);
    Rng rng(29);
    const std::vector<int> x = random_tokens((size_t)B * T, tiny.model.vocab_size, rng),
                           y = random_tokens(x.size(), tiny.model.vocab_size, rng),
                           toks = random_tokens(T, tiny.model.vocab_size, rng);
    TrainConfig acfg;  // AdamW at its defaults, on a 2000-step schedule
    acfg.optimizer = "adamw";
    acfg.steps = 2000;
    const TrainPlan plan = plan_training(acfg);
    for (int k = 0; k < K; k++) {
      ModelConfig c = tiny.model;
      c.block_size = T, c.mixer = kinds[k];
      cs[k].model = std::make_unique<GPT>(c);
      cs[k].model->init_weights(3);
      cs[k].one = std::make_unique<Replicas>(*cs[k].model, 1);
      cs[k].learner.reset(new Learner{*cs[k].one, plan.optimizer->kind, cs[k].optimizer});
      cs[k].state = cs[k].model->mixer(0).state_floats(cs[k].model->masks()[0]);
    }
    auto step = [&](Contender& ct, int i) {
      if (!train_step(*ct.learner, acfg, i, {x.data(), y.data(), B, T}).updated)
        throw std::runtime_error("benchmark step diverged");
    };
    for (Contender& ct : cs) step(ct, 0);  // warm-up: buffers, optimizer state
    for (int r = 0; r < rounds; r++) {
      for (Contender& ct : cs) {
        const auto t0 = Clock::now();
        step(ct, r + 1);
        ct.train_us.push_back(1000 * ms_since(t0) / (B * T));
      }
      for (Contender& ct : cs) {
        Decoder dec(*ct.model);
        for (int t = 0; t < T / 2; t++) dec.push(toks[t]);
        const auto t0 = Clock::now();
        for (int t = T / 2; t < T; t++) dec.push(toks[t]);
        ct.decode_us.push_back(1000 * ms_since(t0) / (T - T / 2));
      }
    }
    json row = {{"T", T}};
    const double tr0 = median(cs[0].train_us), de0 = median(cs[0].decode_us);
    for (int k = 0; k < K; k++) {
      const double tr = median(cs[k].train_us), de = median(cs[k].decode_us);
      std::printf("  %5d | %-8s | %9.1f %9.1f %9zu | %9.2f %9.2f\n", T, kinds[k].c_str(), tr, de, cs[k].state,
                  tr / tr0, de / de0);
      row["train_us_per_token_" + kinds[k]] = tr;
      row["decode_us_per_token_" + kinds[k]] = de;
      row["state_floats_per_layer_" + kinds[k]] = cs[k].state;
      row["train_us_rounds_" + kinds[k]] = cs[k].train_us;
      row["decode_us_rounds_" + kinds[k]] = cs[k].decode_us;
    }
    std::fflush(stdout);
    rows.push_back(row);
  }
  return {{"B", B}, {"threads", 1}, {"rounds", rounds}, {"kinds", kinds}, {"rows", rows},
          {"load_average_end", load_average()}};
}

// A chart described in JSON (the fields of Chart and Series in src/lab/plot.h), rendered to SVG.
static void plot_chart(const std::string& json_path, const std::string& svg_path) {
  std::ifstream in(json_path);
  if (!in) throw std::runtime_error(json_path + ": cannot read");
  const json j = json::parse(in);
  Chart chart;
  chart.title = j.value("title", ""), chart.x_label = j.value("x_label", ""), chart.y_label = j.value("y_label", "");
  chart.log_x = j.value("log_x", false);
  for (const json& s : j.at("series")) {
    Series series;
    series.label = s.at("label").get<std::string>();
    series.x = s.at("x").get<std::vector<double>>(), series.y = s.at("y").get<std::vector<double>>();
    if (series.x.size() != series.y.size()) throw std::runtime_error(json_path + ": series '" + series.label +
                                                                       "' has x and y of different lengths");
    series.colour = s.value("colour", -1), series.dashed = s.value("dashed", false);
    chart.series.push_back(series);
  }
  std::ofstream out(svg_path);
  out << render_svg(chart);
  if (!out) throw std::runtime_error(svg_path + ": cannot write");
}

static void usage() {
  std::printf(
      "usage: bench [--quick] [--json PATH]          the full benchmark (tables + JSON)\n"
      "       bench --step tiny|small --threads N [--threads-split batch|ops|auto] [--warmup W] [--repeats R]\n"
      "                                                  one preset's step, one JSON line\n"
      "       bench --sample --threads N [-n TOKENS] [--repeats R]             sampling speed, one JSON line\n"
      "       bench --sample-bound [--rounds R] [-n TOKENS] [--repeats R]      sampling against the sgemv bound\n"
      "       bench --muon --threads N [--repeats R]  the tiny preset's optimizer step alone (Muon + AdamW), one JSON line\n"
      "       bench --blas                               the OpenBLAS kernels this program runs, one JSON line\n"
      "       bench --sgemm-rate --threads N [--repeats R]  the machine's sgemm rate (section 1's large shape), one\n"
      "                                                  JSON line (bench/compare.py: a step's share of it)\n"
      "       bench --split [--threads N] [--quick]      batch-split against op-split threads, step ms by shape\n"
      "       bench --mixers [--quick] [--json PATH]     every mixer kind, alternated, cost per token against T\n"
      "       bench --plot CHART.json OUT.svg            draw a chart (bench/frontier.py)\n"
      "BENCH_QUICK=1 in the environment is the same as --quick.\n");
}

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  try {
    Options o;
    if (const char* q = std::getenv("BENCH_QUICK")) o.quick = *q && std::string(q) != "0";
    std::string step_preset, split = "auto";
    bool sample = false, sample_bound = false, split_only = false, mixers_only = false,
         muon_only = false, json_given = false;
    bool sgemm_rate = false;
    int threads = 2, warmup = -1, repeats = -1, n = 500, rounds = 5;
    for (int i = 1; i < argc; i++) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--plot") {
        const std::string chart = value(), svg = value();
        plot_chart(chart, svg);
        return 0;
      }
      if (a == "--quick") o.quick = true;
      else if (a == "--json") o.json_path = value(), json_given = true;
      else if (a == "--step") step_preset = value();
      else if (a == "--sample") sample = true;
      else if (a == "--sample-bound") sample_bound = true;
      else if (a == "--muon") muon_only = true;
      else if (a == "--sgemm-rate") sgemm_rate = true;
      else if (a == "--blas") {
        // The kernels this program runs and who chose them, for bench/compare.py to give the twin the same.
        const std::string own = openblas_own_choice();
        const json r = {{"blas", blas_kernel()}, {"core", blas_core()}, {"openblas_own_choice", own},
                        {"chosen_by", own.empty() ? (std::getenv("OPENBLAS_CORETYPE") ? "environment" : "OpenBLAS")
                                                  : "plaingpt"}};
        std::printf("%s\n", r.dump().c_str());
        return 0;
      }
      else if (a == "--rounds") rounds = std::stoi(value());
      else if (a == "--split") split_only = true;
      else if (a == "--mixers") mixers_only = true;
      else if (a == "--threads") threads = std::stoi(value());
      else if (a == "--threads-split") split = value();
      else if (a == "--warmup") warmup = std::stoi(value());
      else if (a == "--repeats") repeats = std::stoi(value());
      else if (a == "-n") n = std::stoi(value());
      else if (a == "-h" || a == "--help") return usage(), 0;
      else throw std::runtime_error("unknown argument '" + a + "' (see --help)");
    }
    if (threads < 1) throw std::runtime_error("--threads must be ≥ 1");
    if (!step_preset.empty()) {
      const bool small = step_preset == "small";
      json r = step_report(step_preset, threads, warmup >= 0 ? warmup : (small ? 1 : 5),
                           repeats > 0 ? repeats : (small ? 3 : 30), split);
      std::printf("%s\n", r.dump().c_str());
      return 0;
    }
    if (sgemm_rate) {
      const Rate r = sgemm_gflops(threads, kRateM, kRateN, kRateK, repeats > 0 ? repeats : 11);
      const json out = {{"impl", "plaingpt"}, {"blas_core", blas_core()}, {"threads", threads},
                        {"shape", {kRateM, kRateN, kRateK}}, {"gflops", r.median}, {"best_gflops", r.best}};
      std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    if (muon_only) {
      std::printf("%s\n", muon_step_report(threads, repeats > 0 ? repeats : 50).dump().c_str());
      return 0;
    }
    if (split_only) {
      split_crossover(threads, o.quick);
      return 0;
    }
    if (mixers_only) {
      std::printf("machine load average %.1f\n", load_average());
      const json r = mixers_cost(o.quick);
      const std::string path = json_given ? o.json_path : "build/bench/mixers.json";  // not the full run's file
      std::ofstream(path) << r.dump(1) << "\n";
      std::printf("wrote %s\n", path.c_str());
      return 0;
    }
    if (sample_bound) {
      std::printf("machine load average %.1f; sampling %d tokens, tiny model; %s\n", load_average(), n,
                  blas_kernel().c_str());
      json r = sampling_against_bound(rounds, n, repeats > 0 ? repeats : 5);
      r["blas_core"] = blas_core();
      r["load_average_end"] = load_average();
      std::printf("%s\n", r.dump().c_str());
      return 0;
    }
    if (sample) {
      const double tps = sampling_tokens_per_s(threads, n, repeats > 0 ? repeats : 5);
      json r = {{"impl", "plaingpt"}, {"blas_core", blas_core()}, {"threads", threads}, {"tokens", n}, {"tokens_per_s", tps},
                {"method", "KV cache (Decoder)"}, {"peak_rss_mb", peak_rss_mb()}};
      std::printf("%s\n", r.dump().c_str());
      return 0;
    }
    return run_full(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: error: %s\n", e.what());
    return 1;
  }
}
