# plaingpt — one Makefile, no CMake.
#   make          build ./train, ./sample and ./inspect
#   make train    train the tiny preset on data/stories.txt, then print a sample
#   make test     build and run the GoogleTest suite
# Dependencies are checked (and installed where possible) by tools/deps.sh.

CXX      ?= g++
OPT      ?= -O3 -march=native
# -g1: line tables, so a backtrace, gdb's stepping and perf annotate name the file and line; DEBUG=-g adds the
# variables gdb prints (at -O3 most are optimized out anyway) and makes the build about 40% slower (model.cpp,
# trainer.cpp, softmax_attention.cpp and rwkv.cpp: 10.6 s against 7.5 s with g++ 12; -g1 costs nothing over no -g).
DEBUG    ?= -g1
# -fno-math-errno -fno-trapping-math: math never sets errno or traps, so exp, sqrt and ?: selects vectorize
# (src/base/fast_exp.h). Neither changes a result; NaN and ∞ still propagate, so divergence is still caught.
CXXFLAGS ?= $(OPT) -std=c++17 -fno-math-errno -fno-trapping-math -Wall -Wextra -Wno-unused-parameter $(DEBUG)
UNAME    := $(shell uname -s)

# Every build compiles on all cores unless -j is given.
NPROC    := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
ifeq (,$(filter -j%,$(MAKEFLAGS)))
  MAKEFLAGS += -j$(NPROC)
endif

# The BLAS: tools/deps.sh finds (or installs) OpenBLAS and writes its flags to build/config.mk; make rereads the
# Makefile once that file exists. `make BLAS=<pkg-config module>` builds against another BLAS on purpose.
BLAS     ?= openblas
# Open MPI, for `mpirun -np N ./train` (docs/distributed.md): auto = use it when its development package is
# installed; MPI=0 builds without it; MPI=1 fails without it.
MPI      ?= auto
CONFIG   := build/config.mk
ifeq ($(UNAME),Darwin)
  # Accelerate ships cblas_sgemm; Homebrew's libomp gives OpenMP to Apple clang.
  BLAS_CFLAGS := -DPLAINGPT_ACCELERATE -DACCELERATE_NEW_LAPACK
  BLAS_LIBS   := -framework Accelerate
  BREW        := $(shell brew --prefix 2>/dev/null)
  OMP_CFLAGS  := -Xpreprocessor -fopenmp -I$(BREW)/opt/libomp/include -I$(BREW)/include
  OMP_LIBS    := -L$(BREW)/opt/libomp/lib -lomp -L$(BREW)/lib
else
  OMP_CFLAGS  := -fopenmp
  OMP_LIBS    := -fopenmp
endif
ifeq (,$(filter clean,$(MAKECMDGOALS)))
  -include $(CONFIG)
endif

# cxxopts parses flag names and values with std::regex unless CXXOPTS_NO_REGEX is set. Its header reaches 38 of
# the library's 73 translation units (base/settings.h declares each setting's flag), the programs and most tests,
# and compiling its regexes was most of each one's time (6.0 s against 1.0 s for the header alone at -O3 -g, g++ 12).
# Its own parser reads our flags alike (names of letters, digits and '-'; values as numbers, true/false, 1/0).
# Every build sets it (the sanitizer builds too: mk/hardening.mk), so no two objects disagree on cxxopts' inline
# functions.
CXXOPTS_CFLAGS := -DCXXOPTS_NO_REGEX
ALL_CXXFLAGS = $(CXXFLAGS) $(CXXOPTS_CFLAGS) $(BLAS_CFLAGS) $(OMP_CFLAGS) $(MPI_CFLAGS) $(HTTPLIB_CFLAGS) -Isrc
LIBS         = $(BLAS_LIBS) $(OMP_LIBS) $(MPI_LIBS) -lpthread
GTEST_LIBS  ?= -lgtest -lgtest_main

