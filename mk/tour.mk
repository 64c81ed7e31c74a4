# docs/tour.md's exercises run inside `make test` (tests/test_tour.cpp); exercise 9 needs the induction experiment.
test: build/bin/induction
