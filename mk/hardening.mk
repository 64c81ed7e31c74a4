# Hardening: sanitizers and fuzzing (tools/ci_hardening.sh runs both on CI).
#   make test-asan                the library, every tests/*.cpp and every program (./train, ./sample, …) built with
#                                 AddressSanitizer and UndefinedBehaviorSanitizer in build/asan/, then the whole
#                                 suite run there
#   make fuzz [FUZZ_SECONDS=60]   build the libFuzzer targets in build/fuzz/ and run each for FUZZ_SECONDS
#   make fuzz-build               only build them (and the checkpoint seed corpus)
#   make fuzz-replay              run every file of tests/regressions/<target>/ through the fuzz binaries
#   make fuzz-seeds               regenerate the committed seeds that follow the code (fuzz/make_seeds.cpp)
# Both live under build/, so `make clean` removes them and git ignores them; the normal build is not touched.
#
# The ASan suite runs in build/asan/root/, a mirror of the repository root: the source folders (src/, docs/,
# data/, tests/, …) are links to the real ones, while ./train, ./sample, ./inspect, ./build/make_stories and
# ./build/bin/induction are the sanitized programs. So every test runs exactly as under `make test` (the tour
# included), and the end-to-end tests check the programs too: a sanitizer report in a child program fails the test
# that started it (see exitcode=86 below).

.PHONY: test-asan asan-programs asan-root fuzz fuzz-build fuzz-replay fuzz-seeds

# ---- ASan + UBSan -----------------------------------------------------------------------------------------------

ASAN_DIR      := build/asan
ASAN_CXX      ?= $(CXX)
# float-cast-overflow is not part of GCC's -fsanitize=undefined; (int) of a huge float is UB worth knowing about.
ASAN_SANITIZE := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
ASAN_CXXFLAGS  = $(ASAN_SANITIZE) -O1 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter $(BLAS_CFLAGS) $(OMP_CFLAGS) \
                 $(HTTPLIB_CFLAGS) -Isrc
# Built without -DPLAINGPT_MPI, so without Open MPI's library: the sanitized programs run as one process, and the
# mpirun tests skip in this build (make test runs them).
ASAN_LIBS      = $(filter-out $(MPI_LIBS),$(LIBS))
ASAN_OBJ      := $(SRC:src/%.cpp=$(ASAN_DIR)/obj/%.o)
ASAN_TEST_OBJ := $(TEST_SRC:tests/%.cpp=$(ASAN_DIR)/tests/%.o)

# OpenBLAS and libgomp are not instrumented; they do not need suppressions today (their thread pools are
# reachable from globals at exit, so LeakSanitizer does not report them). tools/lsan.supp is where one would go.
# exitcode=86: a sanitizer report must never look like the programs' own "exit 1 = clean error" to a test.
# Child processes (./train, ./sample started by the tests) inherit these settings.
# max_allocation_size_mb: no test needs a single allocation above 4 GB, so one that asks for more is a bug reported
# on the spot (e.g. a checkpoint header promising a huge model), not a CI machine swapping to death.
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:exitcode=86:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:max_allocation_size_mb=4096$(if $(ASAN_OPTIONS_EXTRA),:$(ASAN_OPTIONS_EXTRA)) \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86 \
           LSAN_OPTIONS=suppressions=$(CURDIR)/tools/lsan.supp:print_suppressions=0:exitcode=86 \
           PLAINGPT_ROOT=$(CURDIR)

$(ASAN_DIR)/obj/%.o: src/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) -MMD -MP -c $< -o $@

$(ASAN_DIR)/tests/%.o: tests/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) -Itests -MMD -MP -c $< -o $@

$(ASAN_DIR)/main/%.o: %.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) -MMD -MP -c $< -o $@

$(ASAN_DIR)/libplaingpt.a: $(ASAN_OBJ)
	ar rcs $@ $^

