// Filling blanks with a masked-LM (BERT-style) model, most confident blank first: every blank starts as [MASK];
// each round runs the model over the whole text (both sides visible), picks the blank whose best character is
// the most probable, writes that character in, and runs again, until no blank is left.
#pragma once
#include <vector>

class GPT;

// ids: the text with mask_token at each blank (at most block_size tokens). Only character tokens
// (ids < num_chars) are ever written. Returns the filled ids.
std::vector<int> fill_blanks(GPT& model, std::vector<int> ids, int mask_token, int num_chars);
