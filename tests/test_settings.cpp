// The settings tables (src/base/settings.h, src/train/train_config.cpp): one row per setting drives the flags, --help,
// the checkpoint's JSON, reading it back and the range checks. These tests walk the table itself, so a new row is
// checked without a new test: every flag reaches its field, every stored field survives the JSON round trip,
// every range is enforced, and a checkpoint written before a setting existed still resumes with its default.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <cxxopts.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/renamed_flags.h"
#include "base/settings.h"
#include "generate/sampling.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/mixers/registry.h"
#include "mixer_kinds.h"
#include "program_util.h"
#include "train/metrics_file.h"
#include "train/train_config.h"


namespace {

// A value different from `current` for the field's type (for strings, one the row's check accepts where it
// checks: the model's attention scale and the objective are parsed later).
std::vector<std::string> argv_for(const Setting<TrainConfig>& s, TrainConfig& c) {
  std::vector<std::string> args;
  std::visit(
      [&](auto* field) {
        using T = std::remove_pointer_t<decltype(field)>;
        const std::string flag = std::string("--") + s.flag;
        if constexpr (std::is_same_v<T, bool>) args = {flag};
        else if constexpr (std::is_same_v<T, std::string>) args = {flag, *field + "x"};
        else if constexpr (std::is_same_v<T, float>) args = {flag, std::to_string(*field * 0.5f + 0.125f)};
        else args = {flag, std::to_string(*field + 3)};
      },
      s.field(c));
  return args;
}

cxxopts::ParseResult parse(cxxopts::Options& options, std::vector<std::string> args) {
  args.insert(args.begin(), "train");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return options.parse((int)argv.size(), argv.data());
}

}  // namespace

// Every row's flag sets exactly its own field, and nothing else.
TEST(SettingsTable, EveryFlagSetsItsOwnField) {
  const TrainConfig defaults;
  for (const Setting<TrainConfig>& s : train_settings()) {
    SCOPED_TRACE(s.flag);
    cxxopts::Options options("train", "");
    add_flags(options, train_settings(), defaults);
    TrainConfig c = defaults;
    const std::vector<std::string> args = argv_for(s, c);
    TrainConfig got = defaults;
    apply_flags(parse(options, args), train_settings(), got);
    // The row's own field changed …
    EXPECT_NE(setting_text(s, got), setting_text(s, defaults));
    // … and every row on another field did not (--layer-masks and --mask share one).
    auto address = [](const Setting<TrainConfig>& row, TrainConfig& config) {
      return std::visit([](auto* x) { return (const void*)x; }, row.field(config));
    };
    for (const Setting<TrainConfig>& other : train_settings())
      if (address(other, got) != address(s, got)) {
        EXPECT_EQ(setting_text(other, got), setting_text(other, defaults)) << "--" << other.flag;
      }
  }
}

// Keys and flags are unique, and every row has help text.
TEST(SettingsTable, KeysAndFlagsAreUnique) {
  std::set<std::string> keys, flags;
  for (const Setting<TrainConfig>& s : train_settings()) {
    EXPECT_TRUE(flags.insert(s.flag).second) << s.flag;
    if (s.key) {
      EXPECT_TRUE(keys.insert(s.key).second) << s.key;
    }
    EXPECT_GT(std::string(s.help).size(), 5u) << s.flag;
  }
}

// Every stored row survives to_json → train_config_from_json with a non-default value; the invocation-only
// rows (--stop-at) are not stored.
TEST(SettingsTable, StoredSettingsRoundTripThroughTheCheckpointJson) {
  TrainConfig c;
  c.data = "d.txt", c.out = "o", c.model.n_layer = 3, c.model.n_head = 2, c.model.n_embd = 24;
  c.model.block_size = 17, c.model.no_mlp = true, c.model.attn_scale = "inv", c.objective = "mlm";
  c.mask = "window:3", c.mlm_rate = 0.25f, c.allow_leak = true, c.batch = 5, c.steps = 77;
  c.adamw = {2e-3f, 3e-4f, 7, 0.8f, 0.95f, 1e-7f, 0.05f, 0.5f};
  c.optimizer = "muon", c.muon = {0.03f, 0.9f};
  c.eval_every = 9, c.eval_iters = 4, c.ckpt_every = 11, c.log_every = 13, c.seed = (1ull << 63) + 5;
  c.threads = 2, c.stop_at = 40;
  std::vector<std::string> missing;
  const TrainConfig back = train_config_from_json(to_json(c), "c", &missing);
  EXPECT_TRUE(missing.empty());
  for (const Setting<TrainConfig>& s : train_settings()) {
    if (s.key) {
      EXPECT_EQ(setting_text(s, back), setting_text(s, c)) << s.key;
    }
  }
  EXPECT_EQ(back.stop_at, TrainConfig{}.stop_at) << "--stop-at is this invocation's only";
  EXPECT_EQ(nlohmann::json::parse(to_json(c)).count("stop_at"), 0u);
}

