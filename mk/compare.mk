# make compare: GPT vs BERT vs prefix-LM on the same corpus, steps and tokens (experiments/compare.cpp).
COMPARE_FLAGS ?=
build/bin/compare: build/experiments/compare.o build/libplaingpt.a
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) $^ -o $@ $(LIBS)

build/experiments/%.o: experiments/%.cpp | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -MMD -MP -c $< -o $@

.PHONY: compare
compare: build/bin/compare
	./build/bin/compare $(COMPARE_FLAGS)
-include build/experiments/compare.d
