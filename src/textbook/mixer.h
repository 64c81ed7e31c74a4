// The textbook's mixer seam, the double-precision counterpart of src/model/mixer.h: the GPT's block is
//   x ← x + mixer(ln_1(x)),   x ← x + mlp(ln_2(x))
// and reference.h's block calls the layer's textbook mixer through this interface only. The GPT's own mixer, its
// softmax heads, is in reference.h; every other kind is one header (textbook/<kind>.h) that defines its RefMixer and
// registers it with one line,
//   inline const bool ref_<kind>_registered = register_ref_mixer({"<kind>", make});
// and one #include in textbook/mixers.h. The registry maps the kind's name (as --mixer spells it) to its maker,
// as model/mixers/registry.h does for the fast mixers.
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
  int B, T, C, NH;
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

struct RefMixerKind {
  std::string name;
  std::function<std::unique_ptr<RefMixer>(const ModelConfig& config)> make;
};

inline std::vector<RefMixerKind>& ref_mixer_kinds() {
  static std::vector<RefMixerKind> kinds;
  return kinds;
}
inline bool register_ref_mixer(RefMixerKind kind) {
  ref_mixer_kinds().push_back(std::move(kind));
  return true;
}
inline std::unique_ptr<RefMixer> make_ref_mixer(const std::string& name, const ModelConfig& config) {
  for (const RefMixerKind& kind : ref_mixer_kinds())
    if (kind.name == name) return kind.make(config);
  throw std::runtime_error("the textbook has no mixer '" + name + "' (textbook/mixers.h includes one header per kind)");
}
