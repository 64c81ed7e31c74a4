#include "io/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "io/safetensors.h"
#include "model/mixers/registry.h"
#include "model/params.h"
#include "data/utf8.h"

#include <sys/stat.h>

static const char* kAdamM = "optimizer.m.";
static const char* kAdamV = "optimizer.v.";

void save_checkpoint(const std::string& path, const GPT& model, const Tokenizer& tokenizer,
                     const ResumeState* resume, Objective objective) {
  std::vector<TensorView> tensors;
  for (const TensorSpec& t : model.table()) tensors.push_back({t.name, t.shape, model.params_memory().data() + t.offset});
  const ModelConfig& c = model.config;
  ModelConfig stored = c;
  stored.mixer = canonical_mixers(c);
  std::map<std::string, std::string> meta = settings_to_metadata(model_settings(), stored);  // n_layer, …
  meta.insert({
      {"format", kCheckpointFormat},
      {"format_version", std::to_string(kCheckpointVersion)},
      {"vocab", tokenizer.vocab_utf8()},
      {"specials", nlohmann::json(tokenizer.specials()).dump()},
      {"mask", masks_to_string(model.masks())},
      {"objective", to_string(objective)},
  });
  if (resume) {
    if (resume->optimizer.m.size() != model.params_memory().size())
      throw std::runtime_error(path + ": optimizer state does not match the model");
    for (const TensorSpec& t : model.table()) {
      tensors.push_back({kAdamM + t.name, t.shape, resume->optimizer.m.data() + t.offset});
      tensors.push_back({kAdamV + t.name, t.shape, resume->optimizer.v.data() + t.offset});
    }
    meta["step"] = std::to_string(resume->step);
    meta["adam_t"] = std::to_string(resume->optimizer.t);
    meta["batch_rng"] = resume->batch_rng;
    meta["train_config"] = resume->train_config;
  }
  write_safetensors(path, tensors, meta);
}

namespace {
// Reads metadata fields with messages that name the file and the field.
struct MetadataReader {
  const std::string& path;
  const std::map<std::string, std::string>& meta;

  // Fields added after version 1 first shipped fall back to the value every earlier file meant.
  std::string text_or(const std::string& key, const std::string& fallback) const {
    auto it = meta.find(key);
    return it == meta.end() ? fallback : it->second;
  }
  const std::string& text(const std::string& key) const {
    auto it = meta.find(key);
    if (it == meta.end()) throw std::runtime_error(path + ": metadata field '" + key + "' is missing");
    return it->second;
  }
  int integer(const std::string& key, int min_value = 0) const {
    const std::string& s = text(key);
    bool digits = !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(s) < min_value)
      throw std::runtime_error(path + ": metadata field '" + key + "' should be a whole number ≥ " +
                               std::to_string(min_value) + ", got '" + escape_for_message(s) + "'");
    return std::stoi(s);
  }
};

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The tensor `name`, after checking that it is there with the shape the config needs.
const LoadedTensor& find_tensor(const std::string& path, const std::string& name, const std::vector<int64_t>& shape,
                                const std::map<std::string, LoadedTensor>& tensors) {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw std::runtime_error(path + ": tensor '" + name + "' is missing");
  if (it->second.shape != shape)
    throw std::runtime_error(path + ": tensor '" + name + "' has shape " + shape_string(it->second.shape) +
                             ", the config needs " + shape_string(shape));
  return it->second;
}

// Copies one tensor into the arena after checking its shape and that every value is finite (and, for a second
// moment, not negative: Adam's v is a mean of squares, and √v of a negative v is NaN).
void copy_tensor(const std::string& path, const std::string& name, const std::vector<int64_t>& shape,
                 const std::map<std::string, LoadedTensor>& tensors, float* dst, bool non_negative = false) {
  const std::vector<float>& data = find_tensor(path, name, shape, tensors).data;
  for (size_t i = 0; i < data.size(); i++) {
    if (!std::isfinite(data[i]))
      throw std::runtime_error(path + ": tensor '" + name + "' holds a non-finite value at index " + std::to_string(i));
    if (non_negative && data[i] < 0)
      throw std::runtime_error(path + ": tensor '" + name + "' holds a negative value at index " + std::to_string(i) +
                               " (" + std::to_string(data[i]) + "), but it is a mean of squares: the file is damaged");
  }
  std::copy(data.begin(), data.end(), dst);
}

// The metadata every checkpoint has carried since version 1: without them a file is not a model.
const std::set<std::string>& always_written_keys() {
  static const std::set<std::string> keys = {"format",  "format_version", "vocab",      "specials", "mask",
                                             "n_layer", "n_head",         "n_embd",     "block_size", "vocab_size"};
  return keys;
}

