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
# its own. python3 is not instrumented, so its process preloads the sanitizer runtimes; leaks are not reported
# (MLIR's and Python's own process-lifetime allocations would drown them).
test-sanitize: setup
	cmake -G Ninja -S . -B $(SANITIZE_DIR) \
	  -DMLIR_DIR=$(LLVM_DIR)/lib/cmake/mlir -DLLVM_DIR=$(LLVM_DIR)/lib/cmake/llvm \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_DIR)/bin/lit -DPython3_EXECUTABLE=$$(command -v $(PYTHON)) \
	  -DKILN_SANITIZE=address,undefined $(CMAKE_FLAGS)
	ninja -C $(SANITIZE_DIR)
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 ninja -C $(SANITIZE_DIR) check-kiln
	ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  LD_PRELOAD="$$(c++ -print-file-name=libasan.so) $$(c++ -print-file-name=libubsan.so)" \
	  KILN_BUILD_DIR=$(abspath $(SANITIZE_DIR)) $(PYTHON) -m pytest test/Integration -q

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

docs: build
	ninja -C $(BUILD_DIR) mlir-doc
	mkdir -p docs/generated && cp -r $(BUILD_DIR)/docs/* docs/generated/
	@echo "op and pass reference written to docs/generated/"

clean:
	rm -rf $(BUILD_DIR)