# Every program the Makefile builds (PROGRAMS: build/bin/train, build/bin/sample, and what mk/*.mk files after
# this one add, like ./inspect), sanitized, in build/asan/bin/. Deferred (=) and built by a sub-make, because the
# other mk files are read after this one.
ASAN_PROGRAMS = $(PROGRAMS:build/bin/%=$(ASAN_DIR)/bin/%)
$(ASAN_DIR)/bin/%: $(ASAN_DIR)/main/%.o $(ASAN_DIR)/libplaingpt.a
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) $^ -o $@ $(ASAN_LIBS)

$(ASAN_DIR)/run_tests: $(ASAN_TEST_OBJ) $(ASAN_DIR)/libplaingpt.a
	$(ASAN_CXX) $(ASAN_CXXFLAGS) $^ -o $@ $(GTEST_LIBS) $(ASAN_LIBS)

# The experiments and the story generator that tests start (the tour's induction run, the pronoun probes).
$(ASAN_DIR)/experiments/%.o: experiments/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) -MMD -MP -c $< -o $@

$(ASAN_DIR)/bin/induction: $(ASAN_DIR)/experiments/induction.o $(ASAN_DIR)/libplaingpt.a
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) $^ -o $@ $(ASAN_LIBS)

$(ASAN_DIR)/bin/make_stories: data/make_stories.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) $< -o $@

# The library first, in this make: under -j, test-asan's run_tests (built here) and the sub-make's programs both
# need it, and two makes each building it wrote the same objects and archive at once (a link once read a
# half-written libplaingpt.a: "file format not recognized").
asan-programs: $(ASAN_DIR)/libplaingpt.a
	@$(MAKE) --no-print-directory $(ASAN_PROGRAMS) $(ASAN_DIR)/bin/induction $(ASAN_DIR)/bin/make_stories

# The mirror root (see the top of this file): links, remade on every run so a new top-level folder is picked up.
ASAN_ROOT      := $(ASAN_DIR)/root
ASAN_MIRRORED   = $(filter-out build out train sample inspect,$(wildcard *)) .ci
asan-root: asan-programs
	@rm -rf $(ASAN_ROOT) && mkdir -p $(ASAN_ROOT)/build
	@for f in $(ASAN_MIRRORED); do ln -s $(CURDIR)/$$f $(ASAN_ROOT)/$$f 2>/dev/null || true; done
	@for p in $(notdir $(ASAN_PROGRAMS)); do rm -f $(ASAN_ROOT)/$$p; ln -s ../bin/$$p $(ASAN_ROOT)/$$p; done
	@ln -s ../../bin $(ASAN_ROOT)/build/bin && ln -s ../../bin/make_stories $(ASAN_ROOT)/build/make_stories
	@ln -s $(CURDIR)/build/trace $(ASAN_ROOT)/build/trace  # Tour.TheCorePathIsWhatTrainRuns's traced ./train (mk/trace.mk)

test-asan: $(ASAN_DIR)/run_tests asan-root
	cd $(ASAN_ROOT) && $(ASAN_ENV) ../run_tests $(GTEST_FLAGS)

