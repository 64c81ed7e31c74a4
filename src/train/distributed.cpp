#include "train/distributed.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "data/dataset.h"
#include "data/utf8.h"
#include "io/crc32c.h"
#include "model/model.h"

#ifdef PLAINGPT_MPI
#include <mpi.h>
#endif

namespace dist {

namespace {
int g_rank = 0, g_size = 1, g_local_size = 1;
#ifdef PLAINGPT_MPI
bool g_mpi = false;  // MPI_Init ran: this process is one of an mpirun job
#endif

// mpirun tells each process its place in the job through the environment. Returns the job's size, 1 for a
// PMIx launcher that does not say it (srun --mpi=pmix), 0 when no launcher started us.
int launcher_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(name)) return std::max(1, std::atoi(v));
  return std::getenv("PMIX_RANK") ? 1 : 0;
}
}  // namespace

// ---- start and stop ------------------------------------------------------------------------------------------

bool built_with_mpi() {
#ifdef PLAINGPT_MPI
  return true;
#else
  return false;
#endif
}

void init(int* argc, char*** argv) {
  const int launched = launcher_size();
#ifdef PLAINGPT_MPI
  if (launched == 0) return;  // started without mpirun: one process, no MPI at all (exactly as a plain build)
  // FUNNELED: OpenMP threads run inside each rank, but only the main thread calls MPI.
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  g_mpi = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  MPI_Comm local;  // the processes that share this machine's memory: those that share its cores
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &g_local_size);
  MPI_Comm_free(&local);
#else
  (void)argc, (void)argv;
  if (launched > 1) {
    std::fprintf(stderr,
                 "error: this program was built without MPI, so under mpirun each of the %d processes would train "
                 "alone and all would write the same checkpoint. Install Open MPI's development package "
                 "(apt-get install libopenmpi-dev, or brew install open-mpi) and rebuild: make clean && make\n",
                 launched);
    std::exit(1);
  }
#endif
}

void finalize() {
#ifdef PLAINGPT_MPI
  if (g_mpi) MPI_Finalize();
  g_mpi = false;
#endif
}

int rank() { return g_rank; }
int size() { return g_size; }
int local_size() { return g_local_size; }

