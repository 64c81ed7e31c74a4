// Data-parallel training over MPI: N processes ("ranks") train one model. Each computes the gradient of its own
// slice of the batch; one all-reduce adds the slices' gradients up, so every rank holds the gradient of the whole
// batch and takes the same optimizer step. The parameters never travel: they start equal (same seed, or the same
// checkpoint) and stay equal because every rank applies the same update to them.
//
//   global batch of B windows, drawn by every rank from the same seeded stream (so exactly the windows one
//   process would draw, and --resume restores the stream whatever N is)
//        │  rank r keeps rows [r·B/N, (r+1)·B/N)          (uneven when N does not divide B; B < N is refused)
//        ▼
//   forward + backward on its rows: loss_r = mean over its n_r targets,  g_r = ∂loss_r/∂θ
//        │  the batch's loss is the mean over all n = Σ n_r targets, so its gradient is Σ_r (n_r/n)·g_r:
//        ▼  each rank scales g_r by n_r/n, then MPI_Allreduce(SUM) of the whole gradient arena
//   g = Σ_r (n_r/n)·g_r on every rank → clip → the optimizer step, identical everywhere
//
// Weighting by target counts, not 1/N, keeps it exact when the slices are uneven or hold different numbers of
// targets (MLM and prefix-LM leave some positions without one); with N dividing B and every position a target
// (CLM), n_r/n is 1/N. Evaluation losses are reduced the same way, per batch.
//
// Only rank 0 prints, writes metrics.csv and checkpoints. Every kCheckEvery steps (reducer.h) and before every checkpoint the
// ranks compare a checksum of their parameters and stop with an error if they differ.
//
// Without MPI (built without Open MPI, or ./train started without mpirun) there is one rank and every function
// here is the identity: rows [0, B), sums of one term, no communication.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/span.h"
#include "data/dataset.h"
#include "train/reducer.h"
#include "train/train_config.h"

namespace dist {

// Call first thing in main (after anything that re-executes the program), and finalize() before a normal exit.
// MPI is started only when mpirun (or another PMIx launcher) started this process; a program built without MPI
// and started by mpirun with more than one process refuses to run (each copy would train alone and they would
// all write the same checkpoint).
void init(int* argc, char*** argv);
void finalize();
bool built_with_mpi();

int rank();            // 0 … size()−1
int size();            // processes in the job
inline bool is_root() { return rank() == 0; }
int local_size();      // processes of this job on this machine (MPI_Comm_split_type SHARED)

// Ends every process of the job with `code`, after this one's error message is printed: MPI_Abort, so no rank
// is left waiting in a collective for one that has gone. Without MPI, plain exit.
[[noreturn]] void abort_job(int code);

// Threads per process when --threads is 0: the machine's cores shared out among this job's processes on it, and
// no more than the cores this process may run on (mpirun may bind each rank to one core).
int default_threads();

// ---- the batch slice -----------------------------------------------------------------------------------------

Rows rows_of(int rank, int size, int B);  // [rank·B/size, (rank+1)·B/size); throws when 1 < size and B < size
Rows my_rows(int B);                      // rows_of(rank(), size(), B)

// ---- reductions ----------------------------------------------------------------------------------------------

void sum(double* values, int n);  // in place: each value becomes its sum over the ranks
void sum(std::vector<double>& values);
bool any(bool flag);              // true on every rank when true on one (a stop request)

// After the backward on this rank's rows: `grads` holds ∂(mean loss over its `targets` targets)/∂θ and `loss`
// that mean. On return `grads` holds the gradient of the whole batch's mean loss, on every rank, and the result
// is that loss. One rank: returns `loss`, `grads` untouched.
float allreduce_gradients(Span<float> grads, float loss, int targets);
// MPI counts are ints: arrays longer than INT_MAX elements are all-reduced in chunks.
void allreduce_sum(float* values, size_t n);

// ---- parameters stay identical -------------------------------------------------------------------------------

// A 64-bit checksum of the exact bits of `values`: Σ (bits_i + 1)·(2i + 1)·φ mod 2⁶⁴, which changes when any
// bit of any value changes (each term's multiplier is odd, hence invertible mod 2⁶⁴), and sums in any order.
uint64_t checksum(Span<const float> values);
// Throws, naming the step, if the ranks' parameters are not bit-for-bit the same.
void check_same_parameters(Span<const float> params, int step);

// ---- agreement before the first step -------------------------------------------------------------------------

// Every rank must train the same thing: the same settings (all that a checkpoint stores, but the paths, --threads
// and --log-every, which may differ per machine), the same --stop-at, vocabulary, corpus (size and CRC-32C of its
// tokens), step, batch sampler state and parameters. Called once before any other collective: each rank hashes each
// item, the hashes are gathered, and on a difference every rank throws, naming the first rank that differs from
// rank 0, the first item it differs on and this rank's value. Ranks that disagreed used to run silently, corrupt
// the heap inside MPI_Allreduce (different parameter counts) or blame the all-reduce. One process: returns.
void check_agreement(const TrainConfig& config, const Corpus& corpus, int step, const std::string& batch_rng,
                     Span<const float> params);

// ---- the trainer's reducer (train/reducer.h) ------------------------------------------------------------------

// What ./train hands run_training: with mpirun, each process's rows, allreduce_gradients, sums over the ranks,
// rank 0 alone writing; with one process, one_process(), where every call is the identity.
const Reducer& reducer();

}  // namespace dist
