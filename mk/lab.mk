# The attention lab: ./inspect (attention maps, head scores, pruning) and its experiments.
#   make inspect      build ./inspect (also built by `make programs`)
#   make pronouns     build/pronouns.tsv and build/names.tsv: pronoun → antecedent and name tables of data/stories.txt
#   make test-html    render ./inspect attention's page in headless Chromium and fail on a script error
#                     (skipped without Chromium; REQUIRE_CHROMIUM=1 makes that a failure, as on CI)
#   make induction    2-layer attention-only model vs 1-layer control on copied random segments (≈ 2 min, build/induction/)
#   make induction-mamba   the same with Mamba layers (build/induction-mamba/)
#   make scale        the 1/√d_k sweep: attention scale × learning rate × head size, table in build/scale/table.md
PROGRAMS += build/bin/inspect
programs: build/bin/inspect

.PHONY: inspect pronouns test-html induction scale
inspect: build/bin/inspect
	@cp -f build/bin/inspect .

-include build/main/inspect.d build/experiments/induction.d build/experiments/scale.d

# The generator is deterministic: with its default settings it rewrites data/stories.txt byte for byte, so the
# table it writes alongside describes the committed corpus (./inspect heads checks every note against the text).
build/pronouns.tsv: build/make_stories
	./build/make_stories --out build/stories_for_pronouns.txt --antecedents $@
	@cmp -s build/stories_for_pronouns.txt data/stories.txt || echo "warning: build/stories_for_pronouns.txt differs from data/stories.txt"
pronouns: build/pronouns.tsv build/names.tsv  # names.tsv: every name mention (mk/pronouns.mk)

CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser || command -v google-chrome)
HTML_TEST_DIR := build/test-html
# $(call html_render,<page>,<dom>): render the page headless and dump its DOM after the script ran.
html_render = timeout 120 $(CHROMIUM) --headless --no-sandbox --disable-gpu --disable-background-networking \
	  --disable-component-update --disable-sync --no-first-run --user-data-dir=$(HTML_TEST_DIR)/profile \
	  --virtual-time-budget=5000 --dump-dom file://$(CURDIR)/$(1) > $(2) 2>> $(HTML_TEST_DIR)/chromium.log || true
# Without Chromium the test is skipped, unless REQUIRE_CHROMIUM=1 (CI), where a missing browser is a failure.
# A negative control runs beside the real page: a copy with a script error must come back as data-status="error: …",
# so a Chromium that silently runs no script (or a check that can no longer fail) fails the test too.
test-html: build/bin/train build/bin/inspect
	@if [ -z "$(CHROMIUM)" ]; then \
	  if [ -n "$(REQUIRE_CHROMIUM)" ]; then echo "test-html: FAILED: no chromium, and REQUIRE_CHROMIUM is set"; exit 1; fi; \
	  echo "test-html: SKIPPED, no chromium (apt-get install chromium)"; exit 0; fi; \
	set -e; rm -rf $(HTML_TEST_DIR); mkdir -p $(HTML_TEST_DIR); \
	OMP_WAIT_POLICY=passive ./build/bin/train --n-layer 2 --n-head 2 --n-embd 16 --block 32 --batch 4 --steps 20 \
	  --eval-iters 1 --threads 1 --out $(HTML_TEST_DIR)/m > $(HTML_TEST_DIR)/train.log; \
	./build/bin/inspect attention --ckpt $(HTML_TEST_DIR)/m --prompt 'Mira saw Tom. "She" waved.' \
	  --out $(HTML_TEST_DIR)/attn.html --threads 1 > /dev/null; \
	sed 's/^select(0, 0);$$/select(0, 0); no_such_function();/' $(HTML_TEST_DIR)/attn.html > $(HTML_TEST_DIR)/broken.html; \
	if cmp -s $(HTML_TEST_DIR)/attn.html $(HTML_TEST_DIR)/broken.html; then \
	  echo "test-html: FAILED: could not make the broken copy (the page no longer has the line 'select(0, 0);')"; exit 1; fi; \
	$(call html_render,$(HTML_TEST_DIR)/attn.html,$(HTML_TEST_DIR)/dom.html); \
	$(call html_render,$(HTML_TEST_DIR)/broken.html,$(HTML_TEST_DIR)/broken-dom.html); \
	if ! grep -q 'data-status="error: ' $(HTML_TEST_DIR)/broken-dom.html; then \
	  echo "test-html: FAILED: the negative control (a page with a script error) was not reported as an error"; \
	  grep -o 'data-status="[^"]*"' $(HTML_TEST_DIR)/broken-dom.html || tail -20 $(HTML_TEST_DIR)/chromium.log; exit 1; \
	elif grep -q 'data-status="ok"' $(HTML_TEST_DIR)/dom.html && [ $$(grep -o '<canvas' $(HTML_TEST_DIR)/dom.html | wc -l) -ge 5 ]; then \
	  echo "test-html: OK (page drew 2 layers × 2 heads + detail view without script errors; a broken copy was caught)"; \
	else \
	  echo "test-html: FAILED"; grep -o 'data-status="[^"]*"' $(HTML_TEST_DIR)/dom.html || tail -20 $(HTML_TEST_DIR)/chromium.log; exit 1; \
	fi

