// One knob for both thread pools: OpenMP (our loops) and OpenBLAS (sgemm). Leaving them to pick independently
// oversubscribes a small machine: each assumes it owns every core.
#pragma once

int default_threads();          // the number of cores OpenMP sees
void set_threads(int threads);  // OpenMP and OpenBLAS both use exactly this many
