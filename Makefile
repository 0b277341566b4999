# Kiln's two commands: `make demo` and `make test`. Each installs what is missing, configures and builds first.
BUILD_DIR ?= build
PYTHON ?= python3
LLVM_DIR ?= /usr/lib/llvm-22
CMAKE_FLAGS ?=

SANITIZE_DIR ?= build-sanitize

.PHONY: all setup configure build test test-sanitize demo docs clean

all: build

setup:
	@PYTHON=$(PYTHON) bash scripts/setup.sh

$(BUILD_DIR)/build.ninja: CMakeLists.txt | setup
	cmake -G Ninja -S . -B $(BUILD_DIR) \
	  -DMLIR_DIR=$(LLVM_DIR)/lib/cmake/mlir -DLLVM_DIR=$(LLVM_DIR)/lib/cmake/llvm \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_DIR)/bin/lit -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) $(CMAKE_FLAGS)

configure: $(BUILD_DIR)/build.ninja

build: setup configure
	ninja -C $(BUILD_DIR)

test: build
	ninja -C $(BUILD_DIR) check-kiln
	KILN_BUILD_DIR=$(abspath $(BUILD_DIR)) $(PYTHON) -m pytest test/Integration -q

# The lit suite and the CPU pytest suite with Kiln's own code under AddressSanitizer and UBSan, in a build folder of
# its own. python3 is not instrumented, so its processes preload the sanitizer runtimes (lit's through
# KILN_TEST_PRELOAD); leaks are not reported (MLIR's and Python's process-lifetime allocations would drown them);
# allow_user_poisoning=0 because LLVM's BumpPtrAllocator poisons its slabs only where it was compiled with ASan:
# inlined into Kiln's code it is, inside libMLIR.so it is not, and the two share slabs; allocator_may_return_null=1
# so that a buffer larger than memory is the named error Kiln gives for it (ASan aborts on such requests otherwise);
# use_sigaltstack=0 since GCC 12's ASan fails a check unmapping a thread's signal stack that CPython replaced.
SANITIZER_ENV = ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0:allocator_may_return_null=1:use_sigaltstack=0 UBSAN_OPTIONS=print_stacktrace=1
SANITIZER_RUNTIMES = $$(c++ -print-file-name=libasan.so) $$(c++ -print-file-name=libubsan.so)
test-sanitize: setup
	cmake -G Ninja -S . -B $(SANITIZE_DIR) \
	  -DMLIR_DIR=$(LLVM_DIR)/lib/cmake/mlir -DLLVM_DIR=$(LLVM_DIR)/lib/cmake/llvm \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_DIR)/bin/lit -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) \
	  -DKILN_SANITIZE=address,undefined $(CMAKE_FLAGS)
	ninja -C $(SANITIZE_DIR)
	$(SANITIZER_ENV) KILN_TEST_PRELOAD="$(SANITIZER_RUNTIMES)" ninja -C $(SANITIZE_DIR) check-kiln
	$(SANITIZER_ENV) LD_PRELOAD="$(SANITIZER_RUNTIMES)" \
	  KILN_BUILD_DIR=$(abspath $(SANITIZE_DIR)) $(PYTHON) -m pytest test/Integration -q

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

docs: build
	ninja -C $(BUILD_DIR) mlir-doc
	mkdir -p docs/generated && cp -r $(BUILD_DIR)/docs/* docs/generated/
	@echo "op and pass reference written to docs/generated/"

clean:
	rm -rf $(BUILD_DIR)
