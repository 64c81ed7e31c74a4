# The explorer: ./inspect serve, a local web page over a run's checkpoints (src/explore/, docs/explore.md).
#   make explore        serve make train's checkpoints (out/tiny) on http://127.0.0.1:8000/ (or the next free port)
#   make test-explore   start the server on a small model, drive the page in headless Chromium through the DevTools
#                       protocol (tests/explore_page.py): type, check the colouring, bars, head maps, generation
#                       and that a hostile vocabulary and checkpoint name render as text; save a screenshot
#                       (skipped without Chromium or python3; REQUIRE_CHROMIUM=1 makes that a failure, as on CI)
.PHONY: explore test-explore

# Only ./inspect and the test runner use cpp-httplib (the server); the other programs do not link it.
build/bin/inspect build/run_tests: LIBS += $(HTTPLIB_LIBS)
build/asan/bin/inspect build/asan/run_tests: ASAN_LIBS += $(HTTPLIB_LIBS)

EXPLORE_CKPT  ?= out/tiny
EXPLORE_FLAGS ?=
explore: build/bin/inspect
	@[ -e $(EXPLORE_CKPT) ] || { echo "explore: $(EXPLORE_CKPT) does not exist: run make train first"; exit 1; }
	OMP_WAIT_POLICY=passive ./build/bin/inspect serve --ckpt $(EXPLORE_CKPT) $(EXPLORE_FLAGS)
