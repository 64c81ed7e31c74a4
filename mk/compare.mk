# make compare: GPT vs BERT vs prefix-LM on the same corpus, steps and tokens (experiments/compare.cpp).
# COMPARE_SEEDS: training seeds per model; the table shows mean ± sd over them. Reported numbers should use 3
# (docs/pronouns.md, "Error bars for make compare"); the default is 1 because each seed costs the whole run again.
COMPARE_FLAGS ?=
COMPARE_SEEDS ?= 1

.PHONY: compare
compare: build/bin/compare
	./build/bin/compare --seeds $(COMPARE_SEEDS) $(COMPARE_FLAGS)
-include build/experiments/compare.d
