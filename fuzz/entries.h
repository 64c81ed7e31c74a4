// The fuzz entry points, shared by the libFuzzer targets (fuzz/fuzz_*.cpp) and by the regression replay in
// tests/test_hardening.cpp, so a crash input found by the fuzzer is replayed through exactly the same code.
//
// Contract of every entry: any input may be rejected with a std::exception (that is the parsers' documented way
// to say "bad input"); anything else — a crash, a sanitizer report, an exception of another type, or a broken
// invariant checked below (FUZZ_CHECK) — is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "generate/fill.h"
#include "generate/generate.h"
#include "ops/mask.h"
#include "data/objective.h"
#include "base/rng.h"
#include "io/safetensors.h"
#include "generate/sampling.h"
#include "data/tokenizer.h"
#include "train/plan.h"
#include "train/trainer.h"
#include "data/utf8.h"

namespace fuzzentry {

// A broken invariant: print what and where, then abort so libFuzzer (or the replay test's child) records a crash.
[[noreturn]] inline void check_failed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "FUZZ_CHECK failed: %s at %s:%d\n", condition, file, line);
  std::abort();
}
#define FUZZ_CHECK(condition) \
  ((condition) ? (void)0 : ::fuzzentry::check_failed(#condition, __FILE__, __LINE__))

// ---------------------------------------------------------------------------------------------------------------
// (a) checkpoints: parse_safetensors on the raw bytes, then the whole load path from a file.

// An in-memory file (memfd) reachable by a path, so load_checkpoint reads real file contents without disk I/O.
class MemoryFile {
 public:
  MemoryFile() {
    fd_ = ::memfd_create("plaingpt-fuzz", 0);
    if (fd_ < 0) std::abort();
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemoryFile() { ::close(fd_); }
  const std::string& write(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, data, size, 0) != (ssize_t)size) std::abort();
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// What ./sample does with a loaded checkpoint, briefly: the weights are finite but otherwise untrusted.
inline void use_model(Checkpoint& ckpt) {
  GPT& model = *ckpt.model;
  const int V = model.config.vocab_size;
  const int mask = ckpt.objective == Objective::MLM ? ckpt.tokenizer.special_id(kMaskToken) : -1;
  Rng rng(1);
  for (const SamplingOptions& options : {SamplingOptions{1.0f, 0, 1.0f}, SamplingOptions{}, SamplingOptions{0.0f, 1, 1.0f}})
    generate(model, {0}, 3, options, rng, mask, [&](int token) {
      FUZZ_CHECK(token >= 0 && token < V);
      ckpt.tokenizer.decode_one(token);
    });
  if (mask >= 0) {
    const std::vector<int> filled = fill_blanks(model, {mask}, mask, ckpt.tokenizer.num_chars());
    FUZZ_CHECK(filled.size() == 1 && filled[0] != mask);
  }
}

inline void checkpoint_entry(const uint8_t* data, size_t size) {
  bool parsed = false;
  try {
    SafetensorsContents contents = parse_safetensors(data, size, "fuzz");
    parsed = true;
    // The parser promises never to allocate more than the input justifies.
    size_t floats = 0;
    for (const auto& [name, tensor] : contents.tensors) {
      uint64_t count = 1;
      for (int64_t d : tensor.shape) {
        FUZZ_CHECK(d >= 0);
        count *= (uint64_t)d;
      }
      FUZZ_CHECK(count == tensor.data.size());
      floats += tensor.data.size();
    }
    FUZZ_CHECK(floats * sizeof(float) <= size);
  } catch (const std::exception&) {
  }
  // The full path: a file on "disk", read_safetensors, metadata, tokenizer, config, masks, tensors.
  static MemoryFile file;
  const std::string& path = file.write(data, size);
  try {
    Checkpoint ckpt = load_checkpoint(path);
    FUZZ_CHECK(parsed);  // load_checkpoint accepted what parse_safetensors rejected?
    FUZZ_CHECK(ckpt.model != nullptr);
    FUZZ_CHECK(ckpt.model->config.vocab_size == ckpt.tokenizer.size());
    FUZZ_CHECK((int)ckpt.model->masks().size() == ckpt.model->config.n_layer);
    // What was loaded can be written back; this is what ./train --resume and sharing a model do.
    const std::string text = ckpt.tokenizer.vocab_utf8();
    FUZZ_CHECK(Tokenizer::from_vocab(text, ckpt.tokenizer.specials(), "fuzz").size() == ckpt.tokenizer.size());
    use_model(ckpt);
  } catch (const std::bad_alloc&) {
    // The input is at most a few KB (-max_len); a loader that needs gigabytes for it trusted a size it had not
    // checked against the file (the fuzzer's -malloc_limit_mb reports the same thing with the allocation's stack).
    FUZZ_CHECK(!"load_checkpoint tried to allocate far more memory than the file justifies");
  } catch (const std::exception&) {
  }
}

// ---------------------------------------------------------------------------------------------------------------
// (b) UTF-8 and the tokenizer.

// An independent UTF-8 validator written from the Unicode standard's table of well-formed byte sequences
// (Table 3-7), to check utf8_decode against. Returns the offset of the first ill-formed sequence, or npos.
inline size_t reference_first_invalid(std::string_view s) {
  size_t i = 0;
  const auto in = [&](size_t k, unsigned lo, unsigned hi) {
    return k < s.size() && (unsigned char)s[k] >= lo && (unsigned char)s[k] <= hi;
  };
  while (i < s.size()) {
    const unsigned b = (unsigned char)s[i];
    size_t n = 0;
    if (b <= 0x7F) n = 1;
    else if (b >= 0xC2 && b <= 0xDF) n = in(i + 1, 0x80, 0xBF) ? 2 : 0;
    else if (b == 0xE0) n = in(i + 1, 0xA0, 0xBF) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) n = in(i + 1, 0x80, 0xBF) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if (b == 0xED) n = in(i + 1, 0x80, 0x9F) && in(i + 2, 0x80, 0xBF) ? 3 : 0;
    else if (b == 0xF0) n = in(i + 1, 0x90, 0xBF) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    else if (b >= 0xF1 && b <= 0xF3) n = in(i + 1, 0x80, 0xBF) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    else if (b == 0xF4) n = in(i + 1, 0x80, 0x8F) && in(i + 2, 0x80, 0xBF) && in(i + 3, 0x80, 0xBF) ? 4 : 0;
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

inline void text_entry(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const size_t bad = reference_first_invalid(bytes);
  std::u32string text;
  try {
    text = utf8_decode(bytes, "fuzz");
  } catch (const std::runtime_error& e) {
    FUZZ_CHECK(bad != std::string_view::npos);  // rejected valid UTF-8
    const std::string expected = "fuzz: invalid UTF-8 at byte offset " + std::to_string(bad) + ":";
    FUZZ_CHECK(std::string(e.what()).rfind(expected, 0) == 0);  // names the first bad sequence
    return;
  }
  FUZZ_CHECK(bad == std::string_view::npos);  // accepted invalid UTF-8
  FUZZ_CHECK(utf8_encode(text) == bytes);      // decoding loses or changes nothing
  for (char32_t c : text) FUZZ_CHECK(is_valid_code_point(c));

  const Tokenizer tokenizer = Tokenizer::from_text(text);  // must not throw: every code point is valid
  const std::vector<int> ids = tokenizer.encode(text, "fuzz");
  FUZZ_CHECK(ids.size() == text.size());
  FUZZ_CHECK(tokenizer.decode(ids) == bytes);
  // The vocabulary survives the checkpoint round trip, with a special token appended.
  Tokenizer stored = Tokenizer::from_vocab(tokenizer.vocab_utf8(), {"[MASK]"}, "fuzz");
  FUZZ_CHECK(stored.num_chars() == tokenizer.num_chars() && stored.size() == tokenizer.size() + 1);
  FUZZ_CHECK(stored.decode_one(stored.size() - 1) == "[MASK]");
  for (int id = 0; id < tokenizer.num_chars(); id++) {
    const std::string one = tokenizer.decode_one(id);
    FUZZ_CHECK(stored.decode_one(id) == one);
    FUZZ_CHECK(!describe_code_point(utf8_decode(one, "fuzz")[0]).empty());
  }
  // A tokenizer built from the first half of the text either encodes the second half or names a character.
  if (text.size() >= 2) {
    const Tokenizer half = Tokenizer::from_text(std::u32string_view(text).substr(0, text.size() / 2));
    try {
      const std::vector<int> rest = half.encode(std::u32string_view(text).substr(text.size() / 2), "fuzz");
      for (int id : rest) FUZZ_CHECK(id >= 0 && id < half.size());
    } catch (const std::runtime_error& e) {
      FUZZ_CHECK(std::string(e.what()).find("is not in the model's vocabulary") != std::string::npos);
    }
  }
  try {
    tokenizer.decode_one(tokenizer.size());
    FUZZ_CHECK(false);
  } catch (const std::out_of_range&) {
  }
}

// ---------------------------------------------------------------------------------------------------------------
// (c) command-line and metadata spec parsers. The first byte chooses the parser (and a small number where one is
// needed); the rest is the text.

inline void spec_entry(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const uint8_t selector = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (selector % 6) {
      case 0: {  // --mask
        const AttentionMask m = AttentionMask::parse(text);
        FUZZ_CHECK(AttentionMask::parse(m.to_string()) == m);
        FUZZ_CHECK(m.size >= 0);
        // Every query sees a non-empty run of keys that includes itself (the softmax divides by their sum).
        for (int T = 1; T <= 9; T++)
          for (int i = 0; i < T; i++) {
            const KeyRange r = m.keys_for(i, T);
            FUZZ_CHECK(0 <= r.begin && r.begin <= i && i < r.end && r.end <= T);
          }
        break;
      }
      case 1: {  // --layer-masks, and the "mask" field of a checkpoint
        const int n_layer = 1 + (selector / 6) % 8;
        const std::vector<AttentionMask> masks = parse_layer_masks(text, n_layer);
        FUZZ_CHECK((int)masks.size() == n_layer);
        FUZZ_CHECK(parse_layer_masks(masks_to_string(masks), n_layer) == masks);
        break;
      }
      case 2: {  // --objective
        const Objective o = parse_objective(text);
        FUZZ_CHECK(parse_objective(to_string(o)) == o);
        FUZZ_CHECK(!AttentionMask::parse(default_mask(o)).to_string().empty());
        break;
      }
      case 3: {  // --preset
        const TrainConfig c = preset(text);
        plan_training(c);
        break;
      }
      case 4: {  // the "vocab" and "specials" fields of a checkpoint: vocabulary, then NUL-separated specials
        std::vector<std::string> parts;
        size_t start = 0;
        while (true) {
          const size_t nul = text.find('\0', start);
          parts.push_back(text.substr(start, nul == std::string::npos ? std::string::npos : nul - start));
          if (nul == std::string::npos) break;
          start = nul + 1;
        }
        const std::vector<std::string> specials(parts.begin() + 1, parts.end());
        const Tokenizer t = Tokenizer::from_vocab(parts[0], specials, "fuzz");
        FUZZ_CHECK(t.vocab_utf8() == parts[0]);
        FUZZ_CHECK(t.specials() == specials);
        FUZZ_CHECK(t.size() == t.num_chars() + (int)specials.size());
        const std::u32string chars = utf8_decode(parts[0], "fuzz");
        for (size_t i = 0; i < chars.size(); i++) FUZZ_CHECK(t.id_of(chars[i]) == (int)i);
        for (size_t i = 0; i < specials.size(); i++) {
          FUZZ_CHECK(t.special_id(specials[i]) == t.num_chars() + (int)i);
          FUZZ_CHECK(t.decode_one(t.num_chars() + (int)i) == specials[i]);
        }
        break;
      }
      case 5: {  // the "train_config" field of a resumable checkpoint (./train --resume)
        const TrainConfig c = train_config_from_json(text, "fuzz");
        plan_training(c);
        FUZZ_CHECK(to_json(train_config_from_json(to_json(c), "fuzz")) == to_json(c));
        break;
      }
    }
  } catch (const std::exception&) {
  }
}

}  // namespace fuzzentry
