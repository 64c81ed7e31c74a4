# The attention lab: ./inspect (attention maps, head scores, pruning) and its experiments.
#   make inspect      build ./inspect (also built by `make programs`)
#   make pronouns     build/pronouns.tsv: the pronoun → antecedent table of data/stories.txt, for ./inspect heads
#   make test-html    render ./inspect attention's page in headless Chromium and fail on a script error
#   make induction    2-layer attention-only model vs 1-layer control on repeated random sequences
#   (the 1/√d_k sweep, `make scale`, is not written yet: see the README's open work)
PROGRAMS += build/bin/inspect
programs: build/bin/inspect

.PHONY: inspect pronouns test-html induction
inspect: build/bin/inspect
	@cp -f build/bin/inspect .

-include build/main/inspect.d build/experiments/induction.d

# The generator is deterministic: with its default settings it rewrites data/stories.txt byte for byte, so the
# table it writes alongside describes the committed corpus (./inspect heads checks every note against the text).
build/pronouns.tsv: build/make_stories
	./build/make_stories --out build/stories_for_pronouns.txt --antecedents $@
	@cmp -s build/stories_for_pronouns.txt data/stories.txt || echo "warning: build/stories_for_pronouns.txt differs from data/stories.txt"
pronouns: build/pronouns.tsv

CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser || command -v google-chrome)
HTML_TEST_DIR := build/test-html
test-html: build/bin/train build/bin/inspect
	@if [ -z "$(CHROMIUM)" ]; then echo "test-html: SKIPPED, no chromium (apt-get install chromium)"; exit 0; fi; \
	set -e; rm -rf $(HTML_TEST_DIR); mkdir -p $(HTML_TEST_DIR); \
	OMP_WAIT_POLICY=passive ./build/bin/train --n-layer 2 --n-head 2 --n-embd 16 --block 32 --batch 4 --steps 20 \
	  --eval-iters 1 --threads 1 --out $(HTML_TEST_DIR)/m > $(HTML_TEST_DIR)/train.log; \
	./build/bin/inspect attention --ckpt $(HTML_TEST_DIR)/m --prompt 'Mira saw Tom. "She" waved.' \
	  --out $(HTML_TEST_DIR)/attn.html --threads 1 > /dev/null; \
	timeout 120 $(CHROMIUM) --headless --no-sandbox --disable-gpu --disable-background-networking \
	  --disable-component-update --disable-sync --no-first-run --user-data-dir=$(HTML_TEST_DIR)/profile \
	  --virtual-time-budget=5000 --dump-dom file://$(CURDIR)/$(HTML_TEST_DIR)/attn.html \
	  > $(HTML_TEST_DIR)/dom.html 2> $(HTML_TEST_DIR)/chromium.log || true; \
	if grep -q 'data-status="ok"' $(HTML_TEST_DIR)/dom.html && [ $$(grep -o '<canvas' $(HTML_TEST_DIR)/dom.html | wc -l) -ge 5 ]; then \
	  echo "test-html: OK (page drew 2 layers × 2 heads + detail view without script errors)"; \
	else \
	  echo "test-html: FAILED"; grep -o 'data-status="[^"]*"' $(HTML_TEST_DIR)/dom.html || tail -20 $(HTML_TEST_DIR)/chromium.log; exit 1; \
	fi

build/bin/induction: build/experiments/induction.o build/libplaingpt.a
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(LIBS)

INDUCTION_FLAGS ?=
induction: build/bin/induction
	OMP_WAIT_POLICY=passive ./build/bin/induction $(INDUCTION_FLAGS)
