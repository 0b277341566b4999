#!/usr/bin/env bash
#===- link_standalone_compiler.sh - libkiln_compiler.so with MLIR and LLVM linked in statically ===#
#
# A GPU machine has Python, torch and the CUDA driver but no LLVM or MLIR. The wheel's compiler library
# therefore carries the MLIR and LLVM parts Kiln's GPU compile uses: KilnApi whole (it is the interface), then
# Kiln's other libraries and every static MLIR and LLVM archive, of which the linker takes only the objects
# something needs (--gc-sections drops unused functions within them, --icf=all folds identical ones, as LLVM's
# own release links do). The library exports only the kiln::api interface of include/Api/Compiler.h and needs
# nothing but the C and C++ runtimes and the package's libkiln_runtime.so (the caches' protocol), which it finds
# beside itself ($ORIGIN). python/CMakeLists.txt runs this for the `kiln_standalone` target.
#
#   scripts/link_standalone_compiler.sh LLVM_LIBDIR OUTPUT API_ARCHIVE [KILN_ARCHIVE...]
#
#===----------------------------------------------------------------------===#
set -euo pipefail

llvm_lib=$1
output=$2
api_archive=$3
shift 3

# lld: GNU ld refuses Debian's non-PIC libzstd.a in a shared library, lld links it.
if ! command -v ld.lld >/dev/null; then
  echo "link_standalone_compiler: needs lld (Debian/Ubuntu package lld; scripts/setup.sh installs it)" >&2
  exit 1
fi
mapfile -t mlir_archives < <(ls "$llvm_lib"/libMLIR*.a | grep -v -e CAPI -e libMLIRPython)
mapfile -t llvm_archives < <(ls "$llvm_lib"/libLLVM*.a)
if (( ${#mlir_archives[@]} == 0 || ${#llvm_archives[@]} == 0 )); then
  echo "link_standalone_compiler: no static MLIR/LLVM archives in $llvm_lib (packages libmlir-22-dev, llvm-22-dev)" >&2
  exit 1
fi

exports=$(mktemp)
trap 'rm -f "$exports"' EXIT
# Exported: the kiln::api functions and the type information its exceptions are caught by.
cat >"$exports" <<'MAP'
{
  global: extern "C++" { kiln::api::*; "typeinfo for kiln::api::*"; "typeinfo name for kiln::api::*";
                         "vtable for kiln::api::*"; };
  local: *;
};
MAP

mkdir -p "$(dirname "$output")"
${CXX:-g++} -shared -fuse-ld=lld -o "$output.tmp" -Wl,-soname,libkiln_compiler.so \
  -Wl,--whole-archive "$api_archive" -Wl,--no-whole-archive \
  -Wl,--start-group "$@" "${mlir_archives[@]}" "${llvm_archives[@]}" -Wl,--end-group \
  -l:libz.a -l:libzstd.a -lpthread -ldl -Wl,-rpath,'$ORIGIN' \
  -Wl,--gc-sections -Wl,--icf=all -Wl,--version-script="$exports" -Wl,--no-undefined -s
mv "$output.tmp" "$output"
