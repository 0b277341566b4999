#!/usr/bin/env bash
#===- pack_gpu_jit.sh - Pack Kiln's Python GPU JIT for a machine without LLVM/MLIR ===#
#
# The GPU machine has Python, torch and a C++ compiler but no LLVM or MLIR, and what travels there is limited in
# size. This links the compiler (KilnApi, include/Api/Compiler.h) with exactly the MLIR and LLVM parts it uses,
# statically, into one stripped libkiln_compiler.so that exports only the kiln::api interface and needs nothing
# but the C and C++ runtimes; packs it with that header, the extension's source (python/src/KilnModule.cpp), the
# kiln package and the runtime; and adds scripts/gpu_jit/build.sh, which builds the _kiln module there for the
# local Python. The CPU host backend (_kiln_host) stays behind: it needs the MLIR runner utilities.
#
#   scripts/pack_gpu_jit.sh [BUILD_DIR] [ARCHIVE]      (defaults: build, gpu_jit.tar.xz)
#   on the GPU machine: tar xf gpu_jit.tar.xz && kiln_gpu_jit/build.sh && PYTHONPATH=kiln_gpu_jit python3 ...
#
#===----------------------------------------------------------------------===#
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
archive=$(realpath -m "${2:-gpu_jit.tar.xz}")
llvm_lib=$(llvm-config-22 --libdir 2>/dev/null || echo /usr/lib/llvm-22/lib)
limit_mib=48

ninja -C "$build" KilnApi kiln_runtime >/dev/null

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pack=$stage/kiln_gpu_jit
mkdir -p "$pack/include/Api" "$pack/src" "$pack/kiln"

# Exported: the kiln::api functions and the type information its exceptions are caught by.
cat >"$stage/exports.map" <<'MAP'
{
  global: extern "C++" { kiln::api::*; "typeinfo for kiln::api::*"; "typeinfo name for kiln::api::*";
                         "vtable for kiln::api::*"; };
  local: *;
};
MAP

# KilnApi whole (it is the interface), then the other Kiln libraries and every static MLIR and LLVM archive: the
# linker takes only the objects something needs (the host executor's are never reached) and --gc-sections drops
# the unused functions within them.
kiln_archives=()
for archive_file in "$build"/lib/libKiln*.a; do
  [[ $(basename "$archive_file") == libKilnApi.a ]] || kiln_archives+=("$archive_file")
done
mapfile -t mlir_archives < <(ls "$llvm_lib"/libMLIR*.a | grep -v -e CAPI -e libMLIRPython)
mapfile -t llvm_archives < <(ls "$llvm_lib"/libLLVM*.a)
# lld: GNU ld refuses Debian's non-PIC libzstd.a in a shared library, lld links it (test_packed_jit.py checks).
if ! command -v ld.lld >/dev/null; then
  echo "pack_gpu_jit: needs lld (Debian/Ubuntu package lld; scripts/setup.sh installs it)" >&2
  exit 1
fi
start=$(date +%s)
g++ -shared -fuse-ld=lld -o "$pack/kiln/libkiln_compiler.so" -Wl,-soname,libkiln_compiler.so \
  -Wl,--whole-archive "$build/lib/libKilnApi.a" -Wl,--no-whole-archive \
  -Wl,--start-group "${kiln_archives[@]}" "${mlir_archives[@]}" "${llvm_archives[@]}" -Wl,--end-group \
  -l:libz.a -l:libzstd.a -lpthread -ldl \
  -Wl,--gc-sections -Wl,--version-script="$stage/exports.map" -Wl,--no-undefined -s
echo "linked libkiln_compiler.so ($(( $(stat -c %s "$pack/kiln/libkiln_compiler.so") / 1048576 )) MiB) in" \
     "$(( $(date +%s) - start )) s; it needs: $(readelf -d "$pack/kiln/libkiln_compiler.so" |
     sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"

cp "$root/include/Api/Compiler.h" "$root/include/Api/PtxAssembler.h" "$pack/include/Api/"
cp "$root/python/src/KilnModule.cpp" "$root/python/src/KilnLaunchModule.cpp" "$pack/src/"
(cd "$root/python/kiln" && find . -name '*.py' -exec cp --parents {} "$pack/kiln/" \;)
cp "$build/lib/libkiln_runtime.so" "$pack/kiln/"
cp "$root/scripts/gpu_jit/build.sh" "$pack/"

tar -C "$stage" -cf - kiln_gpu_jit | xz -T2 -6 >"$archive"
size=$(stat -c %s "$archive")
echo "wrote $archive: $(( size / 1048576 )) MiB (limit $limit_mib MiB)"
if (( size > limit_mib * 1048576 )); then
  echo "pack_gpu_jit: the archive is larger than $limit_mib MiB" >&2
  exit 1
fi