-include $(ASAN_OBJ:.o=.d) $(ASAN_TEST_OBJ:.o=.d) $(wildcard $(ASAN_DIR)/main/*.d) $(wildcard $(ASAN_DIR)/experiments/*.d)

# ---- libFuzzer ---------------------------------------------------------------------------------------------------
# clang only. On Debian: apt-get install clang libclang-rt-14-dev libomp-14-dev (the version matching clang).

FUZZ_DIR      := build/fuzz
FUZZ_CXX      ?= clang++
FUZZ_SECONDS  ?= 60
FUZZ_TARGETS  := checkpoint text specs
FUZZ_SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# The library is instrumented for coverage too (fuzzer-no-link): that is where the parsers are.
FUZZ_CXXFLAGS  = $(FUZZ_SANITIZE) -fsanitize=fuzzer-no-link -O1 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter \
                 $(BLAS_CFLAGS) $(HTTPLIB_CFLAGS) -fopenmp -Isrc
FUZZ_LIBS      = $(BLAS_LIBS) -fopenmp -lpthread
FUZZ_OBJ      := $(SRC:src/%.cpp=$(FUZZ_DIR)/obj/%.o)
FUZZ_BINS     := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
# Options for every run: no input above 64 KB (a checkpoint seed is a few KB), no malloc above 1 GB and no run
# above 10 s (either is a finding: an input that makes the loader allocate or spin), and a summary at the end.
FUZZ_FLAGS    ?= -max_len=65536 -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1

$(FUZZ_DIR)/obj/%.o: src/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_DIR)/libplaingpt.a: $(FUZZ_OBJ)
	ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: fuzz/fuzz_%.cpp fuzz/entries.h $(FUZZ_DIR)/libplaingpt.a
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -fsanitize=fuzzer -MMD -MP $< $(FUZZ_DIR)/libplaingpt.a -o $@ $(FUZZ_LIBS)

$(FUZZ_DIR)/make_seeds: fuzz/make_seeds.cpp $(FUZZ_DIR)/libplaingpt.a
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) $< $(FUZZ_DIR)/libplaingpt.a -o $@ $(FUZZ_LIBS)

# The checkpoint seeds are generated by save_checkpoint, so they follow the format as it evolves.
$(FUZZ_DIR)/seeds/checkpoint/.done: $(FUZZ_DIR)/make_seeds
	@rm -rf $(dir $@) && mkdir -p $(dir $@)
	ASAN_OPTIONS=detect_leaks=0 $< $(dir $@)
	@touch $@

fuzz-build: $(FUZZ_BINS) $(FUZZ_DIR)/seeds/checkpoint/.done

# The committed seeds that follow the code: the training-settings seeds (fuzz/corpus/specs/train_config_*) and the
# two checksum cases (fuzz/corpus/checkpoint/checksum-*). Built with the normal compiler, so no clang needed; rerun
# after changing the settings or the checkpoint format, and commit fuzz/corpus (a test fails until then).
build/make_seeds_tool: fuzz/make_seeds.cpp build/libplaingpt.a
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(LIBS)
fuzz-seeds: build/make_seeds_tool
	@rm -rf build/seeds-tmp && mkdir -p build/seeds-tmp
	build/make_seeds_tool build/seeds-tmp
	cp build/seeds-tmp/checksum-*.safetensors fuzz/corpus/checkpoint/
	build/make_seeds_tool --specs fuzz/corpus/specs

# Runs every target (the next one even when one finds a crash), then fails if any did. New interesting inputs
# collect in build/fuzz/corpus/<target>/ (kept between runs); crashes in build/fuzz/artifacts/<target>/, with a
# minimized copy to put in tests/regressions/<target>/ — see fuzz/run_fuzzer.sh. The regressions themselves are
# replayed by the test suite (HardeningRegressions) and by fuzz-replay, not fuzzed from.
fuzz: fuzz-build
	@status=0; for t in $(FUZZ_TARGETS); do \
	  sh fuzz/run_fuzzer.sh $$t $(FUZZ_SECONDS) $(FUZZ_DIR) "$(FUZZ_FLAGS)" || status=1; \
	done; exit $$status

fuzz-replay: $(FUZZ_BINS)
	@status=0; for t in $(FUZZ_TARGETS); do \
	  files=$$(find tests/regressions/$$t -type f ! -name '*.md' 2>/dev/null); \
	  [ -z "$$files" ] && continue; \
	  echo "fuzz-replay: $$t"; \
	  ASAN_OPTIONS=detect_leaks=1 $(FUZZ_DIR)/fuzz_$$t $(FUZZ_FLAGS) $$files || status=1; \
	done; exit $$status

-include $(FUZZ_OBJ:.o=.d) $(FUZZ_BINS:=.d)
