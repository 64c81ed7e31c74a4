# The explorer: ./inspect serve, a local web page over a run's checkpoints (src/explore/, docs/explore.md).
#   make explore        serve make train's checkpoints (out/tiny) on http://127.0.0.1:8000/ (or the next free port)
#   make explore-induction   serve make induction's 2-layer run, snapshots and all (its timeline)
#   make test-explore   start the server on a small model, drive the page in headless Chromium through the DevTools
#                       protocol (tests/explore_page.py): type, check the colouring, bars, head maps, generation
#                       and that a hostile vocabulary and checkpoint name render as text, a signed layer's (EXPLORE_SIGNED_KIND)
#                       weights, a masked LM's fill, one request per key, the layout at 390 to 1920 px, contrast,
#                       labels, the keyboard and the issue's list of small bugs; save a screenshot
#                       (skipped without Chromium or python3; REQUIRE_CHROMIUM=1 makes that a failure, as on CI)
.PHONY: explore test-explore

# Only ./inspect and the test runner use cpp-httplib (the server); the other programs do not link it.
build/bin/inspect build/run_tests: LIBS += $(HTTPLIB_LIBS)
build/asan/bin/inspect build/asan/run_tests: ASAN_LIBS += $(HTTPLIB_LIBS)
build/tsan/bin/inspect build/tsan/run_tests: TSAN_LIBS += $(HTTPLIB_LIBS)

EXPLORE_CKPT  ?= out/tiny
EXPLORE_FLAGS ?=
explore: build/bin/inspect
	@[ -e $(EXPLORE_CKPT) ] || { echo "explore: $(EXPLORE_CKPT) does not exist: run make train first"; exit 1; }
	OMP_WAIT_POLICY=passive ./build/bin/inspect serve --ckpt $(EXPLORE_CKPT) $(EXPLORE_FLAGS)

# make explore-induction: the explorer on make induction's 2-layer run (build/induction/2-layer: its snapshots every
# 25 steps, metrics.csv and final checkpoint), whose timeline shows the induction head forming (docs/explore.md).
.PHONY: explore-induction
explore-induction: build/bin/inspect
	@[ -e build/induction/2-layer/ckpt.safetensors ] || { echo "explore-induction: run make induction first"; exit 1; }
	OMP_WAIT_POLICY=passive ./build/bin/inspect serve --ckpt build/induction/2-layer $(EXPLORE_FLAGS)

# The page test. A small model is trained on a corpus whose last line holds HTML, so the vocabulary has '<', '>', '&',
# '"', '/' and '='; the prompt typed into the page is HTML, and a copy of the checkpoint is named with HTML: all of
# it must render as text. The server runs on a free port for the test's duration; tests/explore_page.py drives
# Chromium over the DevTools protocol (python3's standard library only) and leaves a screenshot in
# build/test-explore/page.png. CHROMIUM comes from mk/lab.mk.
EXPLORE_TEST_DIR := build/test-explore
PYTHON3  ?= $(shell command -v python3)
HOSTILE  := <img src=x onerror=window.__pwned=1>
# A registered mixer kind whose implied weights are signed (MixerLab::weights_are_probabilities is false and some
# are negative), for the page's blue-and-red drawing: the test's second checkpoint has one layer of it, trained 30
# steps, whose strips must be less than half white. Mamba's are; Gated DeltaNet's, whose M decays along each row,
# were 79% white (2026-12-06), so the test would say nothing of its drawing.
EXPLORE_SIGNED_KIND ?= mamba
test-explore: build/bin/train build/bin/inspect
	@if [ -z "$(CHROMIUM)" ] || [ -z "$(PYTHON3)" ]; then \
	  if [ -n "$(REQUIRE_CHROMIUM)" ]; then echo "test-explore: FAILED: no chromium or no python3, and REQUIRE_CHROMIUM is set"; exit 1; fi; \
	  echo "test-explore: SKIPPED, no chromium or no python3 (apt-get install chromium python3)"; exit 0; fi; \
	set -e; D=$(EXPLORE_TEST_DIR); rm -rf $$D; mkdir -p $$D; \
	{ head -c 30000 data/stories.txt; printf '\n%s & "</b>"\n' '$(HOSTILE)'; } > $$D/corpus.txt; \
	OMP_WAIT_POLICY=passive ./build/bin/train --n-layer 2 --n-head 2 --n-embd 32 --block 64 --batch 8 --steps 60 \
	  --eval-iters 1 --eval-every 10 --snapshot-every 20 --threads 1 --data $$D/corpus.txt --out $$D/m > $$D/train.log; \
	cp $$D/m/ckpt.safetensors "$$D/m/$(HOSTILE).safetensors"; \
	OMP_WAIT_POLICY=passive ./build/bin/train --n-layer 2 --n-head 2 --n-embd 32 --block 64 --batch 8 --steps 30 \
	  --layer-mixer softmax,$(EXPLORE_SIGNED_KIND) --eval-iters 1 --threads 1 --data $$D/corpus.txt --out $$D/signed \
	  > $$D/train-signed.log; \
	cp $$D/signed/ckpt.safetensors $$D/m/signed.safetensors; \
	OMP_WAIT_POLICY=passive ./build/bin/train --n-layer 2 --n-head 2 --n-embd 32 --block 64 --batch 8 --steps 30 \
	  --objective mlm --eval-iters 1 --threads 1 --data $$D/corpus.txt --out $$D/bert > $$D/train-bert.log; \
	cp $$D/bert/ckpt.safetensors $$D/m/bert.safetensors; \
	OMP_WAIT_POLICY=passive ./build/bin/inspect serve --ckpt $$D/m --port 0 --threads 1 > $$D/serve.log 2>&1 & pid=$$!; \
	trap "kill $$pid 2>/dev/null || true" EXIT; \
	url=; for i in $$(seq 300); do url=$$(grep -o 'http://[^ ]*' $$D/serve.log || true); [ -n "$$url" ] && break; sleep 0.1; done; \
	if [ -z "$$url" ]; then echo "test-explore: FAILED: the server did not start"; cat $$D/serve.log; exit 1; fi; \
	$(PYTHON3) tests/explore_page.py --chromium $(CHROMIUM) --url "$$url" --prompt 'Tom $(HOSTILE) & "</b>"' \
	  --hostile-ckpt '$(HOSTILE).safetensors' --signed-ckpt signed.safetensors --signed-kind $(EXPLORE_SIGNED_KIND) \
	  --mlm-ckpt bert.safetensors --folder $$D/m --screenshot $$D/page.png