INDUCTION_FLAGS ?=
induction: build/bin/induction
	OMP_WAIT_POLICY=passive ./build/bin/induction $(INDUCTION_FLAGS)

# make induction-mamba: the same two models with Mamba layers (docs/mamba.md; one thread, ≈ 3 min).
.PHONY: induction-mamba
induction-mamba: build/bin/induction
	OMP_WAIT_POLICY=passive nice -n 5 ./build/bin/induction --mixer mamba --threads 1 --out build/induction-mamba $(INDUCTION_FLAGS)
# make induction-rwkv: the same two models with RWKV-7 layers (docs/rwkv.md; one thread).
.PHONY: induction-rwkv
induction-rwkv: build/bin/induction
	OMP_WAIT_POLICY=passive nice -n 5 ./build/bin/induction --mixer rwkv --threads 1 --out build/induction-rwkv $(INDUCTION_FLAGS)

# About 10–15 minutes on two cores: 3 scales × 3 learning rates × 2 head sizes, 600 steps each.
SCALE_FLAGS ?=
scale: build/bin/scale
	OMP_WAIT_POLICY=passive ./build/bin/scale $(SCALE_FLAGS)

# make recall: multi-query associative recall, softmax vs linear vs hybrid attention (experiments/recall.cpp);
# output in build/recall/; docs/recall.md holds the measured tables (18 runs of 2000 steps; the two sweeps, run
# side by side beside other work, took 49 and 41 minutes; RECALL_FLAGS="--threads 1 --pairs 4,8" etc. to change it).
RECALL_FLAGS ?=
.PHONY: recall
recall: build/bin/recall
	OMP_WAIT_POLICY=passive ./build/bin/recall --models softmax,linear,softmax+linear $(RECALL_FLAGS)

# make recall-mamba: the Mamba rows of docs/mamba.md (same recipe as make recall: 2000 steps, one seed; Mamba's N
# chosen per width so its state matches a linear layer's, ssm_state=match; the time-invariant layer, the one
# without its conv and the softmax+mamba hybrid are the kind with settings): the pairs sweep at width 64, 12 runs,
# one thread, ≈ 15 min on an idle core (RECALL_FLAGS="--widths 32,96" adds the width sweep, 8 runs more; not measured yet).
# make recall-binding: pairs written as two tokens (--bound=false): can Mamba's short conv bind k to v where
# softmax could not? softmax, mamba, mamba without its conv, 8 pairs, width 64 (≈ 4 min).
.PHONY: recall-mamba recall-binding
recall-mamba: build/bin/recall
	OMP_WAIT_POLICY=passive nice -n 5 ./build/bin/recall --threads 1 --match-state linear --models \
	  mamba:ssm_state=match,mamba:ssm_state=match:ssm_selective=0,mamba:ssm_state=match:ssm_conv=0,softmax+mamba:ssm_state=match \
	  --pairs 4,8,12 --widths '' --out build/recall-mamba $(RECALL_FLAGS)
