// The registry's probe, for tests only: what it counts is no part of building a model.
#pragma once
#include <cstddef>

// How many mixers make_layer_mixers (registry.h) has made in this process: a model makes one per layer, once
// (validation, the memory estimate and the GPT share them); Training.EachMixerIsMadeOncePerLayerPerModel holds
// ./train to that.
size_t mixers_made();
