# Entry points for newcomers and CI. `make demo` and `make test` set everything up themselves.
BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
JOBS       ?= $(shell nproc)
CMAKE_FLAGS ?=
FUZZ_RUNS  ?= 1000000
DEMO_OUT   ?= out/demo

.PHONY: setup configure build test demo sanitize fuzz bench format clean

setup:
	@scripts/setup

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > $(BUILD).configure.log || (cat $(BUILD).configure.log; exit 1)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

demo: build
	@$(BUILD)/cli/xpd run scenes/demo.json -o $(DEMO_OUT)
	@echo "demo output: $(DEMO_OUT)/frames/*.vtu and $(DEMO_OUT)/stats.json"
	@echo "watch it:    $(BUILD)/cli/xpd view $(DEMO_OUT)   (then open http://127.0.0.1:8000 in a browser)"



# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer (any report fails the
# test that triggered it: -fno-sanitize-recover=all). -O1 -g1 (line tables, enough for the reports'
# stack traces) instead of RelWithDebInfo's -O2 -g: the instrumented build compiles 2.5 times
# faster (BENCHMARKS.md, "The test command").
SANITIZE_FLAGS ?= -O1 -g1 -DNDEBUG
sanitize: setup
	@cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(SANITIZE_FLAGS)" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$(SANITIZE_FLAGS)" -DXPD_SANITIZE=address,undefined -DXPD_BUILD_BENCH=OFF > /dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	@ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  ctest --test-dir $(BUILD_ASAN) --output-on-failure -j $(JOBS) --timeout 1800

# libFuzzer harnesses (clang), each run for FUZZ_RUNS executions from its seed corpus.
fuzz: setup
	@CC=clang CXX=clang++ cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DXPD_BUILD_FUZZERS=ON -DXPD_BUILD_TESTS=OFF -DXPD_BUILD_BENCH=OFF > /dev/null
	@cmake --build $(BUILD_FUZZ) -j $(JOBS)
	@scripts/run-fuzzers $(BUILD_FUZZ) $(FUZZ_RUNS)

# Rewrites every C++ file with the repository's .clang-format (the clang_format test checks it).
format:
	@find library cli tests bench fuzz examples python -path tests/data -prune -o \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print 2>/dev/null | xargs clang-format -i --style=file

bench: build
	@for b in $(BUILD)/bench/xpd_bench_*; do $$b; done

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ) $(BUILD).configure.log