SRC      := $(wildcard src/*/*.cpp src/*/*/*.cpp)
OBJ      := $(SRC:src/%.cpp=build/%.o)
TEST_SRC := $(wildcard tests/*.cpp)
TEST_OBJ := $(TEST_SRC:tests/%.cpp=build/tests/%.o)
DEPS_OK  := $(CONFIG)

.PHONY: all programs train test clean data FORCE
# Keep intermediate objects (build/main/*.o), so a second make relinks nothing.
.SECONDARY:

# `train` is the README's "train a model" command, so the binaries are linked under build/bin/ and copied to
# the project root by `programs`; a phony target and a file of the same name would otherwise collide.
# TRAIN_PROGRAMS are what `make train` runs; `programs` adds ./inspect (mk/lab.mk).
TRAIN_PROGRAMS := build/bin/train build/bin/sample
PROGRAMS := $(TRAIN_PROGRAMS)
all: programs
programs: $(PROGRAMS)
	@cp -f $(PROGRAMS) .

# Rerun when the script or the BLAS or MPI choice changes; written through a temporary file, so a failed check
# leaves no config behind and the next make checks again.
$(CONFIG): tools/deps.sh $(if $(and $(filter $(BLAS),$(CONFIG_BLAS)),$(filter $(MPI),$(CONFIG_MPI))),,FORCE)
	@mkdir -p build
	@CXX="$(CXX)" BLAS="$(BLAS)" MPI="$(MPI)" sh tools/deps.sh > $@.tmp && \
	  printf 'CONFIG_BLAS := %s\nCONFIG_MPI := %s\n' "$(BLAS)" "$(MPI)" >> $@.tmp && mv $@.tmp $@
	@echo "build: BLAS = $$(sed -n 's/^BLAS_NAME := //p' $@)"
	@echo "build: MPI = $$(sed -n 's/^MPI_NAME := //p' $@)"
FORCE:

build/%.o: src/%.cpp $(CONFIG)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -MMD -MP -c $< -o $@

build/tests/%.o: tests/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -Itests -MMD -MP -c $< -o $@

build/main/%.o: %.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -MMD -MP -c $< -o $@

# Made anew each time: `ar r` into an existing archive keeps members whose source is gone (a renamed file's old
# object, still defining its old functions) and replaces the first member of the same base name (ops/rwkv.o and
# model/mixers/rwkv.o are both rwkv.o), so an updated checkout could link yesterday's code.
build/libplaingpt.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

build/bin/%: build/main/%.o build/libplaingpt.a
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(LIBS)

# ./train and ./sample link the library without the explorer and the lab's reports and plots, which only ./inspect,
# the experiments and the tests call: `make train` then compiles only what it runs (a new .cpp that ./train calls
# from one of these files is a link error naming the function until it leaves this list).
INSPECT_ONLY_SRC := $(wildcard src/explore/*.cpp) $(addprefix src/lab/,head_intervals.cpp head_scores.cpp \
                    html_report.cpp plot.cpp pronouns.cpp seeds.cpp table_file.cpp)
CORE_OBJ := $(filter-out $(INSPECT_ONLY_SRC:src/%.cpp=build/%.o),$(OBJ))
build/libplaingpt-core.a: $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(TRAIN_PROGRAMS): build/bin/%: build/main/%.o build/libplaingpt-core.a
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(LIBS)

# The experiments (experiments/*.cpp: make compare, induction, scale) link the same way.
build/experiments/%.o: experiments/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -MMD -MP -c $< -o $@

build/bin/%: build/experiments/%.o build/libplaingpt.a
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(LIBS)

build/run_tests: $(TEST_OBJ) build/libplaingpt.a
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(GTEST_LIBS) $(LIBS)

# The default corpus is committed; this rule only rebuilds it when its generator changes.
build/make_stories: data/make_stories.cpp | $(DEPS_OK)
	$(CXX) $(CXXFLAGS) $< -o $@
data: build/make_stories
	./build/make_stories --out data/stories.txt

# `make train` trains the tiny preset from scratch every time (--overwrite replaces out/tiny's earlier run);
# TRAIN_FLAGS adds flags, e.g. make train TRAIN_FLAGS="--steps 50" (CI's short run).
TRAIN_FLAGS ?=
train: $(TRAIN_PROGRAMS)
	@cp -f $(TRAIN_PROGRAMS) .
	./train --preset tiny --data data/stories.txt --out out/tiny --overwrite $(TRAIN_FLAGS)
	./sample --ckpt out/tiny/ckpt.safetensors --prompt "Once upon a time" -n 400

# The experiments too: tests/test_experiments.cpp runs each end to end at the smallest budget.
EXPERIMENTS := $(patsubst experiments/%.cpp,build/bin/%,$(wildcard experiments/*.cpp))
test: build/run_tests programs $(EXPERIMENTS)
	./build/run_tests $(GTEST_FLAGS)

clean:
	rm -rf build train sample inspect

-include $(OBJ:.o=.d) $(TEST_OBJ:.o=.d) build/main/train.d build/main/sample.d

# More targets (benchmarks, sanitizers, fuzzing, experiments) live in mk/, one file per topic.
include $(wildcard mk/*.mk)