// Format 2 and later are strict about what they do not know: every key is one this program writes (a flipped bit in a key
// name must not be read as a setting that happens to be missing). The header's checksum has been verified before
// this runs, so a key this program does not know was written by a newer program, and the message says so. A known key may be missing: the file predates its
// setting, and the setting takes the value every earlier file meant (the row's `absent`, or its default), as in
// format 1 — this is what lets a new setting be its field and its row alone. The header's checksum covers the
// metadata, so a key lost to damage is caught there, not here. What every file has always held must be there.
void check_keys_strictly(const std::string& path, const std::map<std::string, std::string>& meta, bool resumable) {
  static const std::set<std::string> model_keys = [] {
    std::set<std::string> keys = always_written_keys();
    keys.insert("objective");
    for (const std::string& key : stored_keys(model_settings())) keys.insert(key);  // n_layer, …, and old names
    return keys;
  }();
  static const std::set<std::string> resume_keys = {"step", "adam_t", "batch_rng", "train_config"};
  for (const auto& entry : meta)
    if (!model_keys.count(entry.first) && !resume_keys.count(entry.first))
      throw std::runtime_error(path + ": metadata key '" + escape_for_message(entry.first) +
                               "' is a setting this program does not know: the checkpoint was written by a newer "
                               "plaingpt (its header's checksum holds, so it is not damage); update this program to "
                               "read it");
  for (const std::set<std::string>* keys : {&always_written_keys(), resumable ? &resume_keys : nullptr})
    for (const std::string& key : keys ? *keys : std::set<std::string>{})
      if (!meta.count(key)) throw std::runtime_error(path + ": metadata field '" + key + "' is missing");
}
}  // namespace

