// Every mixer kind, one line each. MIXER_KIND(id) names the function `const MixerKind& id_kind()` that the kind's
// own file (model/mixers/id.cpp) defines: its name, summary, factory and settings rows (registry.h). This list is
// the kinds' only registration, and its order is the order --help and the settings table show them in.
// No include guard: registry.cpp includes it twice, with two meanings of MIXER_KIND.
MIXER_KIND(softmax_attention)
MIXER_KIND(linear_attention)
MIXER_KIND(mamba)
MIXER_KIND(rwkv)
MIXER_KIND(deltanet)
