// Writes the checkpoint fuzzer's seed corpus: real checkpoints from save_checkpoint, small enough (a few KB) for
// the fuzzer to mutate quickly, covering weights-only and resumable files, every objective, per-layer masks,
// special tokens and a Chinese vocabulary, plus the two checksum cases: one data bit flipped after writing (refused)
// and a format-1 file without the checksums (as older versions wrote them; loaded), and a format-1 copy of every
// seed (a format-2 header the fuzzer edits is refused by its checksum, so these let the edits reach the metadata
// checks). Usage: make_seeds <output directory>
//
// `make_seeds --specs <directory>` writes the spec parsers' seeds that follow the code (the training settings as
// to_json writes them today), so a seed never lags behind a new field; `make fuzz-seeds` runs both into fuzz/corpus.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "train/trainer.h"
#include "data/utf8.h"

static void write_seed(const std::string& dir, const std::string& name, const std::string& corpus_utf8,
                       int n_layer, int n_head, int n_embd, int block, const std::string& mask, Objective objective,
                       bool resumable) {
  Tokenizer tokenizer = Tokenizer::from_text(utf8_decode(corpus_utf8, name));
  if (objective == Objective::MLM) tokenizer.add_special(kMaskToken);
  ModelConfig config;
  config.n_layer = n_layer, config.n_head = n_head, config.n_embd = n_embd, config.block_size = block;
  config.vocab_size = tokenizer.size();
  GPT model(config, parse_layer_masks(mask, n_layer));
  model.init_weights(7);
  TrainConfig settings = preset("tiny");
  settings.model = config;
  settings.objective = to_string(objective);
  settings.mask = mask;
  ResumeState state;
  state.step = 3;
  state.batch_rng = "123456789";
  state.train_config = checkpoint_json(settings);  // as the trainer writes it
  state.optimizer.m.assign(model.num_params(), 0.25f);
  state.optimizer.v.assign(model.num_params(), 0.5f);
  state.optimizer.t = 3;
  save_checkpoint(dir + "/" + name + ".safetensors", model, tokenizer, resumable ? &state : nullptr, objective);
}

static std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

static void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// The checkpoint `from` as format 1 wrote it: without the checksum keys. The loader accepts it (with a note), so
// the fuzzer's edits of such a header reach the metadata checks instead of stopping at the header's checksum.
static void write_format_1(const std::string& from, const std::string& to) {
  const std::string bytes = read_bytes(from);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)bytes[i];
  nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  header["__metadata__"].erase(kDataChecksumKey);
  header["__metadata__"].erase(kHeaderChecksumKey);
  header["__metadata__"]["format_version"] = "1";
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; i++) out[i] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  write_bytes(to, out + text + bytes.substr(8 + n));
}

// From the checkpoint `from`: `flipped` with one data bit changed after writing (the loader must refuse it) and
// `stripped` as format 1 without the checksum keys (the loader must accept it, as an older file).
static void write_checksum_seeds(const std::string& from, const std::string& flipped, const std::string& stripped) {
  std::string bytes = read_bytes(from);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | (unsigned char)bytes[i];
  std::string bad = bytes;
  bad[8 + n + 1] = char(bad[8 + n + 1] ^ 0x01);  // the low mantissa bits of the first float
  write_bytes(flipped, bad);
  write_format_1(from, stripped);
}

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--specs") {
    const std::string dir = argv[2];
    try {
      // The first byte chooses the parser in fuzz/entries.h's spec_entry: 5 = the saved training settings.
      write_bytes(dir + "/train_config_tiny", "\x05" + to_json(preset("tiny")));
      TrainConfig mlm = preset("small");
      mlm.objective = "mlm", mlm.mask = "bidirectional", mlm.model.no_mlp = true, mlm.model.attn_scale = "inv";
      write_bytes(dir + "/train_config_small_mlm", "\x05" + to_json(mlm));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "make_seeds: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <output directory> | make_seeds --specs <output directory>\n");
    return 2;
  }
  const std::string dir = argv[1];
  try {
    write_seed(dir, "clm_weights", "ab", 1, 1, 1, 1, "causal", Objective::CLM, false);
    write_seed(dir, "clm_resumable", "the cat.\n", 1, 1, 2, 3, "causal", Objective::CLM, true);
    write_seed(dir, "mlm_chinese", "猫坐在垫子上。", 1, 2, 2, 2, "bidirectional", Objective::MLM, false);
    write_seed(dir, "prefix_layers", "ab🙂", 2, 1, 1, 2, "prefix:0,window:2", Objective::PrefixLM, true);
    write_checksum_seeds(dir + "/clm_resumable.safetensors", dir + "/checksum-one-bit-flipped.safetensors",
                         dir + "/checksum-absent.safetensors");
    for (const char* name : {"clm_weights", "clm_resumable", "mlm_chinese", "prefix_layers"})
      write_format_1(dir + "/" + name + ".safetensors", dir + "/" + name + "_format1.safetensors");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
