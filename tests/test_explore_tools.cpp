// Explorer III (docs/explore.md): snapshots (./train --snapshot-every), the run's timeline, heads knocked out and
// the logit lens with direct logit attribution. Each answer is held to a second route that does not share its code:
// the ablation to the model with the head's output-projection rows zeroed in its weights (and, where the kind has
// head gates, to ξ = 0), the lens's last layer to the forward's own logits and to the double-precision textbook
// model, the attribution's parts to the logit they must add up to, the timeline's scores to score_heads run on
// each snapshot by hand.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "data/tokenizer.h"
#include "data/utf8.h"
#include "explore/ablation.h"
#include "explore/analysis.h"
#include "explore/head_steps.h"
#include "explore/lens.h"
#include "explore/timeline.h"
#include "io/checkpoint.h"
#include "lab/head_scores.h"
#include "model/mixer_lab.h"
#include "model/model.h"
#include "train/snapshots.h"
#include "explore_running.h"
#include "mixer_kinds.h"
#include "program_util.h"
#include "test_util.h"
#include "textbook/reference.h"

using nlohmann::json;

namespace {

const char32_t* kChars = U"abcdefghij .,";

void randomise(GPT& model, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.3f, 0.3f);
  for (float& p : model.params_memory()) p = dist(rng);
}

// A run folder with a random model of `mixer` (one kind, or one per layer) as ckpt.safetensors.
struct KindFolder {
  progutil::TempDir dir;
  Tokenizer tok = Tokenizer::from_text(kChars);
  std::unique_ptr<GPT> model;
  explicit KindFolder(const std::string& mixer, uint32_t seed = 3) {
    model = std::make_unique<GPT>(testutil::sized_config(mixer, 2, 2, 16, 32, tok.size()));
    randomise(*model, seed);
    save_checkpoint(ckpt(), *model, tok, nullptr);
  }
  std::string ckpt() const { return dir / "ckpt.safetensors"; }
  std::vector<int> ids(const std::string& text) const { return tok.encode(utf8_decode(text, "test"), "test"); }
};

const std::string kText = "abc.abc.hij gfe, abc.abc";  // 24 characters, block 32

// −log2 p(target) per predicted character of one forward's logits (T × V), computed here in double.
std::vector<double> surprisals(const float* logits, const std::vector<int>& ids, int V) {
  std::vector<double> bits;
  for (size_t t = 1; t < ids.size(); t++) {
    const float* z = logits + (t - 1) * V;
    double max = z[0], sum = 0;
    for (int v = 1; v < V; v++) max = std::max(max, (double)z[v]);
    for (int v = 0; v < V; v++) sum += std::exp(z[v] - max);
    bits.push_back((max + std::log(sum) - z[ids[t]]) / std::log(2.0));
  }
  return bits;
}

}  // namespace

TEST(ExploreSnapshots, NamesSortByStepAndTheIntervalThinsEvenly) {
  EXPECT_EQ(snapshot_name(200), "step-00000200.safetensors");
  EXPECT_EQ(snapshot_step("step-00000200.safetensors"), 200);
  EXPECT_EQ(snapshot_step("step-0000020.safetensors"), -1);
  EXPECT_EQ(snapshot_step("step-0000020x.safetensors"), -1);
  EXPECT_EQ(snapshot_step("ckpt.safetensors"), -1);
  const SnapshotSettings s{10, 4};
  // At most 4 kept: steps 0,10,20,30 at interval 10; once 40 is reached, 0,20,40 at interval 20; 80: 0,40,80.
  EXPECT_EQ(snapshot_interval(s, 30), 10);
  EXPECT_EQ(snapshot_interval(s, 40), 20);
  EXPECT_EQ(snapshot_interval(s, 60), 20);
  EXPECT_EQ(snapshot_interval(s, 80), 40);
  // Simulated by hand: write at every due step, drop what the interval no longer keeps; never more than 4.
  std::vector<int> kept;
  for (int step = 0; step <= 200; step++) {
    if (!snapshot_due(s, step)) continue;
    kept.push_back(step);
    const long interval = snapshot_interval(s, step);
    kept.erase(std::remove_if(kept.begin(), kept.end(), [&](int k) { return k % interval != 0; }), kept.end());
    ASSERT_LE(kept.size(), 4u) << "at step " << step;
  }
  EXPECT_EQ(kept, (std::vector<int>{0, 80, 160}));
}

