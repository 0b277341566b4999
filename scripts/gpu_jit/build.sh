#!/usr/bin/env bash
#===- build.sh - Build the packed GPU JIT's _kiln module for this machine's Python ===#
#
# Runs on the GPU machine from the folder scripts/pack_gpu_jit.sh packed: compiles the thin pybind11 module
# (src/KilnModule.cpp, which includes only include/Api/Compiler.h) against libkiln_compiler.so for the Python
# found as $PYTHON (default python3, which must have pybind11) and the launch module (src/KilnLaunchModule.cpp,
# Python's C API alone), and writes kiln/_build_info.py, the compiler
# identity that keys the disk cache. Then PYTHONPATH=<this folder> makes `import kiln` the GPU JIT.
#
#===----------------------------------------------------------------------===#
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python3}
suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
SECONDS=0
# libkiln_compiler.so takes std::string across its interface: build with the same (C++11) string ABI.
${CXX:-g++} -O2 -std=c++17 -D_GLIBCXX_USE_CXX11_ABI=1 -shared -fPIC -fvisibility=hidden \
  $("$python" -m pybind11 --includes) -Iinclude src/KilnModule.cpp -Lkiln -l:libkiln_compiler.so -Wl,-rpath,'$ORIGIN' -o "kiln/_kiln$suffix"
${CXX:-g++} -O2 -std=c++17 -shared -fPIC -fvisibility=hidden $("$python" -m pybind11 --includes) \
  src/KilnLaunchModule.cpp -o "kiln/_kiln_launch$suffix"
"$python" - <<'PY'
import hashlib, pathlib
digest = hashlib.sha256(pathlib.Path("kiln/libkiln_compiler.so").read_bytes()).hexdigest()
pathlib.Path("kiln/_build_info.py").write_text(
    '"""Written by the build: the compiler this package was built with (keys kiln/cache.py)."""\n'
    f'COMPILER_ID = "{digest}"\n')
PY
echo "built kiln/_kiln$suffix and kiln/_kiln_launch$suffix in $SECONDS s"