// A checkpoint written before a setting existed lacks its key: the setting keeps its default and is named.
TEST(SettingsTable, AMissingKeyTakesItsDefaultAndIsReported) {
  TrainConfig c;
  c.batch = 7, c.model.attn_scale = "inv";
  nlohmann::json j = nlohmann::json::parse(to_json(c));
  j.erase("attn_scale");
  j.erase("grad_clip");
  std::vector<std::string> missing;
  const TrainConfig back = train_config_from_json(j.dump(), "old.safetensors", &missing);
  EXPECT_EQ(back.batch, 7);
  EXPECT_EQ(back.model.attn_scale, "sqrt");
  EXPECT_EQ(back.adamw.grad_clip, TrainConfig{}.adamw.grad_clip);
  EXPECT_EQ(missing, (std::vector<std::string>{"attn_scale", "grad_clip"}));
}

// The tiny preset's weight decay went from 0.1 to 0.05: a file without the key meant 0.1 and keeps it; a file that
// stores a value keeps that value, whatever today's default.
TEST(SettingsTable, WeightDecayOfAFileWithoutTheKeyIsTheOldDefault) {
  EXPECT_EQ(TrainConfig{}.adamw.weight_decay, 0.05f);
  EXPECT_EQ(preset("nanogpt").adamw.weight_decay, 0.1f);
  nlohmann::json j = nlohmann::json::parse(to_json(TrainConfig{}));
  j.erase("weight_decay");
  std::vector<std::string> missing;
  EXPECT_EQ(train_config_from_json(j.dump(), "old.safetensors", &missing).adamw.weight_decay, 0.1f);
  EXPECT_EQ(missing, (std::vector<std::string>{"weight_decay"}));
  j["weight_decay"] = 0.3;
  EXPECT_EQ(train_config_from_json(j.dump(), "old.safetensors").adamw.weight_decay, 0.3f);
}