TEST(ExploreSnapshots, TrainKeepsThemResumeKeepsThemAndBadFlagsAreNamed) {
  progutil::TempDir dir;
  const std::string corpus = dir / "corpus.txt";
  std::string text;
  for (int i = 0; i < 400; i++) text += "the cat sat on the mat. ";
  progutil::write_file(corpus, text);
  const std::string common = "./train --n-layer 1 --n-head 2 --n-embd 16 --block 16 --batch 2 --eval-iters 1 "
                             "--eval-every 4 --threads 1 --data " + progutil::quote(corpus) + " --out " +
                             progutil::quote(dir / "run");
  progutil::RunResult r =
      progutil::run_command(common + " --steps 8 --stop-at 4 --snapshot-every 2 --snapshot-keep 3", dir.path());
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  EXPECT_EQ(snapshot_steps(dir / "run/snapshots"), (std::vector<int>{0, 2, 4}));
  // A snapshot holds the weights alone: no optimizer state.
  Checkpoint first = load_checkpoint(dir / "run/snapshots/step-00000000.safetensors");
  EXPECT_FALSE(first.resumable);
  r = progutil::run_command("./train --steps 8 --snapshot-every 2 --snapshot-keep 3 --threads 1 --data " +
                                progutil::quote(corpus) + " --resume " + progutil::quote(dir / "run"),
                            dir.path());
  ASSERT_TRUE(r.exited && r.exit_code == 0) << r.describe();
  // Kept across the resume and thinned evenly at 3: 0, 4, 8.
  EXPECT_EQ(snapshot_steps(dir / "run/snapshots"), (std::vector<int>{0, 4, 8}));
  // The last snapshot is the final checkpoint's weights.
  Checkpoint last = load_checkpoint(dir / "run/snapshots/step-00000008.safetensors");
  Checkpoint end = load_checkpoint(dir / "run/ckpt.safetensors");
  ASSERT_EQ(last.model->num_params(), end.model->num_params());
  EXPECT_TRUE(std::equal(last.model->params_memory().begin(), last.model->params_memory().end(),
                         end.model->params_memory().begin()));
  for (const std::string& bad : {std::string(" --snapshot-every -1"), std::string(" --snapshot-keep 1")}) {
    r = progutil::run_command(common + " --steps 2 --overwrite" + bad, dir.path());
    EXPECT_TRUE(r.exited && r.exit_code != 0) << bad;
    EXPECT_CONTAINS(r.err, bad.substr(3, bad.find(' ', 3) - 3)) << bad;
  }
}

