# Hardening: sanitizers and fuzzing (tools/ci_hardening.sh runs both on CI).
#   make test-asan                the library, every tests/*.cpp and every program (./train, ./sample, …) built with
#                                 AddressSanitizer and UndefinedBehaviorSanitizer in build/asan/, then the whole
#                                 suite run there
#   make test-tsan                test-tsan-planted, then the library, the test files that hold its tests, ./train,
#                                 ./sample and ./inspect built with ThreadSanitizer (clang) in build/tsan/, and the
#                                 tests that run two or more threads run there (TSAN_FILTER below)
#   make test-tsan-planted        a race planted on purpose (-DPLAINGPT_PLANT_RACE in src/ops/rwkv.cpp) must be
#                                 reported by ThreadSanitizer; succeeds only if it is
#   make fuzz [FUZZ_SECONDS=60]   build the libFuzzer targets in build/fuzz/ and run each for FUZZ_SECONDS
#   make fuzz-build               only build them (and the checkpoint seed corpus)
#   make fuzz-replay              run every file of tests/regressions/<target>/ through the fuzz binaries
#   make fuzz-seeds               regenerate the committed seeds that follow the code (fuzz/make_seeds.cpp)
# All live under build/, so `make clean` removes them and git ignores them; the normal build is not touched.
#
# The ASan suite runs in build/asan/root/, a mirror of the repository root: the source folders (src/, docs/,
# data/, tests/, …) are links to the real ones, while ./train, ./sample, ./inspect, ./build/make_stories and
# ./build/bin/induction are the sanitized programs. So every test runs exactly as under `make test` (the tour
# included), and the end-to-end tests check the programs too: a sanitizer report in a child program fails the test
# that started it (see exitcode=86 below).

.PHONY: test-asan asan-programs asan-root fuzz fuzz-build fuzz-replay fuzz-seeds
.PHONY: test-tsan test-tsan-planted tsan-programs tsan-root tsan-archer

# ---- ASan + UBSan -----------------------------------------------------------------------------------------------

ASAN_DIR      := build/asan
ASAN_CXX      ?= $(CXX)
# float-cast-overflow is not part of GCC's -fsanitize=undefined; (int) of a huge float is UB worth knowing about.
ASAN_SANITIZE := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
ASAN_CXXFLAGS  = $(ASAN_SANITIZE) -O1 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter $(CXXOPTS_CFLAGS) $(BLAS_CFLAGS) \
                 $(OMP_CFLAGS) $(HTTPLIB_CFLAGS) -Isrc
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

# The experiments and the story generator that tests start (the tour's induction run, tests/test_experiments.cpp,
# the pronoun probes).
$(ASAN_DIR)/experiments/%.o: experiments/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) -MMD -MP -c $< -o $@

$(ASAN_DIR)/bin/%: $(ASAN_DIR)/experiments/%.o $(ASAN_DIR)/libplaingpt.a
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) $^ -o $@ $(ASAN_LIBS)

$(ASAN_DIR)/bin/make_stories: data/make_stories.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(ASAN_CXX) $(ASAN_CXXFLAGS) $< -o $@

# The library first, in this make: under -j, test-asan's run_tests (built here) and the sub-make's programs both
# need it, and two makes each building it wrote the same objects and archive at once (a link once read a
# half-written libplaingpt.a: "file format not recognized").
asan-programs: $(ASAN_DIR)/libplaingpt.a
	@$(MAKE) --no-print-directory $(ASAN_PROGRAMS) $(EXPERIMENTS:build/bin/%=$(ASAN_DIR)/bin/%) $(ASAN_DIR)/bin/make_stories

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

# ---- ThreadSanitizer ---------------------------------------------------------------------------------------------
# clang only here: TSan cannot see libgomp's synchronization (gcc's OpenMP), so correct parallel loops are reported
# (a small correct OpenMP program gave 11 reports under g++, none under clang with libarcher). clang's libomp tells
# TSan about its barriers, locks and tasks through libarcher.so, an OMPT tool the runtime loads when
# OMP_TOOL_LIBRARIES names it. On Debian: apt-get install clang libomp-14-dev libclang-rt-14-dev.
# TSAN_CXX="ccache clang++" caches the objects.

