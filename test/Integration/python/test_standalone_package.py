"""The standalone package (`ninja kiln_standalone`, what the wheel installs), used on this machine as a GPU machine
without LLVM would use it.

Why in CI: the wheel carries a libkiln_compiler.so with MLIR and LLVM linked in statically
(scripts/link_standalone_compiler.sh), so that `pip install` of it needs no LLVM. A missing symbol, a dependency
on libMLIR/libLLVM, a wheel over the size limit or a module linked against the wrong library would otherwise
only show on a GPU visit. This builds the package from the current build and, in a fresh process that imports
it, compiles sm_90a programs (an attention, a wgmma matmul) and runs a host program: the same PTX and the same
host results as the full build's package.
"""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from numerics import BUILD_DIR

#: The wheel's size limit.
LIMIT = 48 * 1024 * 1024

PROBE = r"""
import hashlib, json
import numpy as np, ml_dtypes
import kiln
from kiln import extensions, runtime
q = np.zeros((1, 2, 40, 64), ml_dtypes.bfloat16)
program = kiln.compile(kiln.ops.attention.source(q, q, q), target="sm_90a")
a, b = np.zeros((130, 64), ml_dtypes.bfloat16), np.zeros((64, 128), ml_dtypes.bfloat16)
matmul = kiln.compile(kiln.ops.matmul.source(a, b), target="sm_90a")  # the wgmma kernel
rng = np.random.default_rng(7)
x = rng.standard_normal((3, 40, 64)).astype(np.float32)
host = kiln.ops.attention(x[None], x[None], x[None], causal=True) + kiln.ops.softmax(x.transpose(0, 2, 1)).sum()
print(json.dumps({"package": kiln.__file__, "extension": extensions.native().__file__,
                  "host_extension": extensions.native_host().__file__,
                  "ptx": hashlib.sha256((program.ptx + matmul.ptx).encode()).hexdigest(),
                  "host": hashlib.sha256(np.ascontiguousarray(host).tobytes()).hexdigest(),
                  "wgmma": "wgmma.mma_async" in matmul.ptx,
                  "runner": getattr(runtime._NativeRunner, "__module__", None)}))
"""


@pytest.fixture(scope="module")
def standalone():
    """The standalone package folder (build/standalone), built from the current build."""
    if not (BUILD_DIR / "build.ninja").is_file():
        pytest.skip(f"{BUILD_DIR} is not a Kiln build folder (build Kiln or set KILN_BUILD_DIR)")
    cache = BUILD_DIR / "CMakeCache.txt"
    if any(line.startswith("KILN_SANITIZE:") and line.split("=", 1)[1].strip()
           for line in cache.read_text().splitlines()):
        pytest.skip(f"{BUILD_DIR} is a sanitizer build: the standalone library links without the sanitizers")
    built = subprocess.run(["ninja", "-C", str(BUILD_DIR), "kiln_standalone"], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return BUILD_DIR / "standalone"


def run_probe(folder, cache):
    """PROBE's findings in a fresh process that imports kiln from ``folder``."""
    env = dict(os.environ, PYTHONPATH=str(folder), KILN_CACHE_DIR=str(cache))
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=cache.parent)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_compiler_needs_no_llvm_and_the_wheel_fits(standalone, tmp_path):
    library = standalone / "kiln" / "libkiln_compiler.so"
    needed = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    libraries = [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line]
    # Beside the C and C++ runtimes, only the package's own kernel runtime (its cache protocol), found beside it.
    assert libraries and all(name.startswith(("libc.", "libm.", "libgcc_s.", "libstdc++.", "ld-linux")) or
                             name == "libkiln_runtime.so" for name in libraries), libraries
    assert [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "PATH)" in line] == ["$ORIGIN"]
    for module in (standalone / "kiln").glob("_kiln*.so"):
        needed = subprocess.run(["readelf", "-d", str(module)], capture_output=True, text=True, check=True).stdout
        assert "libMLIR" not in needed and "libLLVM" not in needed, (module.name, needed)
        # The package moves when installed: the modules find libkiln_compiler.so beside them, nowhere else.
        paths = [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "PATH)" in line]
        assert paths in ([], ["$ORIGIN"]), (module.name, paths)
    # A wheel is a deflated zip of the package: the same compression of the same files.
    archive = tmp_path / "package.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted((standalone / "kiln").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(standalone))
    assert archive.stat().st_size <= LIMIT, f"{archive.stat().st_size} bytes"


def test_standalone_package_compiles_and_runs_like_the_full_build(standalone, tmp_path):
    (tmp_path / "standalone").mkdir()
    probe = run_probe(standalone, tmp_path / "standalone" / "cache")
    for key in ("package", "extension", "host_extension"):
        assert probe[key].startswith(str(standalone)), (key, probe[key])
    assert probe["wgmma"], "the sm_90a matmul did not take the wgmma kernel"
    assert probe["runner"] == "kiln._kiln_launch", "the package has no launch module"
    (tmp_path / "full").mkdir()
    full = run_probe(BUILD_DIR / "python", tmp_path / "full" / "cache")
    assert full["ptx"] == probe["ptx"]
    assert full["host"] == probe["host"]
