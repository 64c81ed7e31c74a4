# make compare: GPT vs BERT vs prefix-LM on the same corpus, steps and tokens (experiments/compare.cpp).
# COMPARE_SEEDS: training seeds per model; the table shows mean ± sd over them. Reported numbers should use 3
# (docs/pronouns.md, "Error bars for make compare"); the default is 1 because each seed costs the whole run again.
COMPARE_FLAGS ?=
COMPARE_SEEDS ?= 1

.PHONY: compare
compare: build/bin/compare
	./build/bin/compare --seeds $(COMPARE_SEEDS) $(COMPARE_FLAGS)
-include build/experiments/compare.d

# make mixers: every registered mixer kind and a softmax/Mamba hybrid (MIXERS_HYBRID) on Tiny Shakespeare
# (experiments/mixers.cpp): validation loss at equal steps and at equal wall-clock (step budgets from one alternated
# timing run), 3 seeds, the tiny preset, one thread (docs/recall.md §2 holds a measured run: 3 seeds × 2 budgets per
# model, softmax's two budgets one run; the six default models, 33 runs, took 47 minutes on one core beside other
# work). Output in build/mixers/. MIXERS_FLAGS="--models …" picks
# models, e.g. --models softmax,rwkv,rwkv:rwkv_erase=0.
MIXERS_DATA  ?= $(firstword $(wildcard ../shared/data/tinyshakespeare.txt) data/stories.txt)
MIXERS_HYBRID ?= softmax,mamba,softmax,mamba
MIXERS_FLAGS ?=
.PHONY: mixers
mixers: build/bin/mixers
	OMP_WAIT_POLICY=passive nice -n 5 ./build/bin/mixers --data $(MIXERS_DATA) --threads 1 --hybrid $(MIXERS_HYBRID) \
	  $(MIXERS_FLAGS)
-include build/experiments/mixers.d