// Every range in the table is enforced, by validate() (the flags) and when reading a checkpoint's JSON.
TEST(SettingsTable, RangesAreEnforcedNamingTheFlagOrTheKey) {
  // Every stored number row with a bound, walked from the table: a value just past each finite end of its range
  // (the end itself when the range is open there) must be refused when read from a checkpoint and when set by a flag.
  int checked = 0;
  for (const Setting<TrainConfig>& row : train_settings()) {
    if (!row.key || row.scope == Scope::Invocation) continue;
    std::vector<double> outside;
    if (std::isfinite(row.range.lo)) outside.push_back(row.range.lo_open ? row.range.lo : row.range.lo - 1);
    if (std::isfinite(row.range.hi)) outside.push_back(row.range.hi_open ? row.range.hi : row.range.hi + 1);
    TrainConfig probe;
    const bool is_number = std::visit(
        [](auto* field) {
          using T = std::remove_pointer_t<decltype(field)>;
          return std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
        },
        row.field(probe));
    if (!is_number) continue;
    for (double value : outside) {
      SCOPED_TRACE(std::string(row.key) + " = " + std::to_string(value));
      checked++;
      nlohmann::json j = nlohmann::json::parse(to_json(TrainConfig{}));
      j[row.key] = value;
      try {
        train_config_from_json(j.dump(), "c.safetensors");
        ADD_FAILURE() << "read " << row.key << " = " << value;
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(row.key), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("c.safetensors"), std::string::npos) << e.what();
      }
      // The same value through the struct (as the flag would set it): validate() names the flag.
      TrainConfig c;
      std::visit(
          [&](auto* field) {
            using T = std::remove_pointer_t<decltype(field)>;
            if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) *field = (T)value;
          },
          row.field(c));
      try {
        validate(c);
        ADD_FAILURE() << "validated --" << row.flag << " " << value;
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(std::string("--") + row.flag), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GE(checked, 20) << "the walk found too few bounded rows: is the table being read?";
  TrainConfig c;
  c.adamw.min_lr = 2 * c.adamw.lr;  // a check that involves two rows
  EXPECT_THROW(validate(c), std::runtime_error);
  // A string checked by validate(): the position embedding's (the run's named choices are the plan's, below).
  auto expect_refused = [](auto config, const std::string& words) {
    try {
      validate(config);
      ADD_FAILURE() << "validated: " << words;
    } catch (const std::runtime_error& e) {
      EXPECT_CONTAINS(std::string(e.what()), words);
    }
  };
  ModelConfig sideways;
  sideways.vocab_size = 5;
  sideways.positions = "sideways";
  expect_refused(sideways, "positions 'sideways' (--positions) should be learned or none");
  EXPECT_NO_THROW(validate(TrainConfig{}));
}

// --help shows every row's flag, its help and the tiny preset's default.
TEST(SettingsTable, HelpListsEveryFlagWithItsDefault) {
  progutil::TempDir dir;
  progutil::RunResult r = progutil::run_command("./train --help", dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const Setting<TrainConfig>& s : train_settings())
    EXPECT_NE(r.out.find(std::string("--") + s.flag), std::string::npos) << s.flag;
  EXPECT_NE(r.out.find("sequences per step (default: 12)"), std::string::npos) << r.out;
  progutil::RunResult sample = progutil::run_command("./sample --help", dir.path());
  for (const Setting<SamplingOptions>& s : sampling_settings())
    EXPECT_NE(sample.out.find(std::string("--") + s.flag), std::string::npos) << s.flag;
  EXPECT_NE(sample.out.find("(default: 0.8)"), std::string::npos) << sample.out;
}

// Every preset is a valid run, --help names each, and an unknown name is refused with the list. nanogpt keeps the
// recipe the mask and pronoun tables were measured with (docs/masks.md, docs/pronouns.md).
TEST(SettingsPresets, EveryPresetIsValidListedAndUnknownNamesAreRefused) {
  progutil::TempDir dir;
  progutil::RunResult help = progutil::run_command("./train --help", dir.path());
  for (const Preset& p : presets()) {
    TrainConfig c = preset(p.name);
    EXPECT_NO_THROW(validate(c)) << p.name;
    c.model.vocab_size = 65;
    EXPECT_NO_THROW(validate(c.model)) << p.name;
    EXPECT_CONTAINS(help.out, std::string(p.name) + ": ");
  }
  // The tiny preset is the documented recipe (docs/usage.md) and TrainConfig's own defaults are exactly it: Muon,
  // 1000 steps, an evaluation every 200. A checkpoint without the optimizer key was written by AdamW, and reads so.
  const TrainConfig tiny = preset("tiny");
  EXPECT_EQ(to_json(tiny), to_json(TrainConfig()));
  EXPECT_EQ(tiny.optimizer, "muon");
  EXPECT_EQ(tiny.steps, 1000);
  EXPECT_EQ(tiny.eval_every, 200);
  nlohmann::json old = nlohmann::json::parse(to_json(tiny));
  old.erase("optimizer");
  EXPECT_EQ(train_config_from_json(old.dump(), "old.safetensors").optimizer, "adamw");
  const TrainConfig nano = preset("nanogpt");
  EXPECT_EQ(nano.optimizer, "adamw");
  EXPECT_EQ(nano.eval_every, 250);
  EXPECT_FLOAT_EQ(nano.adamw.lr, 1e-3f);
  EXPECT_FLOAT_EQ(nano.adamw.min_lr, 1e-4f);
  EXPECT_EQ(nano.adamw.warmup_steps, 100);
  EXPECT_EQ(nano.steps, 2000);
  EXPECT_EQ(nano.batch, 12);
  EXPECT_EQ(nano.model.block_size, tiny.model.block_size);
  try {
    preset("huge");
    ADD_FAILURE() << "an unknown preset was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(std::string(e.what()), "'huge' (expected tiny, nanogpt, frontier, small)");
  }
}

// End to end: a resumable checkpoint whose stored settings lack a key (as one written before that setting existed)
// resumes, keeping the default and saying so.
TEST(SettingsResume, ACheckpointWithoutANewerSettingResumesAndSaysSo) {
  progutil::TempDir dir;
  const std::string corpus = dir / "corpus.txt", out = dir / "run";
  progutil::write_file(corpus, progutil::generated_text(3000));
  auto run = [&](const std::string& command) { return progutil::run_command(command, dir.path()); };
  progutil::RunResult first = run("./train " + std::string(progutil::tiny_flags()) + " --data " +
                                  progutil::quote(corpus) + " --out " + progutil::quote(out) + " --steps 4 --stop-at 2");
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  // Rewrite the checkpoint with "grad_clip" gone from its training settings and "attn_scale" from the model's
  // settings in its metadata.
  const std::string file = checkpoint_path(out);
  Checkpoint ckpt = load_checkpoint(file);
  nlohmann::json settings = nlohmann::json::parse(ckpt.resume.train_config);
  settings.erase("grad_clip");
  ckpt.resume.train_config = settings.dump();
  save_checkpoint(file, *ckpt.model, ckpt.tokenizer, &ckpt.resume, ckpt.objective);
  SafetensorsContents contents = read_safetensors(file);
  contents.metadata.erase("attn_scale");
  contents.metadata["format_version"] = "1";  // format 2 requires every key; a file from before it is format 1
  std::vector<TensorView> views;
  for (const auto& [name, t] : contents.tensors) views.push_back({name, t.shape, t.data.data()});
  write_safetensors(file, views, contents.metadata);

  progutil::RunResult resumed = run("./train --resume " + progutil::quote(out));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_NE(resumed.out.find("before the setting 'grad_clip' existed: it keeps the default 1"), std::string::npos)
      << resumed.out;
  EXPECT_NE(resumed.out.find("'attn_scale' existed: it keeps the default 'sqrt'"), std::string::npos) << resumed.out;
  EXPECT_EQ(load_checkpoint(file).resume.step, 4);
}

// A checkpoint written by ./train at commit 5b9387c (before the settings table; tests/fixtures/, 19 KB, trained
// 3 steps on tests/fixtures/corpus_5b9387c.txt with --n-layer 1 --n-head 2 --n-embd 8 --block 8 --batch 2
// --seed 7 --threads 1). It loads, scores, samples and resumes with the numbers that commit printed for it.
TEST(Compatibility, ACheckpointWrittenBeforeTheRedesignLoadsSamplesAndResumesWithTheSameNumbers) {
  const std::string fixture = "tests/fixtures/ckpt_5b9387c.safetensors", corpus = "tests/fixtures/corpus_5b9387c.txt";
  ASSERT_TRUE(progutil::file_exists(fixture)) << "run the tests from the repository root";
  Checkpoint ckpt = load_checkpoint(fixture);
  EXPECT_TRUE(ckpt.resumable);
  EXPECT_EQ(ckpt.resume.step, 3);
  EXPECT_EQ(describe(ckpt.model->config), "1 layers, 2 heads, 8 wide, block 8, vocab 26");
  EXPECT_EQ(ckpt.model->config.positions, "learned");  // written before --positions: GPT-2's learned embedding
  progutil::TempDir dir;
  auto run = [&](const std::string& command) { return progutil::run_command(command, dir.path()); };
  // What 5b9387c's ./sample printed for this file (copied from its output).
  progutil::RunResult score = run("./sample --threads 1 --ckpt " + fixture + " --score " + corpus);
  ASSERT_EQ(score.exit_code, 0) << score.describe();
  EXPECT_NE(score.out.find("3.2575 nats/char, 4.6996 bits/char over 1271 predicted characters"), std::string::npos)
      << score.out;
  progutil::RunResult sample = run("./sample --threads 1 --ckpt " + fixture + " --prompt Tom -n 30 --seed 3");
  EXPECT_EQ(sample.out, "Tomn\nSwnlec.obMtMeolobnmnsT Tcekd\n") << sample.describe();
  // Resumed to step 6: 5b9387c printed "step 6: train loss 3.2731, val loss 3.2714".
  const std::string copy = dir / "run";
  progutil::RunResult mk = run("mkdir -p " + copy + " && cp " + fixture + " " + copy + "/ckpt.safetensors");
  ASSERT_EQ(mk.exit_code, 0);
  progutil::RunResult resumed = run("./train --resume " + progutil::quote(copy) + " --steps 6");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_NE(resumed.out.find("step 6: train loss 3.2731, val loss 3.2714"), std::string::npos) << resumed.out;
  // And its settings still may not change.
  progutil::RunResult refused = run("./train --resume " + progutil::quote(copy) + " --steps 9 --lr 1");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--lr cannot be changed when resuming"), std::string::npos) << refused.err;
}

// A renamed flag keeps working under its old spelling, as "--old value" and as "--old=value"; a flag that only
// starts with the old name and the program's name (argv[0]) are left alone.
TEST(Settings, RenamedFlagsAreRewrittenToTheirNewNames) {
  std::vector<std::string> given = {"--attention", "--attention", "kind", "--layer-attention=kind,other",
                                    "--attention-x", "--out", "--attention"};
  std::vector<char*> argv;
  for (std::string& a : given) argv.push_back(&a[0]);
  RenamedArgs args((int)argv.size(), argv.data(), model_renamed_flags());
  std::vector<std::string> out(args.argv(), args.argv() + args.argc());
  EXPECT_EQ(out, (std::vector<std::string>{"--attention", "--mixer", "kind", "--layer-mixer=kind,other",
                                           "--attention-x", "--out", "--mixer"}));
  EXPECT_EQ(args.argv()[args.argc()], nullptr);
  // And the new names are the model's flags: ./train's table has them, not the old ones.
  bool mixer = false, layer_mixer = false, old = false;
  for (const Setting<TrainConfig>& s : train_settings()) {
    if (!s.flag) continue;
    mixer = mixer || std::string(s.flag) == "mixer";
    layer_mixer = layer_mixer || std::string(s.flag) == "layer-mixer";
    old = old || std::string(s.flag) == "attention" || std::string(s.flag) == "layer-attention";
  }
  EXPECT_TRUE(mixer && layer_mixer && !old);
}

// A checkpoint written by ./train at commit 72e9c05, when the mixer's key was still "attention" (tests/fixtures/,
// 34 KB, format 2, trained 3 steps on tests/fixtures/corpus_5b9387c.txt with --n-layer 2 --n-head 2 --n-embd 8
// --block 8 --batch 2 --steps 3 --seed 7 --threads 1 --layer-mixer linear,mamba --ssm-state 2 --ssm-expand 1
// --eval-iters 1). Format 2's strict key check knows the old key, the value is read under it, each program says
// once what it became, and the file scores, samples and resumes with the numbers 72e9c05 printed for it.
TEST(RenamedKey, ACheckpointWithTheOldKeyLoadsSamplesAndResumesWithTheSameNumbers) {
  const std::string fixture = "tests/fixtures/ckpt_72e9c05.safetensors", corpus = "tests/fixtures/corpus_5b9387c.txt";
  ASSERT_TRUE(progutil::file_exists(fixture)) << "run the tests from the repository root";
  const std::string held = read_safetensors(fixture).metadata.at("attention");  // two kinds, "first,second"
  const size_t comma = held.find(',');
  ASSERT_NE(comma, std::string::npos) << held;
  ASSERT_EQ(read_safetensors(fixture).metadata.count("mixer"), 0u);
  Checkpoint ckpt = load_checkpoint(fixture);
  EXPECT_EQ(ckpt.model->config.mixer, held);
  EXPECT_EQ(std::string(ckpt.model->mixer(0).kind()), held.substr(0, comma));
  EXPECT_EQ(std::string(ckpt.model->mixer(1).kind()), held.substr(comma + 1));
  ASSERT_EQ(ckpt.notes.size(), 2u);  // and the no_mlp setting's, renamed since (it was attn_only)
  EXPECT_CONTAINS(ckpt.notes[0], fixture + ": metadata key 'attn_only' is now 'no_mlp'");
  EXPECT_CONTAINS(ckpt.notes[1], fixture + ": metadata key 'attention' is now 'mixer'");
  EXPECT_TRUE(std::find(ckpt.defaulted_settings.begin(), ckpt.defaulted_settings.end(), "mixer") ==
              ckpt.defaulted_settings.end());
  progutil::TempDir dir;
  auto run = [&](const std::string& command) { return progutil::run_command(command, dir.path()); };
  const std::string note = "note: " + fixture + ": metadata key 'attention' is now 'mixer'";
  // What 72e9c05's ./sample printed for this file (copied from its output).
  progutil::RunResult score = run("./sample --threads 1 --ckpt " + fixture + " --score " + corpus);
  ASSERT_EQ(score.exit_code, 0) << score.describe();
  EXPECT_CONTAINS(score.out, "3.2527 nats/char, 4.6927 bits/char over 1271 predicted characters");
  EXPECT_EQ(progutil::occurrences(score.err, note), 1u) << score.err;
  progutil::RunResult sample = run("./sample --threads 1 --ckpt " + fixture + " --prompt Tom -n 30 --seed 3");
  EXPECT_EQ(sample.out, "Tom.c\nw,ble.rvTtvho odv\nwssec\"m,b\n") << sample.describe();
  // Resumed to step 6: 72e9c05 printed "step 6: train loss 3.2397, val loss 3.2282". The train_config it stores
  // holds no model setting, so the note comes from the metadata alone, once; the file written holds the new key.
  const std::string copy = dir / "run";
  ASSERT_EQ(run("mkdir -p " + copy + " && cp " + fixture + " " + copy + "/ckpt.safetensors").exit_code, 0);
  progutil::RunResult resumed = run("./train --resume " + progutil::quote(copy) + " --steps 6 --data " + corpus);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.describe();
  EXPECT_CONTAINS(resumed.out, "step 6: train loss 3.2397, val loss 3.2282");
  EXPECT_EQ(progutil::occurrences(resumed.err, "metadata key 'attention' is now 'mixer'"), 1u) << resumed.err;
  const auto meta = read_safetensors(copy + "/ckpt.safetensors").metadata;
  EXPECT_EQ(meta.at("mixer"), read_safetensors(fixture).metadata.at("attention"));
  EXPECT_EQ(meta.count("attention"), 0u);
  EXPECT_TRUE(load_checkpoint(copy + "/ckpt.safetensors").notes.empty());
}

// A fresh file holds the new key alone and loads without a note; the same file with the key renamed back (its
// checksums recomputed) loads as the same model with the note; with both keys it is refused, naming both, as is
// a training JSON with both.
TEST(RenamedKey, AFreshFileHoldsTheNewKeyAndAFileWithBothKeysIsRefused) {
  progutil::TempDir dir;
  const std::string path = dir / "m.safetensors";
  const Tokenizer tok = Tokenizer::from_text(U"abcdefg hij");
  const std::string hybrid = mixer_kinds().back()->name + std::string(",") + mixer_kinds().front()->name;
  const ModelConfig c = testutil::sized_config(hybrid, 2, 2, 8, 8, tok.size());
  GPT model(c);
  model.init_weights(5);
  save_checkpoint(path, model, tok, nullptr);
  SafetensorsContents file = read_safetensors(path);
  EXPECT_EQ(file.metadata.at("mixer"), hybrid);
  EXPECT_EQ(file.metadata.count("attention"), 0u);
  EXPECT_TRUE(load_checkpoint(path).notes.empty());
  std::vector<TensorView> views;
  for (const auto& [name, t] : file.tensors) views.push_back({name, t.shape, t.data.data()});

  std::map<std::string, std::string> old = file.metadata;
  old["attention"] = old.at("mixer");
  old.erase("mixer");
  write_safetensors(path, views, old);
  Checkpoint loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.model->config.mixer, hybrid);
  ASSERT_EQ(loaded.notes.size(), 1u);
  EXPECT_CONTAINS(loaded.notes[0], "key 'attention' is now 'mixer'");
  const std::vector<int> x = {1, 2, 3, 4, 5};
  model.forward(x.data(), nullptr, 1, 5);
  loaded.model->forward(x.data(), nullptr, 1, 5);
  for (int i = 0; i < 5 * tok.size(); i++) ASSERT_EQ(model.logits()[i], loaded.model->logits()[i]);

  std::map<std::string, std::string> both = file.metadata;
  both["attention"] = "softmax,softmax";
  write_safetensors(path, views, both);
  try {
    load_checkpoint(path);
    ADD_FAILURE() << "loaded a checkpoint with both 'mixer' and 'attention'";
  } catch (const std::runtime_error& e) {
    EXPECT_CONTAINS(std::string(e.what()), path);
    EXPECT_CONTAINS(std::string(e.what()), "both 'mixer' and 'attention'");
  }
  TrainConfig t;
  const nlohmann::json j = {{"mixer", mixer_kinds().front()->name}, {"attention", mixer_kinds().back()->name}};
  EXPECT_THROW(settings_from_json(train_settings(), j, t), std::runtime_error);
  // The table knows the old key as the row's, and writes only the new one.
  const std::vector<std::string> keys = stored_keys(model_settings());
  EXPECT_EQ(std::count(keys.begin(), keys.end(), "attention"), 1);
  EXPECT_EQ(settings_to_json(model_settings(), c).count("attention"), 0u);
}