// The most tensors a checkpoint of this program holds: the deepest model n_layer's row allows, of the kind whose
// layer has the most tensors, with AdamW's m and v beside each. A header that lists more is refused as soon as the
// parse meets one more (a legal header of 1.6 million empty entries, 96 MB, is no checkpoint of this program).
static size_t max_checkpoint_tensors() {
  static const size_t most = [] {
    const auto& rows = model_settings();
    const auto n_layer = std::find_if(rows.begin(), rows.end(), [](const auto& row) {
      return row.key == std::string("n_layer");
    });
    size_t model_tensors = 0;
    size_t layer_tensors = 0;
    for (const MixerKind* kind : mixer_kinds()) {
      ModelConfig one_layer;
      one_layer.n_layer = 1;
      one_layer.mixer = kind->name;
      std::vector<std::unique_ptr<Mixer>> mixer;
      mixer.push_back(kind->make(one_layer));  // not make_layer_mixers: no model is being built
      const std::vector<TensorSpec> table = gpt_tensor_table(one_layer, mixer);
      const size_t in_layer = size_t(std::count_if(table.begin(), table.end(), [](const TensorSpec& t) {
        return t.layer == 0;
      }));
      layer_tensors = std::max(layer_tensors, in_layer);
      model_tensors = std::max(model_tensors, table.size() - in_layer);
    }
    return 3 * (model_tensors + size_t(n_layer->range.hi) * layer_tensors);
  }();
  return most;
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsContents file = read_safetensors(path, max_checkpoint_tensors());
  MetadataReader meta{path, file.metadata};
  if (meta.text("format") != kCheckpointFormat)
    throw std::runtime_error(path + ": not a plaingpt checkpoint (format '" + escape_for_message(meta.text("format")) + "')");
  const int version = meta.integer("format_version");
  if (version < 1 || version > kCheckpointVersion)
    throw std::runtime_error(path + ": checkpoint format version " + meta.text("format_version") +
                             " is not a version this program reads (1 to " + std::to_string(kCheckpointVersion) + ")");
  Checkpoint ckpt;
  const bool has_optimizer_tensors = std::any_of(file.tensors.begin(), file.tensors.end(), [](const auto& entry) {
    return entry.first.rfind(kAdamM, 0) == 0 || entry.first.rfind(kAdamV, 0) == 0;
  });
  if (version >= 2) {
    // Format 3 carries the checksum of the header's bytes, format 2 that of its canonical text (safetensors.h).
    const bool header_verified = version >= 3 ? file.header_verified : file.canonical_header_verified;
    if (!header_verified || !file.data_verified)
      throw std::runtime_error(path + ": a format-" + std::to_string(version) + " checkpoint must carry the "
                               "checksums of its header and its data, but '" +
                               (header_verified ? kDataChecksumKey
                                                : version >= 3 ? kHeaderChecksumKey : kCanonicalHeaderChecksumKey) +
                               "' is missing: the file was changed or damaged after it was written");
    check_keys_strictly(path, file.metadata, has_optimizer_tensors);
  } else if (!file.header_verified) {
    ckpt.notes.push_back(path + " is a format-1 checkpoint: its header (settings, step, tensor table) carries no checksum, "
                         "so it cannot be verified (saving it again, e.g. by --resume, writes format " +
                         std::to_string(kCheckpointVersion) + ")");
  }
  std::vector<std::string> specials;
  try {
    specials = nlohmann::json::parse(meta.text("specials")).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": metadata field 'specials' is not a JSON list of strings: " +
                             escape_for_message(e.what()));
  }
  ckpt.tokenizer = Tokenizer::from_vocab(meta.text("vocab"), specials, path);

  // The model's settings, by their table (model/config.cpp). A setting newer than the file keeps its `absent` value
  // or its default, which is what the file meant (softmax attention, 1/√d_k, MLPs), in every format version; the
  // sizes have been in every file since version 1.
  // A setting stored under its old name (a file written before it was renamed) is read under it, and said once.
  ModelConfig config;
  for (const std::string& key : always_written_keys()) meta.text(key);
  std::vector<std::string> renamed;
  try {
    ckpt.defaulted_settings = settings_from_metadata(model_settings(), file.metadata, config, &renamed);
  } catch (const std::exception& e) {
    throw std::runtime_error(path + ": metadata: " + escape_for_message(e.what()));
  }
  for (const std::string& line : renamed)
    ckpt.notes.push_back(path + ": metadata " + line + " (the file loads as it is; saving it again writes the new key)");
  if (config.vocab_size != ckpt.tokenizer.size())
    throw std::runtime_error(path + ": vocab_size is " + std::to_string(config.vocab_size) + " but the vocabulary has " +
                             std::to_string(ckpt.tokenizer.size()) + " tokens");
  std::vector<AttentionMask> masks;
  std::vector<std::unique_ptr<Mixer>> mixers;
  const std::string& mask = meta.text("mask");  // its message names the file already
  try {
    mixers = validated_mixers(config);
    masks = parse_layer_masks(mask, config.n_layer);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + escape_for_message(e.what()));
  }
  const std::string objective = meta.text_or("objective", "clm");
  try {
    ckpt.objective = parse_objective(objective);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + escape_for_message(e.what()));
  }
  if (ckpt.objective == Objective::MLM && ckpt.tokenizer.special_id(kMaskToken) < 0)
    throw std::runtime_error(path + ": an MLM checkpoint needs the " + kMaskToken + " token in its vocabulary");
  if (ckpt.tokenizer.num_chars() == 0) throw std::runtime_error(path + ": the vocabulary has no characters");
  // Every weight must be in the file with its shape before the model is allocated: the file's own size then
  // bounds the allocation, whatever sizes the metadata claims.
  for (const TensorSpec& t : gpt_tensor_table(config, mixers)) find_tensor(path, t.name, t.shape, file.tensors);
  ckpt.model = std::make_unique<GPT>(config, masks, std::move(mixers));  // the mixers made above, kept
  GPT& model = *ckpt.model;

  std::set<std::string> known;
  for (const TensorSpec& t : model.table()) {
    copy_tensor(path, t.name, t.shape, file.tensors, model.params_memory().data() + t.offset);
    known.insert(t.name);
  }
  // Any optimizer tensor makes the file a training checkpoint; then every one of them must be there.
  ckpt.resumable = has_optimizer_tensors;
  if (ckpt.resumable) {
    ResumeState& r = ckpt.resume;
    r.optimizer.m.assign(model.params_memory().size(), 0.0f);
    r.optimizer.v.assign(model.params_memory().size(), 0.0f);
    for (const TensorSpec& t : model.table()) {
      copy_tensor(path, kAdamM + t.name, t.shape, file.tensors, r.optimizer.m.data() + t.offset);
      copy_tensor(path, kAdamV + t.name, t.shape, file.tensors, r.optimizer.v.data() + t.offset, /*non_negative=*/true);
      known.insert(kAdamM + t.name);
      known.insert(kAdamV + t.name);
    }
    r.step = meta.integer("step");
    r.optimizer.t = meta.integer("adam_t");
    r.batch_rng = meta.text("batch_rng");
    r.train_config = meta.text("train_config");
  }
  for (const auto& entry : file.tensors)
    if (!known.count(entry.first))
      throw std::runtime_error(path + ": unexpected tensor '" + escape_for_message(entry.first) + "' for a model with this config");
  ckpt.metadata = std::move(file.metadata);
  return ckpt;
}

void print_checkpoint_notes(const Checkpoint& ckpt) {
  for (const std::string& note : ckpt.notes) std::fprintf(stderr, "note: %s\n", escape_for_message(note).c_str());
}

std::string checkpoint_path(const std::string& out_dir) { return out_dir + "/ckpt.safetensors"; }

std::string resolve_checkpoint(const std::string& path) {
  struct stat st;
  const bool is_dir = stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  return is_dir ? checkpoint_path(path) : path;
}
