// ./train — trains a character-level GPT on a UTF-8 text file and writes checkpoints.
//   ./train --preset tiny --data data/stories.txt --out out/tiny
//   ./train --resume out/tiny --steps 4000        (continue a run, with its own settings, to step 4000)
// Every setting's flag, help line, checkpoint key and range is one row of train_settings() (src/train/settings.cpp).
#include <cstdio>
#include <cxxopts.hpp>

#include "base/threads.h"
#include "io/checkpoint.h"
#include "train/trainer.h"

static std::string directory_of(const std::string& file) {
  size_t slash = file.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
}

// Resuming continues the checkpoint's own run: its model, optimizer and schedule. Only the settings whose row is
// a Knob (paths, step count, logging, threads) or this invocation's may be given; --steps may extend the run.
static void resume(const cxxopts::ParseResult& flags) {
  const std::string file = resolve_checkpoint(flags["resume"].as<std::string>());
  Checkpoint ckpt = load_checkpoint(file);
  if (!ckpt.resumable) throw std::runtime_error(file + ": holds weights only (no optimizer state); cannot resume");
  std::vector<std::string> missing;
  TrainConfig config = train_config_from_json(ckpt.resume.train_config, file, &missing);
  for (const Setting<TrainConfig>& s : train_settings()) {
    for (const std::string& key : missing)
      if (s.key && key == s.key)
        std::printf("note: %s was written before the setting '%s' existed: it keeps the default %s\n", file.c_str(),
                    s.key, setting_text(s, config).c_str());
    if (s.scope == Scope::Run && flags.count(s.flag))
      throw std::runtime_error(std::string("--") + s.flag + " cannot be changed when resuming (the run continues " +
                               "with the settings stored in " + file + ")");
  }
  if (flags.count("preset"))
    throw std::runtime_error("--preset cannot be changed when resuming (the run continues with the settings stored in " +
                             file + ")");
  if (!flags.count("out")) config.out = directory_of(file);
  apply_flags(flags, train_settings(), config);
  if (config.steps < ckpt.resume.step)
    throw std::runtime_error("--steps (" + std::to_string(config.steps) + ") is below the checkpoint's step (" +
                             std::to_string(ckpt.resume.step) + ")");
  run_training(config, &ckpt);
}

int main(int argc, char** argv) {
  prefer_passive_waiting(argv);  // see threads.h: restarts once with OMP_WAIT_POLICY=passive unless it is set
  cxxopts::Options options("train", "Train a character-level GPT on a UTF-8 text file. Defaults are the tiny preset's.");
  options.add_options()
    ("preset", "tiny (4 layers, 128 wide, block 64, batch 12) or small (6 layers, 384 wide, block 256, batch 64)",
     cxxopts::value<std::string>()->default_value("tiny"))
    ("resume", "continue from a checkpoint file or an output directory", cxxopts::value<std::string>());
  add_flags(options, train_settings(), preset("tiny"));
  options.add_options()("h,help", "show this help");
  try {
    cxxopts::ParseResult flags = options.parse(argc, argv);
    if (flags.count("help")) {
      std::printf("%s\n", options.help().c_str());
      return 0;
    }
    if (!flags.unmatched().empty()) throw std::runtime_error("unexpected argument '" + flags.unmatched()[0] + "'");
    if (flags.count("mask") && flags.count("layer-masks")) throw std::runtime_error("give --mask or --layer-masks, not both");
    if (flags.count("attention") && flags.count("layer-attention"))
      throw std::runtime_error("give --attention or --layer-attention, not both");
    if (flags.count("attention") && flags["attention"].as<std::string>().find(',') != std::string::npos)
      throw std::runtime_error("--attention takes one kind for every layer (softmax or linear); use --layer-attention "
                               "for a list");
    if (flags.count("resume")) {
      resume(flags);
      return 0;
    }
    TrainConfig config = preset(flags["preset"].as<std::string>());
    apply_flags(flags, train_settings(), config);
    run_training(config);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train: error: %s\n", e.what());
    return 1;
  }
}