void abort_job(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
#ifdef PLAINGPT_MPI
  if (g_mpi && g_size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

int default_threads() {
  const int usable = omp_get_num_procs();  // the cores in this process's affinity mask
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int share = online > 0 ? (int)(online / local_size()) : usable;
  return std::max(1, std::min(usable, share));
}

// ---- the batch slice -----------------------------------------------------------------------------------------

Rows rows_of(int rank, int size, int B) {
  if (size > 1 && B < size)
    throw std::runtime_error("--batch " + std::to_string(B) + " is smaller than the number of processes (" +
                             std::to_string(size) + "): each process needs at least one sequence of the batch");
  // Rank r's share is B/size rounded down or up; the cut points r·B/size are the same wherever they are computed.
  Rows rows;
  rows.begin = (int)((long long)rank * B / size);
  rows.end = (int)((long long)(rank + 1) * B / size);
  return rows;
}

Rows my_rows(int B) { return rows_of(rank(), size(), B); }

// ---- reductions ----------------------------------------------------------------------------------------------

void sum(double* values, int n) {
#ifdef PLAINGPT_MPI
  if (g_size > 1) MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
  (void)values, (void)n;
#endif
}

void sum(std::vector<double>& values) { sum(values.data(), (int)values.size()); }

bool any(bool flag) {
  double v = flag ? 1 : 0;
  sum(&v, 1);
  return v > 0;
}

void allreduce_sum(float* values, size_t n) {
#ifdef PLAINGPT_MPI
  if (g_size == 1) return;
  for (size_t done = 0; done < n;) {
    const int chunk = (int)std::min<size_t>(n - done, INT_MAX);
    MPI_Allreduce(MPI_IN_PLACE, values + done, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    done += (size_t)chunk;
  }
#else
  (void)values, (void)n;
#endif
}

float allreduce_gradients(Span<float> grads, float loss, int targets) {
  if (g_size == 1) return loss;
  double totals[2] = {(double)loss * targets, (double)targets};  // Σ loss over the targets, and their number
  sum(totals, 2);
  if (totals[1] == 0) return 0.0f;  // no targets anywhere: every gradient is 0 already
  // g = Σ_r (n_r/n)·g_r: scale this rank's term, then let the all-reduce add the terms.
  const float weight = (float)(targets / totals[1]);
#pragma omp parallel for
  for (size_t i = 0; i < grads.size(); i++) grads[i] *= weight;
  allreduce_sum(grads.data(), grads.size());
  return (float)(totals[0] / totals[1]);
}

// ---- parameters stay identical -------------------------------------------------------------------------------

uint64_t checksum(Span<const float> values) {
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(values.data());
  uint64_t h = 0;
#pragma omp parallel for reduction(+ : h)
  for (size_t i = 0; i < values.size(); i++) h += (uint64_t(bits[i]) + 1) * (2 * uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull;
  return h;
}

void check_same_parameters(Span<const float> params, int step) {
#ifdef PLAINGPT_MPI
  if (g_size == 1) return;
  const uint64_t h = checksum(params);
  uint64_t range[2] = {h, ~h};  // the largest of h and of ~h: the largest and (negated) the smallest checksum
  MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (range[0] != ~range[1]) {
    char detail[160];
    std::snprintf(detail, sizeof detail, "checksums from %016llx to %016llx; this process: %016llx",
                  (unsigned long long)~range[1], (unsigned long long)range[0], (unsigned long long)h);
    throw std::runtime_error("at step " + std::to_string(step) + " the processes no longer hold the same " +
                             "parameters (" + detail + "): the all-reduce did not give every process the same " +
                             "sum. Stopping before anything is saved.");
  }
#else
  (void)params, (void)step;
#endif
}

// ---- agreement before the first step -------------------------------------------------------------------------

// Only the MPI build compares hashes (clang warns of an unused function and variable in a build without it).
#ifdef PLAINGPT_MPI
namespace {
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
}  // namespace
#endif

void check_agreement(const TrainConfig& config, const Corpus& corpus, int step, const std::string& batch_rng,
                     Span<const float> params) {
  if (g_size == 1) return;
  std::vector<std::pair<std::string, std::string>> items;  // (what, this rank's value)
  const nlohmann::json settings = settings_to_json(train_settings(), config);
  for (const auto& [key, value] : settings.items())
    if (key != "data" && key != "out" && key != "threads" && key != "log_every")
      items.push_back({"the setting '" + key + "'", value.dump()});
  items.push_back({"--stop-at", std::to_string(config.stop_at)});
  items.push_back({"the vocabulary", corpus.tokenizer.vocab_utf8() + nlohmann::json(corpus.tokenizer.specials()).dump()});
  items.push_back({"the corpus size", std::to_string(corpus.train.size()) + " + " + std::to_string(corpus.val.size())});
  const uint32_t crc = crc32c(corpus.val.data(), corpus.val.size() * sizeof(int),
                              crc32c(corpus.train.data(), corpus.train.size() * sizeof(int)));
  items.push_back({"the corpus checksum", crc32c_hex(crc)});
  items.push_back({"the step", std::to_string(step)});
  items.push_back({"the batch sampler's state", batch_rng});
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)checksum(params));
  items.push_back({"the parameters (checksum)", std::to_string(params.size()) + " values, " + hex});
#ifdef PLAINGPT_MPI
  // The item count first: an all-gather of unequal lengths would itself be the heap corruption this prevents.
  int counts[2] = {(int)items.size(), -(int)items.size()};
  MPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (counts[0] != -counts[1])
    throw std::runtime_error("the processes of this job run different versions of ./train (they compare " +
                             std::to_string(-counts[1]) + " to " + std::to_string(counts[0]) + " settings)");
  std::vector<uint64_t> mine(items.size()), all(items.size() * g_size);
  for (size_t i = 0; i < items.size(); i++) mine[i] = fnv1a(items[i].second);
  MPI_Allgather(mine.data(), (int)mine.size(), MPI_UINT64_T, all.data(), (int)mine.size(), MPI_UINT64_T,
                MPI_COMM_WORLD);
  for (int r = 1; r < g_size; r++)
    for (size_t i = 0; i < items.size(); i++)
      if (all[r * items.size() + i] != all[i]) {
        std::string value = items[i].second;
        if (value.size() > 80) value = value.substr(0, 80) + "…";
        throw std::runtime_error("process " + std::to_string(r) + " disagrees with process 0 on " + items[i].first +
                                 " (process " + std::to_string(g_rank) + " has " + escape_for_message(value) +
                                 "): every process of an mpirun job must be started with the same settings and the "
                                 "same data. Stopping before the first step.");
      }
#endif
}

// ---- the trainer's hooks -------------------------------------------------------------------------------------

namespace {
class MpiReducer final : public Reducer {
 public:
  Rows rows(int B) const override { return my_rows(B); }
  float gradients(GPT& model, float loss, int targets) const override {
    return allreduce_gradients(model.grads_memory(), loss, targets);
  }
  void sum(double* values, int n) const override { dist::sum(values, n); }
  bool any(bool flag) const override { return dist::any(flag); }
  void check_same(Span<const float> params, int step) const override { check_same_parameters(params, step); }
  void check_agreement(const TrainConfig& config, const Corpus& corpus, int step, const std::string& batch_rng,
                       Span<const float> params) const override {
    dist::check_agreement(config, corpus, step, batch_rng, params);
  }
  bool writes() const override { return is_root(); }
  int processes() const override { return size(); }
  int default_threads() const override { return dist::default_threads(); }
};
}  // namespace

const Reducer& reducer() {
  static const MpiReducer mpi;
  return size() == 1 ? one_process() : mpi;  // one process: the trainer runs exactly as without MPI
}

}  // namespace dist
