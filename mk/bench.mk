# Benchmarks (bench/): speed of training and sampling, a per-op breakdown, and the PyTorch twin comparison.
#   make bench              tables + bench/results.json            (~5 min on 2 cores; BENCH_QUICK=1 ~1 min)
#   make bench-split        batch-split against op-split threads by shape (the crossover of --threads-split auto)
#   make bench-compare      ours vs PyTorch, A/B alternated, plus the checkpoint agreement check (needs
#                           python3-torch for /usr/bin/python3; without it only our side is shown)
#   make bench-ops          the tiny step at 1 thread op by op, ours (perf samples) beside the twin's (torch.profiler):
#                           where the two programs differ outside the products (needs linux-perf; ~1 min)
#   make bench-mixers       every registered mixer kind: training step and decoding per token against T, the kinds
#                           alternated, one thread (build/bench/mixers.json; the last section of make bench; ~3 min)
#   make bench-frontier     validation loss against wall-clock time, ours and the twin on the same recipes
#                           (nanoGPT's, the tiny preset, the 10-minute frontier preset) on $(BENCH_DATA), 2 threads:
#                           bench/frontier.json and docs/frontier.svg (~35 min)
#   make bench-compare BENCH_ISA=avx2, make bench-ops BENCH_ISA=avx2, make bench-frontier BENCH_ISA=avx2
#                           the same under the AVX2 proxy: what an AVX2 laptop runs, on any x86-64 CPU with AVX2
#                           (below); bench/compare_avx2.json, bench/frontier_avx2.json and docs/frontier_avx2.svg
# Every benchmark command runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (the environment pins them for
# the tests); tests and CI keep them. Our programs then choose their OpenBLAS kernels themselves (src/base/runtime.h),
# and compare.py and frontier.py give the twin the same core.

BENCH_ENV    ?= env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE
BENCH_PY     ?= /usr/bin/python3
BENCH_JSON   ?= bench/results.json
BENCH_DATA   ?= $(firstword $(wildcard ../shared/data/tinyshakespeare.txt) data/stories.txt)
BENCH_BIN    := build/bench/bench

.PHONY: bench bench-compare bench-ops bench-frontier bench-build bench-split bench-mixers bench-avx2-build

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

# The AVX2 proxy (docs/performance.md, "The AVX2 proxy"). BENCH_ISA=avx2 compares our programs built for
# x86-64-v3 (AVX2 and FMA, no AVX-512: what a distributed binary or a laptop's -march=native has) in build/avx2/,
# with OpenBLAS's Haswell kernels on both sides and PyTorch's own kernels held to AVX2 (bench/compare.py --isa).
# The normal build is not touched.
BENCH_ISA  ?= native
AVX2_DIR   := build/avx2
AVX2_FLAGS  = $(filter-out -march=% -mtune=%,$(ALL_CXXFLAGS)) -march=x86-64-v3
AVX2_BINS  := $(AVX2_DIR)/bin/train $(AVX2_DIR)/bin/sample $(AVX2_DIR)/bin/bench

$(AVX2_DIR)/obj/%.o: src/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(AVX2_DIR)/main/%.o: %.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(AVX2_DIR)/main/bench.o: bench/bench.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(AVX2_DIR)/libplaingpt.a: $(SRC:src/%.cpp=$(AVX2_DIR)/obj/%.o)
	@rm -f $@
	ar rcs $@ $^

$(AVX2_DIR)/bin/%: $(AVX2_DIR)/main/%.o $(AVX2_DIR)/libplaingpt.a
	@mkdir -p $(dir $@)
	$(CXX) $(AVX2_FLAGS) $^ -o $@ $(LIBS)

bench-avx2-build: $(AVX2_BINS)

COMPARE_NEEDS = $(if $(filter avx2,$(BENCH_ISA)),$(AVX2_BINS),$(BENCH_BIN))
COMPARE_ISA   = $(if $(filter avx2,$(BENCH_ISA)),--isa avx2 --bin $(AVX2_DIR)/bin)

bench-compare: $(COMPARE_NEEDS) programs
	$(BENCH_ENV) $(BENCH_PY) bench/compare.py $(COMPARE_ISA) $(if $(filter-out 0,$(BENCH_QUICK)),--quick) \
	  $(BENCH_COMPARE_FLAGS)

bench-ops: $(COMPARE_NEEDS)
	$(BENCH_ENV) $(BENCH_PY) bench/ops_compare.py $(COMPARE_ISA) $(BENCH_OPS_FLAGS)

bench-mixers: $(BENCH_BIN)
	$(BENCH_ENV) OMP_WAIT_POLICY=passive nice -n 5 $(BENCH_BIN) --mixers $(if $(filter-out 0,$(BENCH_QUICK)),--quick)

bench-frontier: $(BENCH_BIN) programs $(if $(filter avx2,$(BENCH_ISA)),$(AVX2_BINS))
	$(BENCH_ENV) $(BENCH_PY) bench/frontier.py $(COMPARE_ISA) --data $(BENCH_DATA) $(BENCH_FRONTIER_FLAGS)

-include build/bench/bench.d $(wildcard $(AVX2_DIR)/obj/*/*.d $(AVX2_DIR)/obj/*/*/*.d $(AVX2_DIR)/main/*.d)
