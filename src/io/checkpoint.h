// Checkpoints: one safetensors file. The weights carry Hugging Face GPT-2 names ("wte.weight",
// "h.0.attn.c_attn.weight", …; linear weights [in, out]) and each mixer kind's own names ("h.0.mamba.A_log", …);
// "__metadata__" holds the model's settings (model_settings(): the shared ones and each mixer kind's, e.g.
// ssm_state), the vocabulary, the masks, the mixer kind of every layer ("mixer": one of the registered kinds,
// softmax, linear, mamba, …, or a per-layer list; absent = softmax; files written before it was renamed call it
// "attention") and the format version (3: the header's bytes are covered by a checksum too, safetensors.h). A
// checkpoint written during training also holds AdamW's m and v (as
// "optimizer.m.<name>", "optimizer.v.<name>"; under --optimizer muon, m holds Muon's momentum for its tensors and
// v zeros, optim/muon.h) plus the step and the batch sampler's state, so --resume continues the run exactly.
// Files are written atomically, and the loader checks everything it reads.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "model/model.h"
#include "data/objective.h"
#include "data/tokenizer.h"

constexpr const char* kCheckpointFormat = "plaingpt";
// Version 3 (this one) carries checksums of the header and of the data and must match both; the header's covers
// its every byte and the data's checksum (safetensors.h), so any flipped bit of the header is reported as header
// damage. Version 2 carried a checksum of the header's canonical text that left the data's checksum out; those
// files still load, verified the same way. From version 2 on, metadata keys are parsed strictly: an unknown key is
// refused by name (a renamed setting's old key is known: files written before the rename hold it), and so is a
// missing key that every file has held (the sizes, the vocabulary, the masks). A setting newer than the file is
// missing from it and takes the value every earlier file meant (its row's `absent`, or its default), in every
// version; Checkpoint::defaulted_settings lists them. Version 1 files (written before the header checksum existed)
// still load, with Checkpoint::notes saying they cannot be verified.
constexpr int kCheckpointVersion = 3;

// What a checkpoint holds beyond the model: enough to continue training where it stopped.
struct ResumeState {
  int step = 0;               // optimizer steps taken
  std::string batch_rng;      // Rng::state() of the batch sampler
  std::string train_config;   // the run's settings as JSON (see trainer.h)
  AdamW optimizer;
};

// `resume` may be null: a weights-only checkpoint (for sampling and sharing). `objective` tells the programs
// that load it how the model is meant to be used (an MLM model fills blanks).
void save_checkpoint(const std::string& path, const GPT& model, const Tokenizer& tokenizer,
                     const ResumeState* resume, Objective objective = Objective::CLM);

struct Checkpoint {
  std::unique_ptr<GPT> model;
  Tokenizer tokenizer;
  std::map<std::string, std::string> metadata;
  Objective objective = Objective::CLM;
  bool resumable = false;  // holds optimizer state
  ResumeState resume;
  // Model settings the file's metadata lacks (it predates them): they hold their rows' `absent` values or their
  // defaults (model/config.h).
  std::vector<std::string> defaulted_settings;
  // One line each for the user about a file that loads as it is: it could not be fully verified (format 1), a
  // setting is stored under its old name ("metadata key 'attention' is now 'mixer'").
  std::vector<std::string> notes;
};

// Prints ckpt.notes to stderr, each as "note: …", escaped.
void print_checkpoint_notes(const Checkpoint& ckpt);

// Throws std::runtime_error naming the file and what is wrong with it; never returns a half-loaded model.
Checkpoint load_checkpoint(const std::string& path);

// Where a run's checkpoint lives: out_dir + "/ckpt.safetensors".
std::string checkpoint_path(const std::string& out_dir);
// What --ckpt and --resume accept: a checkpoint file, or an output directory holding ckpt.safetensors.
std::string resolve_checkpoint(const std::string& file_or_dir);
