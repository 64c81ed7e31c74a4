// The corpus: a UTF-8 text file read whole, split 90/10 into train and validation token streams, and random
// windows of T+1 tokens cut from them: x = window[0:T], y = window[1:T+1] (y is x shifted by one).
#pragma once
#include <string>
#include <vector>

#include "data/tokenizer.h"

class Rng;

struct Corpus {
  std::string path;
  Tokenizer tokenizer;
  std::vector<int> train, val;
};

// Reads and decodes `path`; throws with the file name on a missing, empty or invalid-UTF-8 file.
std::u32string read_text_file(const std::string& path);
// Builds the vocabulary from the text itself.
Corpus load_corpus(const std::string& path, double val_fraction = 0.1);
// Uses an existing vocabulary (a resumed run); a character outside it is an error naming it.
Corpus load_corpus(const std::string& path, const Tokenizer& tokenizer, double val_fraction = 0.1);
// Throws unless both splits hold at least T+1 tokens, with the numbers and what to change.
void check_corpus_fits(const Corpus& corpus, int T);

// Fills x and y, each (B, T), with B windows starting at uniformly random offsets of `tokens`.
void sample_batch(const std::vector<int>& tokens, int B, int T, Rng& rng, int* x, int* y);