TSAN_DIR      := build/tsan
TSAN_CXX      ?= clang++
# -Wno-pass-failed: clang 14 cannot vectorize the `#pragma omp simd reduction(max : …)` loops of
# ops/softmax_attention.cpp (a float max reduction needs no-NaN math there; g++ vectorizes them) and says so at -O1
# as at -O3; vector code or not makes no difference to what TSan checks, so the warning is not repeated here.
TSAN_CXXFLAGS  = -fsanitize=thread -fno-omit-frame-pointer -O1 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter \
                 -Wno-pass-failed $(CXXOPTS_CFLAGS) $(BLAS_CFLAGS) $(OMP_CFLAGS) $(HTTPLIB_CFLAGS) -Isrc
# One process, like the ASan build: MPI's own threads are not what this is for.
TSAN_LIBS      = $(filter-out $(MPI_LIBS),$(LIBS))
TSAN_OBJ      := $(SRC:src/%.cpp=$(TSAN_DIR)/obj/%.o)
TSAN_TEST_OBJ  = $(TSAN_TEST_SRC:tests/%.cpp=$(TSAN_DIR)/tests/%.o)
# libarcher.so sits beside clang's libomp, two folders above clang's resource folder (/usr/lib/llvm-14/lib/ on
# Debian; -print-file-name does not search there). test-tsan stops when it is missing rather than run without it.
TSAN_ARCHER   ?= $(realpath $(shell $(TSAN_CXX) -print-resource-dir 2>/dev/null)/../../libarcher.so)

# The tests run: those whose names say they run on two or more threads — any name containing Thread, Replica or
# Team (TwoThreads…, ThreadedBackward…, BatchSplitReplicas…, DecodeTeam.*), so a new test named that way is
# included without touching this list — and, by name (TSAN_NAMED), the others that start threads of their own: the
# explorer's tests with several clients at once (a server thread plus client threads), the metrics FIFO's writer
# thread, and two tests named for something else that set_threads(2). The tests that cap a program's address space
# with ulimit -v skip themselves here, as under ASan (shadow memory needs terabytes of address space), so the
# explorer under a cap with its 32 clients is not named. Tests that start ./sample or ./train (TamperInputs.
# ThreadCountsAreCappedWithANote, at 64 threads) start the sanitized programs from the mirror root, as under ASan.
TSAN_NAMED    := ExploreApi.SeveralClientsAtOnceGetTheAnswersOneClientGets \
                 ExploreApi.ALongMaskedScoreDoesNotHoldTheModelForEveryTab \
                 ExploreHardening.SlowClientsDoNotStarveOthers \
                 ExploreHardening.ParsingALargeCheckpointDoesNotHoldUpOtherModels \
                 Hardening3Files.MetricsFileItselfNeverReadsAFifo \
                 OptimizerClip.GlobalNormOfALongVectorMatchesTheDoubleSum \
                 MaskGradients.KindsThatTakeEveryMaskAndTheirHybridMatchReferenceAndFiniteDifferences
TSAN_EMPTY    :=
TSAN_COMMA    := ,
TSAN_FILTER   ?= *Thread*:*Replica*:*Team*:$(subst $(TSAN_EMPTY) $(TSAN_EMPTY),:,$(strip $(TSAN_NAMED)))
# Only the test files that hold such a test are compiled (15 of the 34 today; the build is most of the time):
# those with a TEST line naming Thread, Replica or Team or one of TSAN_NAMED, those that instantiate the op
# harness's RecurrentOp suite (tests/op_harness.h: its TwoThreadsMatchOneThreadAndTextbook runs in the kind's file),
# and those with no TEST at all, which serve the others (child_kernels.cpp). A test name that matches the filter
# only through a TEST_P instantiation's name would be missed; TSAN_TEST_SRC="$(TEST_SRC)" compiles every file.
TSAN_TEST_SRC ?= $(sort $(shell grep -l -E -e '^TEST.*(Thread|Replica|Team)' \
                   -e '^INSTANTIATE_TYPED_TEST_SUITE_P.*RecurrentOp' \
                   $(foreach n,$(TSAN_NAMED),-e '$(subst .,$(TSAN_COMMA) ,$(n))') $(TEST_SRC)) \
                   $(shell grep -L '^TEST' $(TEST_SRC)))

