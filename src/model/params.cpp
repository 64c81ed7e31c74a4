#include "model/params.h"

#include <cmath>
#include <stdexcept>

#include "base/rng.h"
#include "model/mixers/registry.h"

std::vector<TensorSpec> gpt_tensor_table(const ModelConfig& c) { return gpt_tensor_table(c, make_layer_mixers(c)); }

std::vector<TensorSpec> gpt_tensor_table(const ModelConfig& c, const std::vector<std::unique_ptr<Mixer>>& mixers) {
  const int64_t C = c.n_embd;
  const int64_t V = c.vocab_size;
  const int64_t maxT = c.block_size;
  std::vector<TensorSpec> table;
  size_t offset = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape, Init init, bool decay, bool matrix) -> TensorSpec& {
    size_t numel = 1;
    for (int64_t d : shape) numel *= (size_t)d;
    TensorSpec t{std::move(name), std::move(shape), init, decay, matrix, offset, numel};
    offset += numel;
    return table.emplace_back(std::move(t));
  };
  auto model = [&](const char* name, std::vector<int64_t> shape, Init init, bool decay, float* GPTParams::*slot) {
    add(name, std::move(shape), init, decay, false).model_slot = slot;
  };
  auto block = [&](int l, const char* name, std::vector<int64_t> shape, Init init, bool decay,
                   float* BlockParams::*slot) {
    const bool matrix = shape.size() == 2;  // mlp.c_fc, mlp.c_proj
    TensorSpec& t = add("h." + std::to_string(l) + "." + name, std::move(shape), init, decay, matrix);
    t.layer = l;
    t.block_slot = slot;
  };
  auto mixer = [&](int l, const std::vector<TensorDecl>& rows) {  // the rows its mixer declares
    for (size_t i = 0; i < rows.size(); i++) {
      const TensorDecl& r = rows[i];
      TensorSpec& t = add("h." + std::to_string(l) + "." + r.name, r.shape, r.init, r.weight_decay, r.matrix);
      t.layer = l;
      t.mixer_slot = (int)i;
      t.init_fn = r.init_fn;
    }
  };
  //    name                    shape        init                 decay  view
  model("wte.weight",           {V, C},      Init::Normal,        true,  &GPTParams::wte);
  if (c.positions == "learned")
    model("wpe.weight",         {maxT, C},   Init::Normal,        true,  &GPTParams::wpe);
  for (int l = 0; l < c.n_layer; l++) {
    block(l, "ln_1.weight",        {C},         Init::Ones,          false, &BlockParams::ln_1_w);
    block(l, "ln_1.bias",          {C},         Init::Zeros,         false, &BlockParams::ln_1_b);
    mixer(l, mixers[l]->tensors());
    if (c.no_mlp) continue;
    block(l, "ln_2.weight",        {C},         Init::Ones,          false, &BlockParams::ln_2_w);
    block(l, "ln_2.bias",          {C},         Init::Zeros,         false, &BlockParams::ln_2_b);
    block(l, "mlp.c_fc.weight",    {C, 4 * C},  Init::Normal,        true,  &BlockParams::mlp_fc_w);
    block(l, "mlp.c_fc.bias",      {4 * C},     Init::Zeros,         false, &BlockParams::mlp_fc_b);
    block(l, "mlp.c_proj.weight",  {4 * C, C},  Init::ResidualNormal, true, &BlockParams::mlp_proj_w);
    block(l, "mlp.c_proj.bias",    {C},         Init::Zeros,         false, &BlockParams::mlp_proj_b);
  }
  model("ln_f.weight",          {C},         Init::Ones,          false, &GPTParams::ln_f_w);
  model("ln_f.bias",            {C},         Init::Zeros,         false, &GPTParams::ln_f_b);
  return table;
}

size_t total_floats(const std::vector<TensorSpec>& table) {
  return table.empty() ? 0 : table.back().offset + table.back().numel;
}

// Slot i of a layer's mixer tensors; the table lists a layer's slots in order, so the list grows one at a time.
static void bind_mixer_slot(MixerParams& mixer, int slot, float* tensor) {
  if ((int)mixer.t.size() <= slot) mixer.t.resize(slot + 1, nullptr);
  mixer.t[slot] = tensor;
}

GPTParams bind_params(const std::vector<TensorSpec>& table, float* arena, int n_layer) {
  GPTParams views{};
  views.h.resize(n_layer);
  for (const TensorSpec& t : table) {
    if (t.layer < 0)
      views.*t.model_slot = arena + t.offset;
    else if (t.mixer_slot >= 0)
      bind_mixer_slot(views.h[t.layer].mixer, t.mixer_slot, arena + t.offset);
    else
      views.h[t.layer].*t.block_slot = arena + t.offset;
  }
  return views;
}

void init_params(const std::vector<TensorSpec>& table, float* arena, int n_layer, Rng& rng) {
  const double residual_std = 0.02 / std::sqrt(2.0 * n_layer);
  for (const TensorSpec& t : table) {
    float* p = arena + t.offset;
    for (size_t i = 0; i < t.numel; i++) {
      switch (t.init) {
        case Init::Normal:
          p[i] = (float)(0.02 * rng.normal());
          break;
        case Init::ResidualNormal:
          p[i] = (float)(residual_std * rng.normal());
          break;
        case Init::Zeros:
          p[i] = 0.0f;
          break;
        case Init::Ones:
          p[i] = 1.0f;
          break;
        case Init::Custom:
          break;
      }
    }
    if (t.init == Init::Custom) t.init_fn(p, t.numel, rng);
  }
}
