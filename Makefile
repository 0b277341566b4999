# Kiln's two commands: `make demo` and `make test`. Each installs what is missing, configures and builds first.
BUILD_DIR ?= build
PYTHON ?= python3
LLVM_DIR ?= /usr/lib/llvm-22
CMAKE_FLAGS ?=

.PHONY: all setup configure build test demo docs clean

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

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

docs: build
	ninja -C $(BUILD_DIR) mlir-doc
	mkdir -p docs/generated && cp -r $(BUILD_DIR)/docs/* docs/generated/
	@echo "op and pass reference written to docs/generated/"

clean:
	rm -rf $(BUILD_DIR)
