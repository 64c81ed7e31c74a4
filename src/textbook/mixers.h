// Every textbook mixer beside the GPT's softmax attention (reference.h), one #include each: each header registers
// its kind with the textbook registry (textbook/mixer.h). reference.h includes this list at its end, after the ops
// the kinds build on, so a ReferenceGPT knows every kind.
#pragma once
#include "textbook/linear_attention.h"
#include "textbook/mamba.h"
#include "textbook/rwkv.h"
