// One knob for the threads: OpenMP runs our loops and splits every matrix product between its threads; OpenBLAS
// runs single-threaded inside each of them. Two pools that each assume they own every core would oversubscribe
// a small machine.
#pragma once

int default_threads();          // the number of cores OpenMP sees
void set_threads(int threads);  // OpenMP threads; OpenBLAS is set to 1 thread per caller
