# make compare: GPT vs BERT vs prefix-LM on the same corpus, steps and tokens (experiments/compare.cpp).
COMPARE_FLAGS ?=

.PHONY: compare
compare: build/bin/compare
	./build/bin/compare $(COMPARE_FLAGS)
-include build/experiments/compare.d
