// libFuzzer target (c): the spec parsers behind command-line flags and checkpoint metadata — AttentionMask::parse,
// parse_layer_masks, parse_objective, preset, Tokenizer::from_vocab, train_config_from_json. The first input
// byte chooses the parser (byte % 6); see entries.h.
#include "entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzentry::spec_entry(data, size);
  return 0;
}
