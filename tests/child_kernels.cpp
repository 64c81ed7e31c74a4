// The programs the tests start (./train, ./sample, ./inspect) run the OpenBLAS kernels this test process runs.
// A program left to itself may choose other kernels at start-up (src/base/runtime.h: on a CPU its OpenBLAS does not
// know), and tests that compare a child's numbers with this process's own, to the last printed digit, would then
// compare two kernels' roundings. So, unless the environment already names a core, this process names its own for
// every child; the tests of that choice (test_kernel_choice.cpp) remove the variable for their children.
#include <cstdlib>

#include "base/blas.h"

namespace {
#ifdef PLAINGPT_OPENBLAS
[[maybe_unused]] const bool children_share_kernels = [] { return setenv("OPENBLAS_CORETYPE", openblas_get_corename(), 0) == 0; }();
#endif
}  // namespace
