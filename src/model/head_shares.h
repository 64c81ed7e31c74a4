// What each head of a layer adds to the residual stream. Every mixer kind ends in an output projection,
//   mixer(u) = y·W + b         y (B, T, D), W (D, C), b (C) or none,
// whose input y holds the NH heads side by side: head h's share is columns h·D/NH … (h+1)·D/NH − 1 of y, and
//   mixer(u) = Σ_h y_h·W_h + b       (W_h: the rows of W that those columns multiply)
// exactly, since a product is a sum over its input's columns. For the attention family y is the heads' O (after
// the head gates, when on); for the recurrent kinds it is what enters their output projection, after the shared
// norm and gate. The explorer knocks a head out by removing y_h·W_h (explore/ablation.h) and attributes the logit
// to it through y_h·W_h (explore/lens.h). MixerLab::head_shares answers it for the last forward.
#pragma once

struct HeadShares {
  const float* y = nullptr;     // (B, T, width) the output projection's input in the last forward
  int width = 0;                // D
  const float* proj = nullptr;  // W (width, C), row-major [in, out] as every linear weight here
  const float* bias = nullptr;  // b (C), or null when the projection has none
};