# OPENBLAS_NUM_THREADS=1: OpenBLAS is not instrumented and its own thread pool synchronizes in ways TSan cannot
# see; with one thread it starts no pool (the programs ask for one thread anyway, base/threads.cpp, but the pool
# would already be running by then). Its sgemm still runs inside our OpenMP threads, uninstrumented, so a race
# inside OpenBLAS would go unseen; one between our code and it would not.
# ignore_noninstrumented_modules=1: what libarcher asks for — the accesses libomp itself makes (uninstrumented) are
# not reported; interceptors called from there (its locks, pthread_create) still count as synchronization.
# halt_on_error=1, exitcode=66: the first report ends the process with 66, which no test or program uses, so a
# report in a child program fails the test that started it. Child processes inherit all of this.
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:exitcode=66:ignore_noninstrumented_modules=1:second_deadlock_stack=1$(if $(TSAN_OPTIONS_EXTRA),:$(TSAN_OPTIONS_EXTRA)) \
           OMP_TOOL_LIBRARIES=$(TSAN_ARCHER) \
           OPENBLAS_NUM_THREADS=1 \
           PLAINGPT_ROOT=$(CURDIR)

$(TSAN_DIR)/obj/%.o: src/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(TSAN_CXX) $(TSAN_CXXFLAGS) -MMD -MP -c $< -o $@

$(TSAN_DIR)/tests/%.o: tests/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(TSAN_CXX) $(TSAN_CXXFLAGS) -Itests -MMD -MP -c $< -o $@

$(TSAN_DIR)/main/%.o: %.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(TSAN_CXX) $(TSAN_CXXFLAGS) -MMD -MP -c $< -o $@

