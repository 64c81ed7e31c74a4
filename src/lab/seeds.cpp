#include "lab/seeds.h"

#include <cmath>
#include <cstdio>

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / v.size();
}

double sample_sd(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double mean = mean_of(v);
  double squares = 0;
  for (double x : v) squares += (x - mean) * (x - mean);
  return std::sqrt(squares / (v.size() - 1));
}

std::string mean_spread(const std::vector<double>& v, const char* format) {
  char buf[96];
  std::snprintf(buf, sizeof buf, format, mean_of(v));
  std::string out = buf;
  if (v.size() < 2) return out;
  std::snprintf(buf, sizeof buf, format, sample_sd(v));
  return out + " ± " + buf;
}