# The two latency goals of docs/explore.md, measured. Key → every panel (the page's data-latency: the debounce, the
# one request and the drawing) over 20 keys typed into the page on the tiny preset's model (200 steps, a snapshot
# every 20), and Explorer III's answers in the page, 11 times each (action → its panel: the timeline, the scrubber,
# a head knocked out, the lens, one head step by step; tests/explore_page.py's tools_latency). Then a
# 1000-character /api/attention answer of a block-1024 model (1 step: the weights do not change the work), five
# times, and 10 keys typed at the end of 1000 characters in the page on that model, without and with a head's map
# open. The load average is printed beside both: the numbers mean little on a busy machine. Then the long text of
# issue 48: 10,000 characters pasted, 20 keys typed at its end one at a time (key → every panel, as above), and 10
# keys 200 ms apart without waiting (from the last key to the panels showing the whole text: a backlog shows here).
# EXPLORE_LATENCY_INSPECT: the ./inspect to measure (another build's, to measure before and after side by side).
EXPLORE_LATENCY_DIR := build/explore-latency
EXPLORE_LATENCY_INSPECT ?= ./build/bin/inspect
EXPLORE_LATENCY_LONG ?= 10000
.PHONY: explore-latency
explore-latency: build/bin/train build/bin/inspect
	@if [ -z "$(CHROMIUM)" ] || [ -z "$(PYTHON3)" ]; then echo "explore-latency: needs chromium and python3"; exit 1; fi; \
	set -e; D=$(EXPLORE_LATENCY_DIR); mkdir -p $$D; \
	[ -d $$D/tiny/snapshots ] || OMP_WAIT_POLICY=passive ./build/bin/train --preset tiny --steps 200 \
	  --snapshot-every 20 --data data/stories.txt --out $$D/tiny --overwrite > $$D/train-tiny.log; \
	[ -e $$D/b/ckpt.safetensors ] || OMP_WAIT_POLICY=passive ./build/bin/train --preset tiny --block 1024 --batch 1 \
	  --steps 1 --eval-iters 1 --data data/stories.txt --out $$D/b --overwrite > $$D/train-b.log; \
	serve() { OMP_WAIT_POLICY=passive $(EXPLORE_LATENCY_INSPECT) serve --ckpt $$1 --port 0 > $$2 2>&1 & pid=$$!; \
	  url=; for i in $$(seq 300); do url=$$(grep -so 'http://[^ ]*' $$2 || true); [ -n "$$url" ] && break; sleep 0.1; done; }; \
	serve $$D/tiny $$D/serve-tiny.log; trap 'kill $$pid 2>/dev/null || true' EXIT; \
	echo "load: $$(uptime | sed 's/.*load average/load average/')"; \
	$(PYTHON3) tests/explore_page.py --chromium $(CHROMIUM) --url "$$url" --skip-checks \
	  --prompt 'Once upon a time there was a little girl' --measure 20 --measure-tools 11 --screenshot $$D/page.png \
	  | grep -- '->'; \
	kill $$pid; serve $$D/b $$D/serve-b.log; \
	$(PYTHON3) -c "print('text=' + 'the cat sat. ' * 77 + 'the')" > $$D/body; \
	for i in 1 2 3 4 5; do curl -s -o /dev/null -w '1004-character attention answer: %{time_total} s, %{size_download} bytes\n' \
	  --data-binary @$$D/body "$${url}api/attention"; done; \
	for map in "" --open-map; do $(PYTHON3) tests/explore_page.py --chromium $(CHROMIUM) --url "$$url" --skip-checks \
	  --prompt 'the cat sat. ' --long 1000 --measure 10 $$map --screenshot $$D/page-b.png \
	  | sed "s/^  key/  block 1024, 1000 characters$${map:+, a head map open}: key/" | grep 'key ->'; done; \
	echo "load: $$(uptime | sed 's/.*load average/load average/')"; \
	kill $$pid; serve $$D/tiny $$D/serve-long.log; \
	$(PYTHON3) tests/explore_page.py --chromium $(CHROMIUM) --url "$$url" --skip-checks \
	  --prompt 'Once upon a time there was a little girl. ' --long $(EXPLORE_LATENCY_LONG) --measure 20 --burst 10 \
	  --interval 200 --screenshot $$D/page-long.png | grep -E 'key ->|apart|pasted'; \
	echo "load: $$(uptime | sed 's/.*load average/load average/')"
