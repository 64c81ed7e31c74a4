// The textbook's mixer seam, the double-precision counterpart of src/model/mixer.h: the GPT's block is
//   x ← x + mixer(ln_1(x)),   x ← x + mlp(ln_2(x))
// and reference.h's block calls the layer's textbook mixer through this interface only. The GPT's own mixer, its
// softmax heads, is in reference.h; every other kind is one header (textbook/<kind>.h) that defines its RefMixer and
// registers it, under the name its fast kind has in model/mixers/kinds.h, with
//   inline const bool ref_<kind>_registered = register_ref_mixer({"<kind>", make, test_shapes});
// That header is the kind's own, included by the kind's own tests (tests/test_<kind>.cpp), so the registration
// happens in the test program without a list of kinds anywhere: the one list is kinds.h, and the conformance suite
// (tests/test_every_kind.cpp) walks it, failing for a kind whose textbook is not registered or has no test shapes.
// A textbook mixer keeps nothing between its forward and its backward: the backward recomputes what it needs from
// the input, as every backward of the textbook does (slow, and obviously the formula).
#pragma once
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/config.h"
#include "ops/mask.h"

// A layer's tensor "h.{l}.<name>" by the name after that prefix ("attn.c_attn.weight"): its values, or its
// gradient (added to).
using RefTensor = std::function<const double*(const std::string& name)>;
using RefGrad = std::function<double*(const std::string& name)>;

// What every call shares: the layer's mask, its head gates ξ (NH of them, or null when off) and the shape.
struct RefMixerPass {
  const AttentionMask& mask;
  const double* gates;
  int B;
  int T;
  int C;
  int NH;
};

class RefMixer {
 public:
  virtual ~RefMixer() = default;
  // out (B·T, C) = mixer(u), without the residual; A (B, NH, T, T) the weights the fast mixer's lab reports
  // (MixerLab::implied_weights: softmax's P, or what the kind's math implies).
  virtual void forward(double* out, double* A, const double* u, const RefTensor& w, const RefMixerPass& x) const = 0;
  // For L = ⟨dout, mixer(u)⟩: du = ∂L/∂u written; g(name) += ∂L/∂(tensor); dgates += ∂L/∂ξ when the gates are on.
  virtual void backward(double* du, const RefGrad& g, double* dgates, const double* dout, const double* u,
                        const RefTensor& w, const RefMixerPass& x) const = 0;
};

// A kind's settings at the sizes the tests use, applied to a config whose shared settings are already set. Each kind
// writes only its own settings struct, so the shapes of the kinds in a hybrid compose.
struct RefTestShape {
  std::string name;  // "" for the kind's defaults, else what the variant is ("time-invariant", "erase off")
  std::function<void(ModelConfig& config)> apply;
};

struct RefMixerKind {
  std::string name;
  std::function<std::unique_ptr<RefMixer>(const ModelConfig& config)> make;
  // The first shape is the one every whole-model test uses for this kind; the others are the kind's variants (an
  // ablation, a setting's other branch), which the conformance suite also holds to this textbook. At least one.
  std::vector<RefTestShape> test_shapes;
  // What the fast model's gradients are measured against (tests/model_check.h, expect_fast_matches_reference): 0
  // for a textbook whose backward is derived by hand; for one whose backward is central differences, the fraction
  // of the model's largest gradient that the differences' error (the same for every tensor) amounts to.
  double gradient_floor = 0;
};

inline std::vector<RefMixerKind>& ref_mixer_kinds() {
  static std::vector<RefMixerKind> kinds;
  return kinds;
}
inline bool register_ref_mixer(RefMixerKind kind) {
  ref_mixer_kinds().push_back(std::move(kind));
  return true;
}
// The kind registered under `name`, or null.
inline const RefMixerKind* find_ref_mixer_kind(const std::string& name) {
  for (const RefMixerKind& kind : ref_mixer_kinds())
    if (kind.name == name) return &kind;
  return nullptr;
}
inline std::unique_ptr<RefMixer> make_ref_mixer(const std::string& name, const ModelConfig& config) {
  const RefMixerKind* kind = find_ref_mixer_kind(name);
  if (!kind)
    throw std::runtime_error("the textbook has no mixer '" + name + "': its header (textbook/" + name +
                             ".h or the like) registers it, and the kind's own test file must include that header");
  return kind->make(config);
}
