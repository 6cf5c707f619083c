# Thin driver over CMake. `make test` builds the released (standard) library
# and runs every test; `make bench` builds the fast variant (and the standard
# library beside it) and compares them with the allocators installed here.
# Pass runner flags with ARGS="--full".
BUILD_DIR ?= build
BENCH_DIR ?= build-fast
BENCH_STD_DIR ?= build-bench-std
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
ARGS ?=

.PHONY: all build test bench install clean test-ubsan test-tsan test-secure fuzz security-table

all: build

build:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DHAKMEM_BUILD=standard
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

bench:
	cmake -S . -B $(BENCH_DIR) -DCMAKE_BUILD_TYPE=Release -DHAKMEM_BUILD=fast -DHAKMEM_BUILD_TESTS=OFF
	cmake --build $(BENCH_DIR) -j $(JOBS)
	cmake -S . -B $(BENCH_STD_DIR) -DCMAKE_BUILD_TYPE=Release -DHAKMEM_BUILD=standard -DHAKMEM_BUILD_TESTS=OFF -DHAKMEM_BUILD_BENCH=OFF -DHAKMEM_SECURE_LIB=OFF
	cmake --build $(BENCH_STD_DIR) -j $(JOBS) --target hakmem
	python3 scripts/bench.py --build-dir $(BENCH_DIR) --std-build-dir $(BENCH_STD_DIR) $(ARGS)

# The secure variant (-DHAKMEM_BUILD=secure: libhakmem.so is the secure
# library) and the whole suite on it, in its own directory.
test-secure:
	cmake -S . -B build-secure -DCMAKE_BUILD_TYPE=Release -DHAKMEM_BUILD=secure -DHAKMEM_BUILD_BENCH=OFF
	cmake --build build-secure -j $(JOBS)
	ctest --test-dir build-secure --output-on-failure -j $(JOBS)

# Tool builds, each in its own directory (README "Sanitizers, valgrind and
# fuzzing"): the whole suite with the library under UBSan and the block
# lists' checks (HAKMEM_DEBUG_LISTS); the hak_ API
# programs, library and program both under TSan (prefix-only library).
test-ubsan:
	cmake -S . -B build-ubsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAKMEM_SANITIZE=undefined -DHAKMEM_DEBUG_LISTS=ON -DHAKMEM_BUILD_BENCH=OFF
	cmake --build build-ubsan -j $(JOBS)
	ctest --test-dir build-ubsan --output-on-failure -j $(JOBS)

test-tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAKMEM_SANITIZE=thread -DHAKMEM_BUILD_BENCH=OFF
	cmake --build build-tsan -j $(JOBS)
	ctest --test-dir build-tsan --output-on-failure -j $(JOBS)

# libFuzzer target (clang), prefix-only library under ASan+UBSan; runs
# FUZZ_TIME seconds from the stored corpus, new inputs in build-fuzz/corpus.
FUZZ_TIME ?= 60
fuzz:
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHAKMEM_FUZZ=ON -DHAKMEM_BUILD_BENCH=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzz_api
	mkdir -p build-fuzz/corpus build-fuzz/artifacts
	build-fuzz/tests/fuzz/fuzz_api -max_total_time=$(FUZZ_TIME) -timeout=30 -rss_limit_mb=4096 -max_len=1024 -len_control=0 -print_final_stats=1 \
	  -artifact_prefix=build-fuzz/artifacts/ build-fuzz/corpus tests/fuzz/regressions tests/fuzz/corpus

# which bug classes glibc and each HAKMEM build detect (tests/security/)
security-table: build
	scripts/security-table.sh $(BUILD_DIR)

install: build
	cmake --install $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR) $(BENCH_DIR) build-secure build-ubsan build-tsan build-fuzz