// Every kind's heads: knocking a head out through the hook is the model with that head's rows of the output
// projection zeroed in its weights (an independent route: no hook, the plain forward), and ξ = 0 where the kind
// has head gates.
TEST(ExploreAblation, AHeadOutIsItsProjectionRowsZeroedForEveryKind) {
  for (const std::string& mixer : testutil::every_kind_and_a_hybrid()) {
    SCOPED_TRACE(mixer);
    KindFolder f(mixer);
    ExploredModel m(load_checkpoint(f.ckpt()));
    const std::vector<int> ids = f.ids(kText);
    const int V = m.model().config.vocab_size, C = m.model().config.n_embd, NH = m.model().config.n_head;
    for (int layer = 0; layer < 2; layer++) {
      const json a = ablate_json(m, ids, {{layer, 1}}, AblateHow::Zero);
      // The reference: a copy of the model with head 1's rows of layer `layer`'s output projection set to 0.
      Checkpoint copy = load_checkpoint(f.ckpt());
      GPT& g = *copy.model;
      g.forward(ids.data(), nullptr, 1, (int)ids.size());
      const HeadShares s = g.mixer(layer).lab().head_shares(g.mixer_pass(layer));
      ASSERT_NE(s.proj, nullptr);
      float* W = const_cast<float*>(s.proj);
      const int width = s.width / NH;
      std::fill(W + (size_t)1 * width * C, W + (size_t)2 * width * C, 0.0f);
      g.forward(ids.data(), nullptr, 1, (int)ids.size());
      const std::vector<double> expected = surprisals(g.logits(), ids, V);
      ASSERT_TRUE(a["bits"][0].is_null());
      ASSERT_TRUE(a["delta"][0].is_null());
      for (size_t t = 1; t < ids.size(); t++) {
        EXPECT_NEAR(a["bits"][t].get<double>(), expected[t - 1], 2e-4) << "layer " << layer << " t " << t;
        EXPECT_NEAR(a["delta"][t].get<double>(), a["bits"][t].get<double>() - a["intact_bits"][t].get<double>(), 1e-12);
      }
      if (m.model().mixer(layer).has_head_gates()) {
        Checkpoint gated = load_checkpoint(f.ckpt());
        gated.model->set_head_gate(layer * NH + 1, 0.0f);
        gated.model->forward(ids.data(), nullptr, 1, (int)ids.size());
        const std::vector<double> by_gate = surprisals(gated.model->logits(), ids, V);
        for (size_t t = 1; t < ids.size(); t++) EXPECT_NEAR(a["bits"][t].get<double>(), by_gate[t - 1], 2e-4);
      }
    }
  }
}

// No head: the ablated forward runs through the hook and changes nothing, exactly. And a knocked-out head must change
// something, so that the equality above is not trivially met; mean ablation too, and differently from zero.
TEST(ExploreAblation, AnEmptyListChangesNothingExactly) {
  for (const std::string& mixer : testutil::registered_kinds()) {
    SCOPED_TRACE(mixer);
    KindFolder f(mixer);
    ExploredModel m(load_checkpoint(f.ckpt()));
    const std::vector<int> ids = f.ids(kText);
    const long before = m.forwards;
    const json none = ablate_json(m, ids, {}, AblateHow::Zero);
    EXPECT_GE(m.forwards - before, 2);  // the intact and the (unchanged) ablated forward
    for (size_t t = 1; t < ids.size(); t++) EXPECT_EQ(none["delta"][t].get<double>(), 0.0) << t;
    EXPECT_EQ(none["delta_bits_per_char"].get<double>(), 0.0);
    const json zero = ablate_json(m, ids, {{0, 0}, {1, 1}}, AblateHow::Zero);
    const json mean = ablate_json(m, ids, {{0, 0}, {1, 1}}, AblateHow::Mean);
    EXPECT_GT(std::fabs(zero["delta_bits_per_char"].get<double>()), 1e-6);
    EXPECT_GT(std::fabs(mean["delta_bits_per_char"].get<double>() - zero["delta_bits_per_char"].get<double>()), 1e-7);
    // The intact score afterwards is the intact score before (the hook is gone, no stale forward is reused).
    const json again = score_text_json(m, ids);
    EXPECT_EQ(again["bits"], zero["intact_bits"]);
  }
}

