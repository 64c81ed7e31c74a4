#include "data/dataset.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <sys/stat.h>

#include "base/read_file.h"
#include "base/rng.h"
#include "data/utf8.h"

std::u32string read_text_file(const std::string& path) {
  // On Linux a folder opens and reads as empty; say what it is instead of "the file is empty".
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw std::runtime_error(path + ": is a folder, not a text file (name a UTF-8 text file inside it)");
  // A regular file only, read to the size it had when opened: /dev/zero would fill the memory, a FIFO would block.
  std::string text = read_regular_file(path);
  if (text.empty()) throw std::runtime_error(path + ": the file is empty");
  return utf8_decode(text, path);
}

static Corpus split(const std::string& path, Tokenizer tokenizer, const std::u32string& text, double val_fraction) {
  Corpus corpus{path, std::move(tokenizer), {}, {}};
  std::vector<int> ids = corpus.tokenizer.encode(text, path);
  size_t n_train = (size_t)((1.0 - val_fraction) * ids.size());
  corpus.train.assign(ids.begin(), ids.begin() + n_train);
  corpus.val.assign(ids.begin() + n_train, ids.end());
  return corpus;
}

Corpus load_corpus(const std::string& path, double val_fraction) {
  std::u32string text = read_text_file(path);
  return split(path, Tokenizer::from_text(text), text, val_fraction);
}

Corpus load_corpus(const std::string& path, const Tokenizer& tokenizer, double val_fraction) {
  return split(path, tokenizer, read_text_file(path), val_fraction);
}

void check_corpus_fits(const Corpus& corpus, int T) {
  auto check = [&](const char* name, const std::vector<int>& tokens) {
    if ((long)tokens.size() < (long)T + 1)
      throw std::runtime_error(corpus.path + ": the " + name + " split has " + std::to_string(tokens.size()) +
                               " characters, fewer than block_size + 1 = " + std::to_string(T + 1) +
                               "; use a longer text (the split is 90/10) or a smaller --block");
  };
  check("training", corpus.train);
  check("validation", corpus.val);
}

void sample_batch(const std::vector<int>& tokens, int B, int T, Rng& rng, int* x, int* y) {
  const int starts = (int)(tokens.size() - T);  // windows of T+1 tokens: offsets 0 … size−T−1
  for (int b = 0; b < B; b++) {
    const int* window = tokens.data() + rng.below(starts);
    for (int t = 0; t < T; t++) {
      x[b * T + t] = window[t];
      y[b * T + t] = window[t + 1];
    }
  }
}
