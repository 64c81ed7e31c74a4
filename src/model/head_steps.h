// One head's computation at one position, step by step, as a kind without queries and keys tells it
// (MixerLab::head_steps; the explorer's /api/head draws it, docs/explore.md). Each step is a piece of the kind's
// math in the order the forward runs it, with the textbook function that computes it, and what it gives at that
// position for that head. The numbers are recomputed in double precision from the forward's saved activations and
// the weights, the state carried from position 0, so `output` is the head's share of the output projection's input
// (model/head_shares.h) computed the textbook's way; the explorer shows it beside the model's own float one.
#pragma once
#include <cmath>
#include <string>
#include <utility>
#include <vector>

struct HeadStep {
  std::string name;      // what the step is, e.g. "decay"
  std::string math;      // its formula, plain text
  std::string textbook;  // the textbook function that computes it
  std::string file;      // the textbook's file
  // What the step gives at this position for this head, each a scalar (one number) or a vector of the head's
  // channels, in the order the formula names them.
  std::vector<std::pair<std::string, std::vector<double>>> values;
};

struct HeadSteps {
  std::vector<HeadStep> steps;  // empty: the kind tells none (the attention family's are drawn from MixerLab::qkv)
  std::vector<double> output;   // the head's share of the output projection's input, recomputed
};

// ‖S‖_F, the size of a state the steps show by its norm rather than its N × N numbers.
inline double frobenius_norm(const std::vector<double>& S) {
  double sum = 0;
  for (double s : S) sum += s * s;
  return std::sqrt(sum);
}
