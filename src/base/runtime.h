// Two choices the environment makes before main() runs, made by the programs for a user who has not made them.
// Both are read once, when a library loads, so the program sets them and restarts itself once with the same
// arguments (execv of /proc/self/exe). Call choose_runtime first thing in main(), before MPI_Init: under mpirun
// every process then does the same. A user's own setting is always kept; PLAINGPT_RESTARTED marks the restarted
// process, which never restarts again (it removes the mark, so the programs it starts see the user's environment
// plus the two choices). Off Linux, or if the restart fails, nothing changes.
//
// OMP_WAIT_POLICY=passive: how idle OpenMP threads wait between parallel regions. libgomp lets them spin by
// default. On a 2-core machine that runs anything else, a spinning thread holds a core that the thread doing the
// work needs, and every one of the ~150 parallel regions of a training step then waits for the scheduler
// (measured: a tiny-preset step 4× slower than with passive waiting while a compiler ran beside it; about 13%
// faster than passive on an idle machine). An explicit OMP_WAIT_POLICY (e.g. active, for a dedicated machine) is
// kept.
//
// OPENBLAS_CORETYPE: the OpenBLAS kernels, when OpenBLAS chose a core older than the CPU's vector units because it
// does not know the CPU (base/blas_kernel.h). The restarted process checks that OpenBLAS took the core and says on
// standard error, in one line, what it chose and how to override.
#pragma once

#include <string>

void choose_runtime(char** argv);

// The BLAS and its kernels, for a run's header: "OpenBLAS 0.3.21 with its SkylakeX kernels (…)".
std::string blas_kernel();
// The kernels that run ("SkylakeX"; "" without OpenBLAS), and the core OpenBLAS chose on its own when this process
// set OPENBLAS_CORETYPE instead of it ("" when OpenBLAS's choice or the user's stands).
std::string blas_core();
std::string openblas_own_choice();