recall-binding: build/bin/recall
	OMP_WAIT_POLICY=passive nice -n 5 ./build/bin/recall --threads 1 --bound=false --match-state linear --models \
	  softmax,mamba:ssm_state=match,mamba:ssm_state=match:ssm_conv=0 --pairs 8 --widths '' --out build/recall-binding \
	  $(RECALL_FLAGS)
# make recall-rwkv: the RWKV-7 rows of docs/rwkv.md (same recipe: 2000 steps, one seed); one head, so an rwkv
# layer's state C + C² equals a linear layer's; rwkv:rwkv_erase=0 is the ablation (decay and add only).
.PHONY: recall-rwkv
recall-rwkv: build/bin/recall
	OMP_WAIT_POLICY=passive nice -n 5 ./build/bin/recall --threads 1 --models rwkv,rwkv:rwkv_erase=0 \
	  --pairs 4,8,12 --widths '' --out build/recall-rwkv $(RECALL_FLAGS)
# make -j3 recall-state: the thesis plot (docs/recall.md, "Recall against state size"): every registered kind plus
# RWKV-7 without its erase and DeltaNet with β in (0, 2), at widths 32 and 64, 8 pairs, the recipe of make recall
# (2000 steps); one process per seed (build/recall-state/seed-N/), then the three read back together (--from) into
# build/recall-state/: the tables (mean ± sd) and recall_state.svg, recall against the bytes a layer keeps.
RECALL_STATE = OMP_WAIT_POLICY=passive nice -n 5 ./build/bin/recall --threads 1 --pairs '' --widths 32,64 \
  --also rwkv:rwkv_erase=0,deltanet:deltanet_negative_eigenvalues=1
.PHONY: recall-state recall-state-1 recall-state-2 recall-state-3
recall-state: recall-state-1 recall-state-2 recall-state-3
	$(RECALL_STATE) --out build/recall-state \
	  --from build/recall-state/seed-1/recall.csv,build/recall-state/seed-2/recall.csv,build/recall-state/seed-3/recall.csv
recall-state-1 recall-state-2 recall-state-3: recall-state-%: build/bin/recall
	$(RECALL_STATE) --seed $* --seeds 1 --out build/recall-state/seed-$* $(RECALL_FLAGS)
-include build/experiments/recall.d

# make -j2 state-tracking: parity and counting mod 3, trained on 40 tokens and tested to 256 (experiments/
# state_tracking.cpp; docs/state_tracking.md holds a measured run). Every kind with learned positions and with
# none, plus DeltaNet with β in (0, 2) (its negative-eigenvalue setting); 1 and 2 layers; 3 seeds; 1000 steps each.
# The two tasks run side by side, one thread each, into build/state_tracking/{parity,mod3}/ (≈ 78 min on 2 cores
# beside other work), then are read back together (--from) into build/state_tracking/.
STATE_TRACKING_FLAGS ?=
STATE_TRACKING_RUN = OMP_WAIT_POLICY=passive ./build/bin/state_tracking --threads 1 --steps 1000 --seeds 3 \
  --also deltanet:deltanet_negative_eigenvalues=1,deltanet:deltanet_negative_eigenvalues=1:positions=none
.PHONY: state-tracking state-tracking-parity state-tracking-mod3
state-tracking: state-tracking-parity state-tracking-mod3
	$(STATE_TRACKING_RUN) --out build/state_tracking \
	  --from build/state_tracking/parity/state_tracking.csv,build/state_tracking/mod3/state_tracking.csv
state-tracking-parity state-tracking-mod3: state-tracking-%: build/bin/state_tracking
	$(STATE_TRACKING_RUN) --tasks $* --out build/state_tracking/$* $(STATE_TRACKING_FLAGS)
-include build/experiments/state_tracking.d
