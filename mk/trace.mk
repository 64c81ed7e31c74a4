# A ./train that reports the functions it runs, for Tour.TheCorePathIsWhatTrainRuns (tests/test_tour.cpp): the
# files of the folders the core path draws from (model, optim, train) compiled with -finstrument-functions (at -O0,
# the quickest compile; the calls are the same) and linked with tests/trace/calls.cpp, which records them. The
# other folders come from the normal build and do not report: they are aside from the core path by definition
# (ops: the fast kernels, read through the textbook; base: threads, BLAS and tables; data loading; io; the lab's
# hook; generate and explore, which training does not run).
TRACE_DIRS := model optim train
TRACE_SRC  := $(filter $(foreach d,$(TRACE_DIRS),src/$(d)/%),$(SRC))
TRACE_OBJ  := $(TRACE_SRC:src/%.cpp=build/trace/%.o)
TRACE_REST := $(filter-out $(TRACE_SRC:src/%.cpp=build/%.o),$(OBJ))

# g++ leaves the standard library's inline functions (in /usr/) out. clang 14 has no such list, and its
# -finstrument-functions at -O0 left calls to libstdc++ 12's always-inline string helpers (_M_use_local_data)
# unresolved at link time; -finstrument-functions-after-inlining records what remains once those are inlined. The
# test drops every file outside src/ either way (files_that_ran, tests/test_tour.cpp).
TRACE_INSTRUMENT := $(shell if $(CXX) -finstrument-functions-exclude-file-list=/usr/ -x c++ -fsyntax-only /dev/null \
                      2>/dev/null; then echo -finstrument-functions -finstrument-functions-exclude-file-list=/usr/; \
                      else echo -finstrument-functions-after-inlining; fi)

build/trace/%.o: src/%.cpp $(CONFIG)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -O0 $(TRACE_INSTRUMENT) -MMD -MP -c $< -o $@

build/trace/calls.o: tests/trace/calls.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -c $< -o $@

build/trace/libplaingpt.a: $(TRACE_OBJ) $(TRACE_REST)
	@rm -f $@
	ar rcs $@ $^

build/trace/bin/train: build/main/train.o build/trace/calls.o build/trace/libplaingpt.a
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(LIBS) -ldl

test: build/trace/bin/train
# The sanitized suite runs the same test from its mirror root, which links build/trace (mk/hardening.mk).
test-asan: build/trace/bin/train

-include $(TRACE_OBJ:.o=.d)
