// Summaries over training seeds: the experiments' tables show mean ± sample standard deviation.
#pragma once
#include <string>
#include <vector>

double mean_of(const std::vector<double>& v);
// Sample standard deviation (n − 1 in the denominator); 0 for fewer than two values.
double sample_sd(const std::vector<double>& v);
// "2.273" for one value (printf `format` applied to the mean); "2.273 ± 0.012" for several.
std::string mean_spread(const std::vector<double>& v, const char* format);
