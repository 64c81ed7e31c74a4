// libFuzzer target (b): utf8_decode against a reference validator, then Tokenizer::from_text, encode, decode and
// the vocabulary's checkpoint round trip; see entries.h.
#include "entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzzentry::text_entry(data, size);
  return 0;
}