# Made anew each time, as build/libplaingpt.a is (the Makefile says why).
$(TSAN_DIR)/libplaingpt.a: $(TSAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The programs the filtered tests may start (./train, ./sample, ./inspect); the experiments and the story
# generator are started only by tests outside the filter, so they are not built here.
TSAN_PROGRAMS = $(PROGRAMS:build/bin/%=$(TSAN_DIR)/bin/%)
$(TSAN_DIR)/bin/%: $(TSAN_DIR)/main/%.o $(TSAN_DIR)/libplaingpt.a
	@mkdir -p $(dir $@)
	$(TSAN_CXX) $(TSAN_CXXFLAGS) $^ -o $@ $(TSAN_LIBS)

$(TSAN_DIR)/run_tests: $(TSAN_TEST_OBJ) $(TSAN_DIR)/libplaingpt.a
	$(TSAN_CXX) $(TSAN_CXXFLAGS) $^ -o $@ $(GTEST_LIBS) $(TSAN_LIBS)

# The library first, in this make, as for asan-programs (two makes must not write one archive at once).
tsan-programs: $(TSAN_DIR)/libplaingpt.a
	@$(MAKE) --no-print-directory $(TSAN_PROGRAMS)

# A mirror root like test-asan's: the sanitized ./train, ./sample and ./inspect among links to the source folders.
TSAN_ROOT := $(TSAN_DIR)/root
tsan-root: tsan-programs
	@rm -rf $(TSAN_ROOT) && mkdir -p $(TSAN_ROOT)/build
	@for f in $(ASAN_MIRRORED); do ln -s $(CURDIR)/$$f $(TSAN_ROOT)/$$f 2>/dev/null || true; done
	@for p in $(notdir $(TSAN_PROGRAMS)); do rm -f $(TSAN_ROOT)/$$p; ln -s ../bin/$$p $(TSAN_ROOT)/$$p; done
	@ln -s ../../bin $(TSAN_ROOT)/build/bin

tsan-archer:
	@test -f "$(TSAN_ARCHER)" || { echo "test-tsan: no libarcher.so beside $(TSAN_CXX)'s libomp (TSAN_ARCHER=$(TSAN_ARCHER)); on Debian: apt-get install libomp-<N>-dev"; exit 1; }

# The planted race first: a detector that stays silent there proves nothing by staying silent on the suite.
test-tsan: $(TSAN_DIR)/run_tests tsan-root tsan-archer test-tsan-planted
	cd $(TSAN_ROOT) && $(TSAN_ENV) ../run_tests --gtest_filter='$(TSAN_FILTER)' $(GTEST_FLAGS)

# The proof that the above can fail. PLAINGPT_PLANT_RACE makes the RWKV-7 recurrence's backward give every
# sequence of one head the same scratch (src/ops/rwkv.cpp), a race it once had that the two-thread test alone did
# not catch (on 2 busy cores the threads seldom overlapped, and without an overlap the numbers are right). TSan
# reports it either way: it checks that the two threads' accesses are ordered, not that they collided. It needs both
# threads to touch one head's scratch, so the planted build deals the loop out statically: under `dynamic` one thread
# could take every sequence, and on a CI machine one did (exit 0, no report). Only that
# object is rebuilt, in build/tsan/planted/; it is linked with tests/test_rwkv.cpp alone, ahead of the library, so
# it replaces the library's ops/rwkv.o. The target succeeds only if TSan reports a data race in src/ops/rwkv.cpp
# and the run ends with its exit code.
TSAN_PLANTED := $(TSAN_DIR)/planted
$(TSAN_PLANTED)/rwkv.o: src/ops/rwkv.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(TSAN_CXX) $(TSAN_CXXFLAGS) -DPLAINGPT_PLANT_RACE -MMD -MP -c $< -o $@

$(TSAN_PLANTED)/run_tests: $(TSAN_DIR)/tests/test_rwkv.o $(TSAN_PLANTED)/rwkv.o $(TSAN_DIR)/libplaingpt.a
	$(TSAN_CXX) $(TSAN_CXXFLAGS) $^ -o $@ $(GTEST_LIBS) $(TSAN_LIBS)

test-tsan-planted: $(TSAN_PLANTED)/run_tests tsan-archer
	@echo "test-tsan-planted: the planted race must be reported"
	@$(TSAN_ENV) $< --gtest_filter=OpsRwkv/RecurrentOp/0.TwoThreadsMatchOneThreadAndTextbook > $(TSAN_PLANTED)/out.txt 2>&1; \
	  status=$$?; \
	  grep 'SUMMARY: ThreadSanitizer' $(TSAN_PLANTED)/out.txt; \
	  if [ $$status -eq 66 ] && grep -q 'SUMMARY: ThreadSanitizer: data race .*src/ops/rwkv.cpp' $(TSAN_PLANTED)/out.txt; then \
	    echo "test-tsan-planted: reported (exit $$status), as it must be"; \
	  else \
	    echo "test-tsan-planted: FAILED: ThreadSanitizer did not report the planted race (exit $$status; $(TSAN_PLANTED)/out.txt)"; \
	    exit 1; \
	  fi

-include $(TSAN_OBJ:.o=.d) $(TSAN_TEST_OBJ:.o=.d) $(wildcard $(TSAN_DIR)/main/*.d) $(TSAN_PLANTED)/rwkv.d

# ---- libFuzzer ---------------------------------------------------------------------------------------------------
# clang only. On Debian: apt-get install clang libclang-rt-14-dev libomp-14-dev (the version matching clang).

FUZZ_DIR      := build/fuzz
FUZZ_CXX      ?= clang++
FUZZ_SECONDS  ?= 60
FUZZ_TARGETS  := checkpoint text specs
FUZZ_SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# The library is instrumented for coverage too (fuzzer-no-link): that is where the parsers are.
FUZZ_CXXFLAGS  = $(FUZZ_SANITIZE) -fsanitize=fuzzer-no-link -O1 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter \
                 $(CXXOPTS_CFLAGS) $(BLAS_CFLAGS) $(HTTPLIB_CFLAGS) -fopenmp -Isrc
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
