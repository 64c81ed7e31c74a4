# make pronouns-lab: do any heads resolve pronouns? (experiments/pronouns.cpp, docs/pronouns.md)
#   Trains, or reuses when present, the tiny model with nanoGPT's recipe (--preset nanogpt: the `make train` recipe
#   these tables were first measured with) for three seeds, and a longer-trained model of the same shape (PRONOUN_LONG_STEPS; 8000 steps take 6-13 minutes on two idle cores), then
#   writes docs/pronouns_tables.md and docs/pronouns_accuracy.svg. A checkpoint that is present but was trained for
#   another number of steps is an error (delete it to retrain).
#   PRONOUN_SEEDS        seeds of the 2000-step models (out/pronouns/tiny-seedN)          default 1337 1338 1339
#   PRONOUN_LONG_SEEDS   seeds of the longer run                                          default 1337
#   PRONOUN_LONG_STEPS   its steps                                                        default 8000
#   PRONOUN_THREADS      threads per training run (0 = all cores, as make train)           default 0
#   PRONOUNS_FLAGS       more flags for build/bin/pronouns (--ablate 4, --resamples 2000, …)
.PHONY: pronouns-lab pronoun-tables
PRONOUN_SEEDS      ?= 1337 1338 1339
PRONOUN_LONG_SEEDS ?= 1337
PRONOUN_LONG_STEPS ?= 8000
PRONOUN_THREADS    ?= 0
PRONOUNS_FLAGS     ?=
comma := ,
empty :=
space := $(empty) $(empty)

# The corpus's tables and the probe set, written by the deterministic generator (never data/stories.txt itself).
build/names.tsv: build/make_stories
	./build/make_stories --out build/stories_for_names.txt --mentions $@
	@cmp -s build/stories_for_names.txt data/stories.txt || echo "warning: build/stories_for_names.txt differs from data/stories.txt"
build/probes.txt: build/make_stories
	./build/make_stories --probes 2000 --seed 1 --out $@ --antecedents build/probes.tsv --mentions build/probe_names.tsv
pronoun-tables: build/pronouns.tsv build/names.tsv build/probes.txt

PRONOUN_TINY := $(foreach s,$(PRONOUN_SEEDS),out/pronouns/tiny-seed$(s))
PRONOUN_LONG := $(foreach s,$(PRONOUN_LONG_SEEDS),out/pronouns/long$(PRONOUN_LONG_STEPS)-seed$(s))
PRONOUN_TRAIN = OMP_WAIT_POLICY=passive nice -n 19 ./build/bin/train --preset nanogpt --data data/stories.txt \
	--threads $(PRONOUN_THREADS)

out/pronouns/tiny-seed%/ckpt.safetensors: | build/bin/train
	$(PRONOUN_TRAIN) --seed $* --out $(dir $@)
out/pronouns/long$(PRONOUN_LONG_STEPS)-seed%/ckpt.safetensors: | build/bin/train
	$(PRONOUN_TRAIN) --seed $* --steps $(PRONOUN_LONG_STEPS) --out $(dir $@)

pronouns-lab: build/bin/pronouns pronoun-tables $(addsuffix /ckpt.safetensors,$(PRONOUN_TINY) $(PRONOUN_LONG))
	OMP_WAIT_POLICY=passive nice -n 19 ./build/bin/pronouns \
	  --group tiny=$(subst $(space),$(comma),$(PRONOUN_TINY)) --expect tiny=2000 \
	  --group long$(PRONOUN_LONG_STEPS)=$(subst $(space),$(comma),$(PRONOUN_LONG)) \
	  --expect long$(PRONOUN_LONG_STEPS)=$(PRONOUN_LONG_STEPS) $(PRONOUNS_FLAGS)

# tests/test_pronouns.cpp runs the generator's probe mode.
test: build/make_stories

-include build/experiments/pronouns.d