TEST(ExploreLens, TheLastLayerIsTheModelsOwnPredictionAndTheTextbooks) {
  for (const std::string& mixer : testutil::every_kind_and_a_hybrid()) {
    SCOPED_TRACE(mixer);
    KindFolder f(mixer);
    ExploredModel m(load_checkpoint(f.ckpt()));
    const std::vector<int> ids = f.ids(kText);
    const int V = m.model().config.vocab_size, L = m.model().config.n_layer;
    const int pos = 10;
    const json j = lens_json(m, ids, pos);
    ASSERT_EQ(j["layers"].size(), (size_t)L + 1);
    EXPECT_EQ(j["layers"][0]["name"], "embedding");
    // The model's own forward, in float; p of the next character from its logits.
    m.model().forward(ids.data(), nullptr, 1, (int)ids.size());
    const float* z = m.model().logits() + (size_t)pos * V;
    double max = z[0], sum = 0;
    for (int v = 1; v < V; v++) max = std::max(max, (double)z[v]);
    for (int v = 0; v < V; v++) sum += std::exp(z[v] - max);
    const double p = std::exp(z[ids[pos + 1]] - max) / sum;
    EXPECT_NEAR(j["layers"][L]["p_target"].get<double>(), p, 1e-5);
    EXPECT_NEAR(j["layers"][L]["logit_target"].get<double>(), z[ids[pos + 1]], 1e-4);
    // The attribution's parts and the final norm's bias add up to the logit (ρ frozen at the real one).
    const json& a = j["attribution"];
    double parts = a["final_norm_bias"].get<double>();
    for (const json& part : a["parts"]) parts += part["value"].get<double>();
    EXPECT_NEAR(parts, a["sum"].get<double>(), 1e-9);
    EXPECT_NEAR(parts, z[ids[pos + 1]], 1e-3);
    // Every head of every layer has its part, named L.H.
    int heads = 0;
    for (const json& part : a["parts"]) heads += !part["head"].is_null();
    EXPECT_EQ(heads, L * m.model().config.n_head);
  }
  // The double-precision textbook model's logit, for the attention kind the textbook's GPT computes.
  KindFolder f(testutil::registered_kinds().front());
  ExploredModel m(load_checkpoint(f.ckpt()));
  const std::vector<int> ids = f.ids(kText);
  ReferenceGPT<double> ref(m.model().config, m.model().masks());
  ref.params = testutil::to_double(m.model().params_memory());
  ref.forward(ids, {}, 1, (int)ids.size());
  const int V = m.model().config.vocab_size;
  for (int pos : {0, 5, 22}) {
    const json j = lens_json(m, ids, pos);
    double parts = j["attribution"]["final_norm_bias"].get<double>();
    for (const json& part : j["attribution"]["parts"]) parts += part["value"].get<double>();
    EXPECT_NEAR(parts, ref.logits[(size_t)pos * V + ids[pos + 1]], 1e-3) << pos;
  }
}

TEST(ExploreTimeline, ScoresEachSnapshotOnceAndCachesThemBesideIt) {
  KindFolder f(testutil::registered_kinds().front());
  const std::string snaps = snapshot_folder(f.dir.path());
  SnapshotSettings s{10, 8};
  write_snapshot(f.dir.path(), 0, s, *f.model, f.tok, Objective::CLM);
  randomise(*f.model, 9);
  write_snapshot(f.dir.path(), 10, s, *f.model, f.tok, Objective::CLM);
  progutil::write_file(f.dir / "metrics.csv", "step,train_loss,val_loss,honest_bits\n0,2.5,2.6,\n1,,,\n10,2.0,2.1,1.5\n");
  const json first = timeline_json(f.dir.path());
  ASSERT_EQ(first["snapshots"].size(), 2u);
  EXPECT_EQ(first["snapshots"][1]["step"], 10);
  EXPECT_EQ(first["snapshots"][1]["name"], "snapshots/step-00000010.safetensors");
  EXPECT_FALSE(first["snapshots"][0]["cached"].get<bool>());
  EXPECT_EQ(first["metrics"]["step"], json({0, 10}));
  EXPECT_EQ(first["metrics"]["val_loss"], json({2.6, 2.1}));
  // The scores are score_heads' on the probe, run here by hand on the snapshot.
  Checkpoint c = load_checkpoint(snaps + "/" + snapshot_name(10));
  const std::vector<HeadScores> hs = score_heads(*c.model, f.tok.num_chars(), kProbeSequences, kProbeSeed);
  EXPECT_NEAR(first["snapshots"][1]["scores"][1][0]["induction"].get<double>(), hs[2].induction.value(), 1e-12);
  EXPECT_NEAR(first["snapshots"][1]["scores"][0][1]["previous_token"].get<double>(), hs[1].previous_token.value(), 1e-12);
  EXPECT_TRUE(progutil::file_exists(snaps + "/step-00000010.scores.json"));
  const json second = timeline_json(f.dir.path());
  EXPECT_TRUE(second["snapshots"][0]["cached"].get<bool>());
  EXPECT_EQ(second["snapshots"][1]["scores"], first["snapshots"][1]["scores"]);
}

