// Attention masks (src/ops/mask.*) and what they do to the whole model:
//   * keys_for / allows against truth tables written here from the definitions, parsing and printing;
//   * the receptive field: a target at one position gets exactly zero gradient from every input position that no
//     path through the layers' masks connects it to (the connected set is composed here, layer by layer);
//   * the double reference model against central differences of itself, and the fast model against the reference,
//     under every mask kind and a mixed stack;
//   * the attention probabilities the fast model keeps: each row a distribution over the allowed keys, exactly 0
//     elsewhere, also after the masks change between two forwards of the same shape;
//   * the work a mask asks for (allowed query–key pairs), counted against closed forms.
//
// The definitions used as the independent truth here (T = sequence length, i = query, j = key, 0 ≤ i, j < T):
//   causal          j ≤ i
//   bidirectional   every j
//   prefix:N        i < N: j < N (the prefix sees itself fully);   i ≥ N: j < N or j ≤ i (the prefix and its own past)
//   window:W        j ≤ i and i − j < W (the last W positions, itself included)
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/cross_entropy.h"
#include "ops/mask.h"
#include "model/mixers/registry.h"
#include "model/model.h"
#include "data/objective.h"
#include "model/params.h"
#include "textbook/reference.h"
#include "mixer_kinds.h"
#include "model_check.h"
#include "test_util.h"
#include "base/threads.h"

using namespace testutil;

