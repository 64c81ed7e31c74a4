// How a layer declares one of its tensors, and where its op reads it. Here, below the ops, so that an op's header
// (ops/rwkv.h, ops/mamba.h, …) can declare its tensors in one table: name, shape, initialisation, the optimizer's
// treatment, and the member of the op's tensor struct that points at it. The model turns a layer's rows into the
// parameter table (model/params.h) and binds them (model/mixer.h, MixerSlots).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

class Rng;

// N(0, σ) names a normal distribution by its standard deviation σ, here and in every comment of the model.
enum class Init {
  Normal,          // N(0, 0.02)
  ResidualNormal,  // N(0, 0.02/√(2·n_layer)): projections that add into the residual stream (GPT-2 paper)
  Zeros,
  Ones,
  Custom,          // the row's own init function (a special initialisation, e.g. a recurrence's decay rates)
};

// One tensor a layer declares. Its full name is "h.{layer}." + name.
struct TensorDecl {
  std::string name;
  std::vector<int64_t> shape;
  Init init;
  bool weight_decay;  // AdamW's decoupled decay
  bool matrix;        // a linear map's weight: Muon orthogonalises its update (optim/muon.h)
  // For Init::Custom: fills the tensor's n floats, drawing from rng. A std::function, so that it may carry what it
  // needs besides n (e.g. a conv's width K, whose init bound is 1/√K).
  std::function<void(float* p, size_t n, Rng& rng)> init_fn = nullptr;
};

// A row of an op's tensor table: the declaration, and the member of the op's tensor struct Tensors<Ptr> that points
// at the tensor (Ptr = const float* to read the weights, float* to add to the gradients; the textbook uses double).
// An op writes its table once, as a function template of Ptr, so that both structs are bound from the same rows.
template <template <typename> class Tensors, typename Ptr>
struct TensorSlot {
  TensorDecl decl;
  Ptr Tensors<Ptr>::*member;
};