TEST(ExploreTools, BadHeadsStepsAndPositionsAre400WithAMessage) {
  KindFolder f(testutil::registered_kinds().front());
  SnapshotSettings s{5, 8};
  write_snapshot(f.dir.path(), 5, s, *f.model, f.tok, Objective::CLM);
  Running server(f.ckpt());
  const std::vector<RefusedRequest> cases = {
      {"/api/ablate", {{"text", "abc"}, {"heads", "2.0"}}, 400, "heads: head 2.0 does not exist"},
      {"/api/ablate", {{"text", "abc"}, {"heads", "0.7"}}, 400, "heads: head 0.7 does not exist"},
      {"/api/ablate", {{"text", "abc"}, {"heads", "0-1"}}, 400, "heads: '0-1' is not a head"},
      {"/api/ablate", {{"text", "abc"}, {"heads", "0.1,"}}, 400, "heads: '' is not a head"},
      {"/api/ablate", {{"text", "abc"}, {"heads", "0.1"}, {"how", "half"}}, 400, "how must be zero or mean"},
      {"/api/lens", {{"text", "abc"}, {"pos", "3"}}, 400, "pos must be a whole number from 0 to 2"},
      {"/api/lens", {{"text", "abc"}, {"pos", "-1"}}, 400, "pos must be a whole number from 0 to 2"},
      {"/api/ablate", {{"text", "abc"}, {"heads", "0.1"}, {"ckpt", "snapshots/step-00000007.safetensors"}}, 404,
       "no checkpoint named"},
      {"/api/timeline", {{"run", "/etc"}}, 400, "run: this server serves one run folder"},
      {"/api/timeline", {{"step", "7"}}, 400, "step 7: the run kept no snapshot at that step (it has 5)"},
      {"/api/timeline", {{"step", "x"}}, 400, "step must be a whole number"},
  };
  expect_refused(server, cases);
  // A snapshot is a checkpoint of the folder: listed, and its step selects it.
  auto [status, listed] = server.post("/api/checkpoints", {});
  EXPECT_EQ(status, 200);
  EXPECT_CONTAINS(listed.dump(), "snapshots/step-00000005.safetensors");
  auto [ok, a] = server.post("/api/ablate", {{"text", "abc.abc"}, {"heads", ""}, {"ckpt", "snapshots/step-00000005.safetensors"}});
  EXPECT_EQ(ok, 200) << a.dump();
  auto [t, timeline] = server.post("/api/timeline", {});
  EXPECT_EQ(t, 200) << timeline.dump();
  EXPECT_EQ(timeline["snapshots"][0]["step"], 5);
  auto [one, only] = server.post("/api/timeline", {{"step", "5"}});
  EXPECT_EQ(one, 200) << only.dump();
  EXPECT_EQ(only["snapshots"].size(), 1u);
  auto [l, lens] = server.post("/api/lens", {{"text", "abc.abc"}, {"pos", "2"}});
  EXPECT_EQ(l, 200) << lens.dump();
  EXPECT_EQ(lens["target"], ".");
}

