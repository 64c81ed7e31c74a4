// One place that knows where cblas_sgemm comes from: OpenBLAS on Linux (tools/deps.sh checks that it is OpenBLAS,
// not just any cblas.h), Accelerate on macOS.
#pragma once
#ifdef PLAINGPT_ACCELERATE
#include <Accelerate/Accelerate.h>
#else
#include <cblas.h>
#endif