namespace {

// These tiny shapes run on one thread: on a busy machine every OpenMP barrier of a many-threaded run waits for
// a descheduled thread, which makes microsecond-sized forwards take milliseconds. Restores the count afterwards.
struct SingleThread {
  int saved = omp_get_max_threads();
  SingleThread() { set_threads(1); }
  ~SingleThread() { set_threads(saved); }
};

// ---- the definitions, written out independently of src/ops/mask.cpp ----------------------------------------------

bool defined_allows(const AttentionMask& m, int i, int j, int T) {
  if (i < 0 || i >= T || j < 0 || j >= T) return false;
  switch (m.kind) {
    case AttentionMask::Causal: return j <= i;
    case AttentionMask::Bidirectional: return true;
    case AttentionMask::Prefix: {
      const int N = m.size;
      if (i < N) return j < N;
      return j < N || j <= i;
    }
    case AttentionMask::Window: return j <= i && i - j < m.size;
  }
  return false;
}

AttentionMask mask_of(const std::string& text) { return AttentionMask::parse(text); }
std::vector<AttentionMask> stack_of(const std::string& text, int n_layer) { return parse_layer_masks(text, n_layer); }

ModelConfig make_config(int n_layer, int n_head, int n_embd, int block_size, int vocab_size,
                        const std::string& attention = "softmax") {
  ModelConfig c;
  c.n_layer = n_layer, c.n_head = n_head, c.n_embd = n_embd, c.block_size = block_size, c.vocab_size = vocab_size;
  c.mixer = attention;
  return c;
}

// The kinds every mask is also checked with: each registered kind that takes every mask (a recurrence is causal
// by construction and refuses the rest: the conformance suite checks that), everywhere, and a hybrid of them for
// an n_layer stack (the last such kind on even layers, the first on odd ones).
std::vector<std::string> attention_variants(int n_layer) {
  std::vector<std::string> kinds = testutil::kinds_that_take_every_mask();
  std::string hybrid;
  for (int l = 0; l < n_layer; l++) hybrid += std::string(l ? "," : "") + (l % 2 == 0 ? kinds.back() : kinds.front());
  kinds.push_back(hybrid);
  return kinds;
}


// Random targets with every third one kNoTarget, as an MLM batch has many ignored positions.
std::vector<int> random_targets(int n, int V, uint32_t seed) {
  std::vector<int> y = testutil::random_ids(n, V, seed);
  for (int i = 0; i < n; i++)
    if (i % 3 == 1) y[i] = kNoTarget;
  return y;
}

// The stacks every model-level test runs: each mask kind (two layers of it, so the relation composes) and mixed
// stacks. Degenerate sizes included: prefix:0 (= causal), prefix:T and prefix:>T (= bidirectional), window:1
// (itself only), window:T and window:>T (= causal). For T > 16 (the fast attention works on blocks of 16
// queries) also sizes that end inside a later block and windows wider than a block.
struct Stack {
  std::string text;
  int n_layer;
};
std::vector<Stack> stacks_for(int T) {
  const std::string t = std::to_string(T), more = std::to_string(T + 3);
  std::vector<Stack> stacks = {{"causal", 2},           {"bidirectional", 2},
                               {"prefix:0", 2},         {"prefix:3", 2},
                               {"prefix:" + t, 2},      {"prefix:" + more, 2},
                               {"window:1", 2},         {"window:3", 2},
                               {"window:" + t, 2},      {"window:" + more, 2},
                               {"causal,window:2,bidirectional", 3},
                               {"window:2,prefix:3,window:1", 3}};
  if (T > 16) {
    const std::string mid = std::to_string(T / 2 + 2);
    stacks.push_back({"prefix:" + mid, 2});
    stacks.push_back({"window:17", 2});
    stacks.push_back({"window:" + mid + ",prefix:" + mid, 2});
  }
  return stacks;
}

// Sequence lengths for the model-level tests: one block of queries, and three blocks with a short last one.
constexpr int kShortT = 8, kLongT = 37;

// Output positions probed at length T: all of them when short, block edges and a few others when long.
std::vector<int> probe_positions(int T) {
  std::vector<int> positions;
  for (int i = 0; i < T; i++)
    if (T <= 16 || i <= 1 || i % 16 == 15 || i % 16 == 0 || i == T / 2 || i >= T - 2) positions.push_back(i);
  return positions;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// keys_for and allows against literal truth tables (T = 5; row i lists keys j = 0 … 4, '1' = allowed)

namespace {

struct TruthTable {
  const char* mask;
  const char* rows[5];
};

const TruthTable kTables[] = {
    {"causal", {"10000", "11000", "11100", "11110", "11111"}},
    {"bidirectional", {"11111", "11111", "11111", "11111", "11111"}},
    {"prefix:0", {"10000", "11000", "11100", "11110", "11111"}},  // no prefix: causal
    {"prefix:3", {"11100", "11100", "11100", "11110", "11111"}},
    {"prefix:5", {"11111", "11111", "11111", "11111", "11111"}},  // N = T: everything is prefix
    {"prefix:7", {"11111", "11111", "11111", "11111", "11111"}},  // N > T: the same, clipped to the sequence
    {"window:1", {"10000", "01000", "00100", "00010", "00001"}},  // itself only
    {"window:3", {"10000", "11000", "11100", "01110", "00111"}},
    {"window:5", {"10000", "11000", "11100", "11110", "11111"}},  // W = T: causal
    {"window:7", {"10000", "11000", "11100", "11110", "11111"}},  // W > T: causal
};

}  // namespace

TEST(MaskTruthTable, AllowsAndKeysForMatchLiteralTables) {
  const int T = 5;
  for (const TruthTable& table : kTables) {
    SCOPED_TRACE(table.mask);
    const AttentionMask m = mask_of(table.mask);
    for (int i = 0; i < T; i++) {
      const std::string row = table.rows[i];
      for (int j = 0; j < T; j++) {
        EXPECT_EQ(m.allows(i, j, T), row[j] == '1') << "query " << i << " key " << j;
        EXPECT_EQ(defined_allows(m, i, j, T), row[j] == '1') << "the test's own definition, query " << i << " key " << j;
      }
      // keys_for is the run of '1's in the row: begin = first '1', end = one past the last.
      const int begin = (int)row.find('1'), end = (int)row.rfind('1') + 1;
      const KeyRange r = m.keys_for(i, T);
      EXPECT_EQ(r.begin, begin) << "query " << i;
      EXPECT_EQ(r.end, end) << "query " << i;
      // Outside the sequence nothing is allowed.
      EXPECT_FALSE(m.allows(i, -1, T)) << "query " << i;
      EXPECT_FALSE(m.allows(i, T, T)) << "query " << i;
    }
  }
}

// The same relation over many sequence lengths and sizes, against the definitions.
TEST(MaskTruthTable, AllowsAndKeysForMatchDefinitionsForManySizes) {
  std::vector<AttentionMask> masks = {mask_of("causal"), mask_of("bidirectional")};
  for (int n = 0; n <= 14; n++) masks.push_back(mask_of("prefix:" + std::to_string(n)));
  for (int w = 1; w <= 14; w++) masks.push_back(mask_of("window:" + std::to_string(w)));
  for (int T = 1; T <= 12; T++)
    for (const AttentionMask& m : masks)
      for (int i = 0; i < T; i++) {
        const KeyRange r = m.keys_for(i, T);
        ASSERT_TRUE(0 <= r.begin && r.begin <= r.end && r.end <= T) << m.to_string() << " T=" << T << " i=" << i;
        ASSERT_TRUE(r.begin <= i && i < r.end) << m.to_string() << ": every position sees itself, T=" << T;
        for (int j = 0; j < T; j++) {
          ASSERT_EQ(m.allows(i, j, T), defined_allows(m, i, j, T)) << m.to_string() << " T=" << T << " " << i << "," << j;
          ASSERT_EQ(r.begin <= j && j < r.end, defined_allows(m, i, j, T)) << m.to_string() << " T=" << T;
        }
      }
}

TEST(MaskTruthTable, PrefixZeroEqualsCausal) {
  const AttentionMask prefix0 = mask_of("prefix:0"), causal = mask_of("causal");
  EXPECT_EQ(prefix0.kind, AttentionMask::Prefix);
  EXPECT_EQ(prefix0.size, 0);
  for (int T = 1; T <= 20; T++)
    for (int i = 0; i < T; i++) {
      EXPECT_EQ(prefix0.keys_for(i, T).begin, causal.keys_for(i, T).begin);
      EXPECT_EQ(prefix0.keys_for(i, T).end, causal.keys_for(i, T).end);
      for (int j = 0; j < T; j++) ASSERT_EQ(prefix0.allows(i, j, T), causal.allows(i, j, T)) << T << " " << i << "," << j;
    }
}

// sees_future: whether some query may see a later key, from the definition.
TEST(MaskTruthTable, SeesFutureMatchesTheDefinition) {
  for (int T = 1; T <= 10; T++)
    for (const char* text : {"causal", "bidirectional", "prefix:0", "prefix:1", "prefix:2", "prefix:4", "prefix:12",
                             "window:1", "window:2", "window:9", "window:30"}) {
      const AttentionMask m = mask_of(text);
      bool future = false;
      for (int i = 0; i < T; i++)
        for (int j = i + 1; j < T; j++) future |= defined_allows(m, i, j, T);
      EXPECT_EQ(m.sees_future(T), future) << text << " T=" << T;
    }
  // Spot values: a one-token prefix is causal; window never looks ahead.
  EXPECT_FALSE(mask_of("prefix:1").sees_future(8));
  EXPECT_TRUE(mask_of("prefix:2").sees_future(8));
  EXPECT_TRUE(mask_of("bidirectional").sees_future(2));
  EXPECT_FALSE(mask_of("bidirectional").sees_future(1));  // a single position has no future
  EXPECT_FALSE(mask_of("window:100").sees_future(8));
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing and printing

TEST(MaskParse, RoundTripsThroughToString) {
  for (const char* text : {"causal", "bidirectional", "prefix:0", "prefix:3", "prefix:64", "prefix:100000", "window:1",
                           "window:3", "window:64", "window:999999999"}) {
    const AttentionMask m = mask_of(text);
    EXPECT_EQ(m.to_string(), text);
    EXPECT_EQ(mask_of(m.to_string()), m) << text;
  }
  EXPECT_EQ(mask_of("causal").kind, AttentionMask::Causal);
  EXPECT_EQ(mask_of("bidirectional").kind, AttentionMask::Bidirectional);
  EXPECT_EQ(mask_of("prefix:7").kind, AttentionMask::Prefix);
  EXPECT_EQ(mask_of("prefix:7").size, 7);
  EXPECT_EQ(mask_of("window:5").kind, AttentionMask::Window);
  EXPECT_EQ(mask_of("window:5").size, 5);
  EXPECT_NE(mask_of("window:5"), mask_of("window:6"));
  EXPECT_NE(mask_of("window:5"), mask_of("prefix:5"));
}

TEST(MaskParse, RejectsBadSpellingsNamingThem) {
  for (const char* bad : {"sideways", "window:0", "prefix:-1", "window:", "window:abc", "prefix:", "Causal", "",
                          "window:-2", "window:3x", "window: 3", "prefix:1.5", "window:1234567890", " causal"}) {
    std::string message;
    try {
      AttentionMask::parse(bad);
    } catch (const std::runtime_error& e) {
      message = e.what();
    }
    EXPECT_FALSE(message.empty()) << "parse accepted '" << bad << "'";
    EXPECT_NE(message.find("'" + std::string(bad) + "'"), std::string::npos)
        << "the message should quote the input '" << bad << "': " << message;
  }
}

TEST(MaskParse, LayerMasksExpandOneOrTakeExactlyNLayer) {
  // One mask: every layer gets it.
  const std::vector<AttentionMask> three = parse_layer_masks("window:4", 3);
  ASSERT_EQ(three.size(), 3u);
  for (const AttentionMask& m : three) EXPECT_EQ(m, mask_of("window:4"));
  ASSERT_EQ(parse_layer_masks("causal", 1).size(), 1u);
  // A list: one per layer, in order.
  const std::vector<AttentionMask> mixed = parse_layer_masks("causal,window:2,bidirectional", 3);
  ASSERT_EQ(mixed.size(), 3u);
  EXPECT_EQ(mixed[0], mask_of("causal"));
  EXPECT_EQ(mixed[1], mask_of("window:2"));
  EXPECT_EQ(mixed[2], mask_of("bidirectional"));
  // masks_to_string reads back to the same stack, compactly when all layers agree.
  EXPECT_EQ(masks_to_string(mixed), "causal,window:2,bidirectional");
  EXPECT_EQ(parse_layer_masks(masks_to_string(mixed), 3), mixed);
  EXPECT_EQ(masks_to_string(three), "window:4");
  EXPECT_EQ(parse_layer_masks(masks_to_string(three), 3), three);
  // A list of the wrong length, an empty entry or a bad entry is an error.
  for (auto [text, n] : std::vector<std::pair<std::string, int>>{{"causal,causal", 3},
                                                                 {"causal,causal,causal,causal", 3},
                                                                 {"causal,window:2", 1},
                                                                 {"causal,,causal", 3},
                                                                 {"causal,", 2},
                                                                 {"causal,sideways", 2},
                                                                 {"", 2}}) {
    EXPECT_THROW(parse_layer_masks(text, n), std::runtime_error) << "'" << text << "' for " << n << " layers";
  }
  std::string message;
  try {
    parse_layer_masks("causal,causal", 3);
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("2 entries"), std::string::npos) << message;
  EXPECT_NE(message.find("3 layers"), std::string::npos) << message;
}

// ---------------------------------------------------------------------------------------------------------------
// Receptive field of the fast model: with a loss at one output position i only, the gradient reaching the input
// at position j (wpe row j, which is used only at position j) is exactly 0 unless some path through the layers
// connects i to j, and non-zero where one does.

namespace {

// Input positions that output position i can depend on. Walking down from the top block: the residual path keeps
// every position already reached, and attention at layer l adds each key that a reached query may see.
std::vector<bool> reachable_from(const std::vector<AttentionMask>& masks, int i, int T) {
  std::vector<bool> reached(T, false);
  reached[i] = true;
  for (int l = (int)masks.size() - 1; l >= 0; l--) {
    std::vector<bool> below = reached;
    for (int q = 0; q < T; q++)
      if (reached[q])
        for (int j = 0; j < T; j++)
          if (defined_allows(masks[l], q, j, T)) below[j] = true;
    reached = below;
  }
  return reached;
}

}  // namespace

TEST(MaskReceptiveField, GradientIsExactlyZeroOutsideTheComposedMasks) {
  SingleThread one_thread;
  const int B = 2;
  for (int T : {kShortT, kLongT})
  for (const Stack& s : stacks_for(T))
  for (const std::string& attention : attention_variants(s.n_layer)) {  // linear layers must hide the same keys
    SCOPED_TRACE("attention " + attention);
    const ModelConfig c = make_config(s.n_layer, 2, 8, T, 9, attention);
    GPT model(c, stack_of(s.text, s.n_layer));
    load_params(model, testutil::random_params(c, 101));
    const std::vector<int> x = testutil::random_ids(B * T, c.vocab_size, 102), y_all = testutil::random_ids(B * T, c.vocab_size, 103);
    int hidden_total = 0;
    for (int i : probe_positions(T)) {
      SCOPED_TRACE("masks " + s.text + ", T=" + std::to_string(T) + ", loss at position " + std::to_string(i));
      std::vector<int> y(B * T, kNoTarget);
      for (int b = 0; b < B; b++) y[b * T + i] = y_all[b * T + i];
      model.zero_grad();
      model.forward(x.data(), y.data(), B, T);
      model.backward();
      const std::vector<bool> reached = reachable_from(model.masks(), i, T);
      // A linear layer under a window mask subtracts each key from its running sums when the key leaves the
      // window (linear_attention.h), so a key behind the window gets a float residue (~1e-8 of the gradient's
      // scale) instead of an exact 0. Keys after the query are never added before the query is read: the causal
      // property (no gradient to a later position) stays exact for every stack.
      double largest = 0;
      for (int k = 0; k < T * c.n_embd; k++) largest = std::max(largest, (double)std::fabs(model.grads().wpe[k]));
      const bool residue_possible = attention != "softmax" && s.text.find("window") != std::string::npos;
      for (int j = 0; j < T; j++) {
        double row = 0;
        for (int k = 0; k < c.n_embd; k++) row += std::fabs(model.grads().wpe[j * c.n_embd + k]);
        if (reached[j]) {
          EXPECT_GT(row, 0.0) << "position " << j << " is connected to " << i << " but gets no gradient";
        } else {
          hidden_total++;
          for (int k = 0; k < c.n_embd; k++) {
            const float g = model.grads().wpe[j * c.n_embd + k];
            if (residue_possible && j < i)
              ASSERT_LE(std::fabs(g), 1e-5 * largest) << "position " << j << " is behind the window of " << i;
            else
              ASSERT_EQ(g, 0.0f) << "position " << j << " is hidden from " << i;
          }
        }
      }
    }
    // Stacks that hide something at every length must actually have exercised the zero check.
    for (const char* hides : {"causal", "prefix:0", "prefix:3", "window:1", "window:3", "window:2,prefix:3,window:1"})
      if (s.text == hides) {
        EXPECT_GT(hidden_total, 0) << s.text << " T=" << T;
      }
  }
}

// The composed reachable sets themselves, for a few stacks, against hand-derived facts.
TEST(MaskReceptiveField, ComposedReachabilityMatchesHandDerivedFacts) {
  const int T = 8;
  // L layers of window:W reach back L·(W−1) positions.
  for (int i = 0; i < T; i++) {
    const std::vector<bool> r = reachable_from(stack_of("window:3", 2), i, T);
    for (int j = 0; j < T; j++) EXPECT_EQ(r[j], j <= i && i - j <= 4) << i << "," << j;
  }
  // A bidirectional layer anywhere below a causal one connects position 0 to the last position...
  const std::vector<bool> r0 = reachable_from(stack_of("bidirectional,causal", 2), 0, T);
  for (int j = 0; j < T; j++) EXPECT_TRUE(r0[j]);
  // ...and a bidirectional top layer does too, whatever lies below it.
  const std::vector<bool> r1 = reachable_from(stack_of("causal,window:2,bidirectional", 3), 0, T);
  for (int j = 0; j < T; j++) EXPECT_TRUE(r1[j]);
  // window:2 then prefix:3 then window:1 (bottom to top): position 1 sees the prefix {0,1,2}, whose window reaches
  // nothing further back; position 6 sees 0…6 through prefix:3 and nothing later.
  const std::vector<bool> r2 = reachable_from(stack_of("window:2,prefix:3,window:1", 3), 1, T);
  for (int j = 0; j < T; j++) EXPECT_EQ(r2[j], j <= 2) << j;
  const std::vector<bool> r3 = reachable_from(stack_of("window:2,prefix:3,window:1", 3), 6, T);
  for (int j = 0; j < T; j++) EXPECT_EQ(r3[j], j <= 6) << j;
}

// ---------------------------------------------------------------------------------------------------------------
// Gradients under every mask: the double reference against central differences of its own forward (every
// parameter), and the fast float model against the reference (loss, logits, P, every gradient): model_check.h.

TEST(MaskGradients, ReferenceMatchesFiniteDifferencesUnderEveryMask) {
  SingleThread one_thread;
  const int B = 2, T = 6;
  const std::vector<int> x = testutil::random_ids(B * T, 7, 301), y = random_targets(B * T, 7, 302);
  for (const Stack& s : stacks_for(T)) {
    SCOPED_TRACE("masks " + s.text);
    const ModelConfig c = make_config(s.n_layer, 2, 8, T, 7);
    expect_reference_matches_finite_differences(c, stack_of(s.text, s.n_layer), x, y, B, T);
  }
}

TEST(MaskGradients, FastModelMatchesReferenceUnderEveryMask) {
  SingleThread one_thread;
  const int B = 2;
  for (int T : {kShortT, kLongT}) {
    const std::vector<int> x = testutil::random_ids(B * T, 9, 311), y = random_targets(B * T, 9, 312);
    for (const Stack& s : stacks_for(T)) {
      SCOPED_TRACE("masks " + s.text + " T=" + std::to_string(T));
      const ModelConfig c = make_config(s.n_layer, 2, 8, T, 9);
      expect_fast_matches_reference(c, stack_of(s.text, s.n_layer), x, y, B, T);
    }
  }
  // A sequence shorter than block_size: prefix:N and window:W are relative to the T of the forward.
  const int T_short = 5;
  const std::vector<int> xs = testutil::random_ids(B * T_short, 9, 313), ys = random_targets(B * T_short, 9, 314);
  for (const char* text : {"prefix:3", "prefix:5", "prefix:8", "window:3", "window:5", "causal,window:2,bidirectional"}) {
    SCOPED_TRACE(std::string("T=5 masks ") + text);
    const int L = std::string(text).find(',') == std::string::npos ? 2 : 3;
    expect_fast_matches_reference(make_config(L, 2, 8, 8, 9), stack_of(text, L), xs, ys, B, T_short);
  }
}

// Layers of the other kinds that take every mask (attention_variants: linear attention today), every layer of one
// kind and the hybrid, under every mask: the fast model against the double reference (every stack at the short length, a few at the long one), and the reference against finite
// differences on one stack of each mask kind (finite differences of the whole model are the slow part).
static bool representative(const std::string& stack) {
  return stack == "causal" || stack == "bidirectional" || stack == "prefix:3" || stack == "window:3" ||
         stack == "causal,window:2,bidirectional";
}

TEST(MaskGradients, KindsThatTakeEveryMaskAndTheirHybridMatchReferenceAndFiniteDifferences) {
  SingleThread one_thread;
  const int B = 2;
  for (int T : {kShortT, kLongT}) {
    const std::vector<int> x = testutil::random_ids(B * T, 9, 331), y = random_targets(B * T, 9, 332);
    for (const Stack& s : stacks_for(T))
      for (const std::string& attention : attention_variants(s.n_layer)) {
        if (T == kLongT && !representative(s.text)) continue;
        if (attention == "softmax") continue;  // covered above
        SCOPED_TRACE("masks " + s.text + " attention " + attention + " T=" + std::to_string(T));
        expect_fast_matches_reference(make_config(s.n_layer, 2, 8, T, 9, attention), stack_of(s.text, s.n_layer), x,
                                      y, B, T);
      }
  }
  const int T = 6;
  const std::vector<int> x = testutil::random_ids(B * T, 7, 341), y = random_targets(B * T, 7, 342);
  for (const Stack& s : stacks_for(T))
    for (const std::string& attention : attention_variants(s.n_layer)) {
      if (attention == "softmax" || !representative(s.text)) continue;
      SCOPED_TRACE("finite differences, masks " + s.text + " attention " + attention);
      expect_reference_matches_finite_differences(make_config(s.n_layer, 2, 8, T, 7, attention),
                                                  stack_of(s.text, s.n_layer), x, y, B, T);
    }
  // Two threads split the (batch, head) pairs of the other kinds' ops too: the three-layer hybrid of
  // attention_variants, the last kind that takes every mask around the first.
  const int saved = omp_get_max_threads();
  set_threads(2);
  const std::vector<int> xl = testutil::random_ids(B * kLongT, 9, 351), yl = random_targets(B * kLongT, 9, 352);
  expect_fast_matches_reference(make_config(3, 2, 8, kLongT, 9, attention_variants(3).back()),
                                stack_of("causal,window:2,bidirectional", 3), xl, yl, B, kLongT);
  set_threads(saved);
}

// The fast attention splits (batch, head) pairs between threads: the same checks with two of them, on a few
// stacks at the multi-block length (fewer, as every parallel region waits for both threads on a busy machine).
TEST(MaskGradients, FastModelMatchesReferenceWithTwoThreads) {
  const int saved = omp_get_max_threads();
  set_threads(2);
  const int B = 2, T = kLongT;
  const std::vector<int> x = testutil::random_ids(B * T, 9, 321), y = random_targets(B * T, 9, 322);
  for (const char* text : {"causal,window:2,bidirectional", "window:5,prefix:20,causal"}) {
    SCOPED_TRACE(std::string("two threads, masks ") + text);
    expect_fast_matches_reference(make_config(3, 2, 8, T, 9), stack_of(text, 3), x, y, B, T);
  }
  set_threads(saved);
}

// ---------------------------------------------------------------------------------------------------------------
// The attention probabilities the fast model keeps

namespace {

// Every row of every layer's P: a distribution over the keys the definition allows (each > 0, summing to 1) and
// exactly 0.0f at every other key.
void expect_probs_follow_masks(const GPT& model, int B, int T, const std::string& what) {
  const int NH = model.config.n_head;
  for (int l = 0; l < model.config.n_layer; l++) {
    const float* P = model.mixing_weights(l);
    for (int bh = 0; bh < B * NH; bh++)
      for (int i = 0; i < T; i++) {
        double sum = 0;
        for (int j = 0; j < T; j++) {
          const float p = P[((size_t)bh * T + i) * T + j];
          if (defined_allows(model.masks()[l], i, j, T)) {
            ASSERT_GT(p, 0.0f) << what << ": layer " << l << " row " << i << " allowed key " << j;
            sum += p;
          } else {
            ASSERT_EQ(p, 0.0f) << what << ": layer " << l << " (" << model.masks()[l].to_string() << ") row " << i
                               << " forbidden key " << j;
          }
        }
        ASSERT_NEAR(sum, 1.0, 1e-5) << what << ": layer " << l << " row " << i;
      }
  }
}

}  // namespace

TEST(MaskAttentionProbs, RowsAreDistributionsOverAllowedKeysForEveryMask) {
  SingleThread one_thread;
  const int B = 2;
  for (int T : {kShortT, kLongT})
  for (const Stack& s : stacks_for(T)) {
    const ModelConfig c = make_config(s.n_layer, 2, 8, T, 9);
    GPT model(c, stack_of(s.text, s.n_layer));
    model.init_weights(5);
    const std::vector<int> x = testutil::random_ids(B * T, c.vocab_size, 401);
    model.forward(x.data(), nullptr, B, T);
    expect_probs_follow_masks(model, B, T, s.text + " T=" + std::to_string(T));
  }
}

// One model, one shape, the masks changed between forwards: nothing a wider earlier mask wrote may survive.
TEST(MaskAttentionProbs, NoStaleValuesAfterTheMasksChange) {
  SingleThread one_thread;
  const int B = 2;
  for (int T : {kShortT, kLongT}) {
    SCOPED_TRACE("T=" + std::to_string(T));
    const ModelConfig c = make_config(2, 2, 8, T, 9);
    GPT model(c, stack_of("bidirectional", 2));
    load_params(model, testutil::random_params(c, 402));
    const std::vector<int> x = testutil::random_ids(B * T, c.vocab_size, 403);
    const std::string mid = "prefix:" + std::to_string(T - 2), small = "prefix:2";
    for (const std::string& text :
         {std::string("bidirectional"), std::string("causal"), std::string("bidirectional"), std::string("window:1"),
          mid, small, std::string("window:3"), std::string("bidirectional"), std::string("prefix:0"),
          std::string("bidirectional"), std::string("window:2,bidirectional"), std::string("bidirectional,window:1"),
          std::string("window:1")}) {
      model.set_masks(stack_of(text, 2));
      model.forward(x.data(), nullptr, B, T);
      expect_probs_follow_masks(model, B, T, "after switching to " + text);
    }
    // prefix-LM changes N in place between steps.
    model.set_masks(stack_of("prefix:" + std::to_string(T - 1), 2));
    model.forward(x.data(), nullptr, B, T);
    expect_probs_follow_masks(model, B, T, "prefix:T-1");
    for (int N : {1, T / 2 + 1, 0, T, 3}) {
      model.set_prefix_length(N);
      model.forward(x.data(), nullptr, B, T);
      expect_probs_follow_masks(model, B, T, "after set_prefix_length " + std::to_string(N));
    }
    // And shape changes interleaved with mask changes (the arena is re-carved for a smaller T, then grown back).
    model.set_masks(stack_of("bidirectional", 2));
    model.forward(x.data(), nullptr, B, T);
    model.set_masks(stack_of("window:1", 2));
    model.forward(x.data(), nullptr, 1, 5);
    expect_probs_follow_masks(model, 1, 5, "window:1 at B=1 T=5 after bidirectional at full T");
    model.set_masks(stack_of("bidirectional", 2));
    model.forward(x.data(), nullptr, 1, 5);
    model.set_masks(stack_of("causal", 2));
    model.forward(x.data(), nullptr, B, T);
    expect_probs_follow_masks(model, B, T, "causal at full T after bidirectional at T=5");
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Work follows the mask: the number of (query, key) pairs each mask lets attention visit at T = 64.

namespace {

long pairs_in_ranges(const AttentionMask& m, int T) {
  long n = 0;
  for (int i = 0; i < T; i++) {
    const KeyRange r = m.keys_for(i, T);
    n += r.end - r.begin;
  }
  return n;
}

long pairs_allowed(const AttentionMask& m, int T) {
  long n = 0;
  for (int i = 0; i < T; i++)
    for (int j = 0; j < T; j++) n += m.allows(i, j, T);
  return n;
}

}  // namespace

TEST(MaskWork, AllowedPairsMatchClosedForms) {
  const long T = 64;
  const long causal = T * (T + 1) / 2, bidirectional = T * T;
  EXPECT_EQ(pairs_in_ranges(mask_of("causal"), T), causal);  // 2080
  EXPECT_EQ(pairs_allowed(mask_of("causal"), T), causal);
  EXPECT_EQ(pairs_in_ranges(mask_of("bidirectional"), T), bidirectional);  // 4096
  EXPECT_EQ(pairs_allowed(mask_of("bidirectional"), T), bidirectional);
  // causal ≈ half of bidirectional (exactly (T+1)/(2T))
  EXPECT_NEAR((double)causal / bidirectional, 0.5, 0.01);
  // window:W: the first W−1 queries see 1 … W−1 keys, the rest exactly W: W·T − W(W−1)/2 = O(T·W).
  for (long W : {1, 2, 4, 8, 16, 64, 100}) {
    const long w = std::min(W, T);
    const long expected = w * T - w * (w - 1) / 2;
    EXPECT_EQ(pairs_in_ranges(mask_of("window:" + std::to_string(W)), T), expected) << W;
    EXPECT_EQ(pairs_allowed(mask_of("window:" + std::to_string(W)), T), expected) << W;
    EXPECT_LE(expected, W * T);
  }
  EXPECT_EQ(pairs_in_ranges(mask_of("window:4"), T), 4 * 64 - 6);  // 250, ~6% of bidirectional
  // prefix:N: N queries see N keys, the others their own past: N² + T(T+1)/2 − N(N+1)/2.
  for (long N : {0, 1, 10, 32, 64, 80}) {
    const long n = std::min(N, T);
    const long expected = n * n + T * (T + 1) / 2 - n * (n + 1) / 2;
    EXPECT_EQ(pairs_in_ranges(mask_of("prefix:" + std::to_string(N)), T), expected) << N;
    EXPECT_EQ(pairs_allowed(mask_of("prefix:" + std::to_string(N)), T), expected) << N;
  }
}

// In the model itself, the entries of P that attention fills are exactly the allowed pairs, per (b, h, layer).
TEST(MaskWork, ModelFillsExactlyTheAllowedPairs) {
  SingleThread one_thread;
  const int B = 1, T = 64;
  const ModelConfig c = make_config(1, 2, 16, T, 11);
  GPT model(c);
  model.init_weights(9);  // small weights: every allowed probability is far from underflowing
  const std::vector<int> x = testutil::random_ids(B * T, c.vocab_size, 501);
  for (const char* text : {"causal", "bidirectional", "window:4", "window:16", "prefix:10"}) {
    model.set_masks(stack_of(text, 1));
    model.forward(x.data(), nullptr, B, T);
    long nonzero = 0;
    const float* P = model.mixing_weights(0);
    for (size_t k = 0; k < (size_t)B * c.n_head * T * T; k++) nonzero += P[k] != 0.0f;
    long expected = 0;
    for (int i = 0; i < T; i++)
      for (int j = 0; j < T; j++) expected += defined_allows(mask_of(text), i, j, T);
    EXPECT_EQ(nonzero, expected * B * c.n_head) << text;
  }
}
