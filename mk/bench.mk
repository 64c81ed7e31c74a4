# Benchmarks (bench/): speed of training and sampling, a per-op breakdown, and the PyTorch twin comparison.
#   make bench              tables + bench/results.json            (~5 min on 2 cores; BENCH_QUICK=1 ~1 min)
#   make bench-split        batch-split against op-split threads by shape (the crossover of --threads-split auto)
#   make bench-compare      ours vs PyTorch, A/B alternated, plus the checkpoint agreement check (needs
#                           python3-torch for /usr/bin/python3; without it only our side is shown)
#   make bench-mixers       every registered mixer kind: training step and decoding per token against T, the kinds
#                           alternated, one thread (build/bench/mixers.json; the last section of make bench; ~3 min)
#   make bench-frontier     validation loss against wall-clock time, ours and the twin on the same recipes
#                           (nanoGPT's, the tiny preset, the 10-minute frontier preset) on $(BENCH_DATA), 2 threads:
#                           bench/frontier.json and docs/frontier.svg (~35 min)
# Every benchmark command runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (the environment pins them for
# the tests); tests and CI keep them. Our programs then choose their OpenBLAS kernels themselves (src/base/runtime.h),
# and compare.py and frontier.py give the twin the same core.

BENCH_ENV    ?= env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
BENCH_PY     ?= /usr/bin/python3
BENCH_JSON   ?= bench/results.json
BENCH_DATA   ?= $(firstword $(wildcard ../shared/data/tinyshakespeare.txt) data/stories.txt)
BENCH_BIN    := build/bench/bench

.PHONY: bench bench-compare bench-frontier bench-build bench-split bench-mixers

build/bench/%.o: bench/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -MMD -MP -c $< -o $@

$(BENCH_BIN): build/bench/bench.o build/libplaingpt.a
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(LIBS)

bench-build: $(BENCH_BIN)

bench: $(BENCH_BIN)
	$(BENCH_ENV) $(BENCH_BIN) $(if $(filter-out 0,$(BENCH_QUICK)),--quick) --json $(BENCH_JSON)

# The crossover behind --threads-split auto (docs/performance.md#threads-that-split-the-batch), ~3 minutes.
bench-split: $(BENCH_BIN)
	$(BENCH_ENV) $(BENCH_BIN) --split --threads 2 $(if $(filter-out 0,$(BENCH_QUICK)),--quick)

bench-compare: $(BENCH_BIN) programs
	$(BENCH_ENV) $(BENCH_PY) bench/compare.py $(if $(filter-out 0,$(BENCH_QUICK)),--quick) $(BENCH_COMPARE_FLAGS)

bench-mixers: $(BENCH_BIN)
	$(BENCH_ENV) OMP_WAIT_POLICY=passive nice -n 5 $(BENCH_BIN) --mixers $(if $(filter-out 0,$(BENCH_QUICK)),--quick)

bench-frontier: $(BENCH_BIN) programs
	$(BENCH_ENV) $(BENCH_PY) bench/frontier.py --data $(BENCH_DATA) $(BENCH_FRONTIER_FLAGS)

-include build/bench/bench.d
