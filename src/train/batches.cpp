#include "train/batches.h"

void RunBatches::start(Objective objective, float mlm_rate, int B, int T, Rows rows) {
  B_ = B;
  T_ = T;
  rows_ = rows;
  mask_token_ = corpus.tokenizer.special_id(kMaskToken);
  maker_ = std::make_unique<BatchMaker>(objective, mlm_rate, mask_token_, corpus.tokenizer.num_chars());
}

void RunBatches::allocate() {
  const size_t tokens = (size_t)B_ * T_;
  x_.resize(tokens);
  y_.resize(tokens);
  fixed_x_.resize(tokens);
  fixed_y_.resize(tokens);
}

BatchView RunBatches::next(Replicas& replicas) {
  const int prefix = maker_->next(corpus.train, B_, T_, rng_, x_.data(), y_.data());
  if (prefix >= 0) replicas.set_prefix_length(prefix);
  const size_t first = (size_t)rows_.begin * T_;  // this process's rows of the batch
  return {x_.data() + first, y_.data() + first, rows_.count(), T_};
}

void RunBatches::draw_fixed(uint64_t seed) {
  Rng rng(seed);
  fixed_prefix_ = maker_->next(corpus.val, B_, T_, rng, fixed_x_.data(), fixed_y_.data());
}