// One head step by step: for every kind with queries and keys (MixerLab::qkv), the steps' weights are the forward's
// own and their weighted V the head's own output (model/head_shares.h); for a layer whose weights are exp(s·q·k) normalised, the weights are
// recomputed here from q·k, the scale and the mask, and checked against the double-precision textbook's P. A layer
// without queries and keys tells its kind's own steps (MixerLab::head_steps): they recompute the head's output, in
// double with the state carried from the first position, within float rounding of the model's own at the first,
// a middle and the last position of every head, and each names a textbook function its file defines.
TEST(ExploreHeadSteps, TheStepsReproduceTheHeadsOwnWeightsAndOutput) {
  int shown = 0, recurrent = 0;
  for (const std::string& mixer : testutil::registered_kinds()) {
    SCOPED_TRACE(mixer);
    KindFolder f(mixer);
    ExploredModel m(load_checkpoint(f.ckpt()));
    const std::vector<int> ids = f.ids(kText);
    const int pos = 12, T = (int)ids.size();
    m.logits_for(ids);
    if (!m.model().mixer(1).lab().qkv(m.model().mixer_pass(1).saved)) {
      for (int head = 0; head < m.model().config.n_head; head++)
        for (int at : {0, pos, T - 1}) {
          SCOPED_TRACE("head " + std::to_string(head) + " at " + std::to_string(at));
          const json j = head_steps_json(m, ids, at, 1, head);
          EXPECT_TRUE(j["recurrent"].get<bool>());
          ASSERT_EQ(j["output"].size(), j["model_output"].size());
          ASSERT_GT(j["output"].size(), 0u);
          for (size_t d = 0; d < j["output"].size(); d++) {
            const double want = j["model_output"][d].get<double>();
            EXPECT_NEAR(j["output"][d].get<double>(), want, 2e-5 + 2e-5 * std::fabs(want)) << d;
          }
          ASSERT_GE(j["steps"].size(), 4u);
          for (const json& st : j["steps"]) {
            const std::string file = st["file"].get<std::string>();
            EXPECT_CONTAINS(progutil::read_file(file), st["textbook"].get<std::string>() + "(") << file;
            EXPECT_GT(st["values"].size(), 0u) << st.dump();
          }
        }
      recurrent++;
      continue;
    }
    const json j = head_steps_json(m, ids, pos, 1, 1);
    shown++;
    ASSERT_EQ(j["weights"].size(), (size_t)T);
    for (int t = 0; t < T; t++) EXPECT_NEAR(j["weights"][t].get<double>(), j["model_weights"][t].get<double>(), 2e-6) << t;
    for (int d = 0; d < j["head_size"].get<int>(); d++)
      EXPECT_NEAR(j["output"][d].get<double>(), j["model_output"][d].get<double>(), 2e-5) << d;
    EXPECT_EQ(j["steps"].size(), 6u);
    if (!j["from_scores"].get<bool>()) continue;
    // The textbook's P of layer 1, head 1, row pos (the textbook model run in double on the same weights).
    ReferenceGPT<double> ref(m.model().config, m.model().masks());
    ref.params = testutil::to_double(m.model().params_memory());
    ref.forward(ids, {}, 1, T);
    const std::vector<double>& P = ref.layers[1].probs;  // (NH, T, T) of layer 1
    for (int t = 0; t < T; t++)
      EXPECT_NEAR(j["weights"][t].get<double>(), P[((size_t)1 * T + pos) * T + t], 1e-5) << t;
    for (int t = pos + 1; t < T; t++) EXPECT_EQ(j["allowed"][t], 0);
  }
  EXPECT_GE(shown, 1);
  EXPECT_GE(recurrent, 1);
  KindFolder f(testutil::registered_kinds().front());
  Running server(f.ckpt());
  for (const auto& [params, says] : std::vector<std::pair<httplib::Params, std::string>>{
           {{{"text", "abc"}, {"head", "2"}}, "head 2 does not exist (0 to 1)"},
           {{{"text", "abc"}, {"layer", "2"}}, "layer 2 does not exist (0 to 1)"},
           {{{"text", "abc"}, {"position", "3"}}, "position must be a whole number from 0 to 2"}}) {
    auto [status, j] = server.post("/api/head", params);
    EXPECT_EQ(status, 400) << j.dump();
    EXPECT_CONTAINS(j.value("error", std::string()), says);
  }
}
