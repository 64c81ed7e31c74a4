// The output folder of a run (--out): created and proven writable before training starts. What may be written into
// it (one run per folder, nothing replaced by accident) is io/run_folder.h; metrics.csv is train/metrics_file.h.
#pragma once
#include <cstdio>
#include <string>

// Creates out_dir (and its parents) and proves it is writable before any training starts, so a bad --out fails in
// the first second instead of at the first checkpoint. Throws naming --out.
void prepare_output_dir(const std::string& dir);
