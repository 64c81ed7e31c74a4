// ./train — trains a character-level GPT on a UTF-8 text file and writes checkpoints.
//   ./train --preset tiny --data data/stories.txt --out out/tiny
//   ./train --resume out/tiny --steps 4000        (continue a run, with its own settings, to step 4000)
//   mpirun -np 2 ./train --preset small …         (one run over 2 processes: docs/distributed.md)
// Every setting's flag, help line, checkpoint key and range is one row of a table: the run's in run_settings()
// (src/train/train_config.cpp), the model's in model_settings() (src/model/config.cpp); train_settings() is both.
#include <sys/stat.h>

#include <cstdio>
#include <new>
#include <cxxopts.hpp>

#include "base/program_flags.h"
#include "base/runtime.h"
#include "base/threads.h"
#include "io/checkpoint.h"
#include "io/run_folder.h"
#include "lab/attention_stats.h"
#include "model/mixers/registry.h"
#include "train/distributed.h"
#include "train/plan.h"
#include "train/trainer.h"
#include "data/utf8.h"

// Both name the same existing folder.
static bool same_folder(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static std::string directory_of(const std::string& file) {
  size_t slash = file.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
}

// --print-settings: the settings a run would use, as its checkpoint will store them, without training. Tools that
// need a preset's recipe (bench/torch_twin.py) ask for it this way instead of keeping a copy.
static bool print_settings(const cxxopts::ParseResult& flags, const TrainConfig& config) {
  if (!flags.count("print-settings")) return false;
  plan_training(config);  // refused as the run would refuse it
  std::printf("%s\n", to_json(config).c_str());
  return true;
}

// What ./train plugs into the loop: the data-parallel reducer (one process unless mpirun started us) and the
// 1/√d_k lab's attention statistics as extra metrics.csv columns (docs/lab.md).
static TrainHooks hooks() {
  TrainHooks h;
  h.reducer = &dist::reducer();
  h.columns = {attention_stats_header, attention_stats_empty_cells, measure_attention_cells};
  return h;
}

// Resuming continues the checkpoint's own run: its model, optimizer and schedule. Only the settings whose row is
// a Knob (paths, step count, logging, threads) or this invocation's may be given; --steps may extend the run.
static void resume(const cxxopts::ParseResult& flags) {
  const std::string file = resolve_checkpoint(flags["resume"].as<std::string>());
  Checkpoint ckpt = load_checkpoint(file);
  print_checkpoint_notes(ckpt);
  if (!ckpt.resumable) throw std::runtime_error(file + ": holds weights only (no optimizer state); cannot resume");
  std::vector<std::string> missing;
  TrainConfig config = train_config_from_json(ckpt.resume.train_config, file, &missing, &ckpt.model->config);
  missing.insert(missing.end(), ckpt.defaulted_settings.begin(), ckpt.defaulted_settings.end());
  for (const Setting<TrainConfig>& s : train_settings()) {
    for (const std::string& key : missing)
      if (s.key && key == s.key)
        std::printf("note: %s was written before the setting '%s' existed: it keeps the default %s\n",
                    escape_for_message(file).c_str(), s.key, escape_for_message(setting_text(s, config)).c_str());
    if (s.scope == Scope::Run && flags.count(s.flag))
      throw std::runtime_error(std::string("--") + s.flag + " cannot be changed when resuming (the run continues " +
                               "with the settings stored in " + file + ")");
  }
  if (flags.count("preset"))
    throw std::runtime_error("--preset cannot be changed when resuming (the run continues with the settings stored in " +
                             file + ")");
  if (!flags.count("out")) config.out = directory_of(file);
  apply_flags(flags, train_settings(), config);
  // Continuing into another folder must not replace a different run that lives there, nor, in the file's own
  // folder, a newer checkpoint (the file is an older copy kept beside it).
  if (!same_folder(config.out, directory_of(file))) {
    refuse_to_replace_run(config.out, {checkpoint_path(config.out), config.out + "/metrics.csv"}, config.overwrite);
  } else {
    refuse_to_replace_another_checkpoint(config.out, file, ckpt.resume.step, config.overwrite);
    config.overwrite = false;  // the run's own folder: its metrics.csv is continued, never started afresh
  }
  if (config.steps < ckpt.resume.step)
    throw std::runtime_error("--steps (" + std::to_string(config.steps) + ") is below the checkpoint's step (" +
                             std::to_string(ckpt.resume.step) + ")");
  if (print_settings(flags, config)) return;
  run_training(config, &ckpt, hooks());
}

// Parses the flags and runs (or resumes) the training; returns the exit status, having printed any error.
static int train_main(int argc, char** argv) {
  cxxopts::Options options("train", "Train a character-level GPT on a UTF-8 text file. Defaults are the tiny preset's.");
  std::string preset_help = "start from a preset, then apply the other flags:";
  for (const Preset& p : presets()) preset_help += std::string("\n  ") + p.name + ": " + p.summary;
  options.add_options()
    ("preset", preset_help, cxxopts::value<std::string>()->default_value("tiny"))
    ("resume", "continue from a checkpoint file or an output directory", cxxopts::value<std::string>())
    ("print-settings", "print the settings these flags give (JSON, as the checkpoint stores them) and exit without "
                       "training");
  add_flags(options, train_settings(), preset("tiny"));
  try {
    RenamedArgs args(argc, argv, model_renamed_flags());  // --attention still works, saying it is now --mixer
    const std::optional<cxxopts::ParseResult> parsed = parse_program_flags(options, args.argc(), args.argv());
    if (!parsed) return 0;  // --help
    const cxxopts::ParseResult& flags = *parsed;
    if (flags.count("mask") && flags.count("layer-masks")) throw std::runtime_error("give --mask or --layer-masks, not both");
    if (flags.count("mixer") && flags.count("layer-mixer"))
      throw std::runtime_error("give --mixer or --layer-mixer, not both");
    if (flags.count("mixer") && flags["mixer"].as<std::string>().find(',') != std::string::npos)
      throw std::runtime_error("--mixer takes one kind for every layer (" + mixer_kind_names() +
                               "); use --layer-mixer for a list");
    if (flags.count("resume")) {
      resume(flags);
      return 0;
    }
    TrainConfig config = preset(flags["preset"].as<std::string>());
    apply_flags(flags, train_settings(), config);
    if (print_settings(flags, config)) return 0;
    run_training(config, nullptr, hooks());
    return 0;
  } catch (const std::bad_alloc&) {  // past the up-front estimate (base/memory.h): another process took the memory
    std::fprintf(stderr, "train: error: out of memory (an allocation failed after the estimate said the run fits: "
                 "something else is using the memory); reduce --batch, --block, --n-embd or --n-layer\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train: error: %s\n", escape_for_message(e.what(), /*keep_newlines=*/true).c_str());
    return 1;
  }
}

int main(int argc, char** argv) {
  choose_runtime(argv);  // see base/runtime.h: restarts once with OMP_WAIT_POLICY and OpenBLAS kernels chosen
  dist::init(&argc, &argv);      // [dist] joins the MPI job when mpirun started us (train/distributed.h)
  // [dist] Rank 0 alone prints progress; the other processes' standard output goes nowhere (errors still show).
  if (!dist::is_root() && !std::freopen("/dev/null", "w", stdout)) dist::abort_job(1);
  const int status = train_main(argc, argv);
  // [dist] A process that failed (its error is printed) ends the whole job: MPI_Abort, so that no other process
  // waits forever for it in the next all-reduce. mpirun then names the process and stops the rest.
  if (status != 0) dist::abort_job(status);
  dist::finalize();
  return status;
}
