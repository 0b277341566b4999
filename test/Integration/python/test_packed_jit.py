"""The packed GPU JIT (scripts/pack_gpu_jit.sh), built and used on this machine as the GPU machine would.

Why in CI: the GPU machine has no LLVM/MLIR, so its JIT is an archive with a statically linked
libkiln_compiler.so, the extension's source and the package, built there by kiln_gpu_jit/build.sh. A missing
symbol, a dependency on libMLIR/libLLVM, an archive over the size limit or a broken build script would otherwise
only show on a GPU visit. This packs the current build, builds the extension for this Python from the archive
alone, and compiles sm_90a programs (an attention, a wgmma matmul) with it in a fresh process: the same PTX
as the full build, and a clear
ImportError for the host backend, which the pack leaves out.
"""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from numerics import BUILD_DIR

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 48 * 1024 * 1024

PROBE = r"""
import hashlib, json, sys
import numpy as np, ml_dtypes
import kiln
from kiln import compiler, runtime
q = np.zeros((1, 2, 40, 64), ml_dtypes.bfloat16)
program = kiln.compile(kiln.ops.attention.source(q, q, q), target="sm_90a")
a, b = np.zeros((130, 64), ml_dtypes.bfloat16), np.zeros((64, 128), ml_dtypes.bfloat16)
matmul = kiln.compile(kiln.ops.matmul.source(a, b), target="sm_90a")  # the wgmma kernel
try:
    kiln.compile(kiln.ops.attention.source(q, q, q), target="host")
    host = "compiled"
except ImportError as error:
    host = str(error)
print(json.dumps({"package": kiln.__file__, "extension": compiler.native().__file__,
                  "ptx": hashlib.sha256((program.ptx + matmul.ptx).encode()).hexdigest(), "host": host,
                  "wgmma": "wgmma.mma_async" in matmul.ptx,
                  "launcher": getattr(runtime._NativeLauncher, "__module__", None)}))
"""


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    """The archive, unpacked and with its extension built for this Python."""
    if not (BUILD_DIR / "lib" / "libKilnApi.a").is_file():
        pytest.skip(f"{BUILD_DIR} has no libKilnApi.a (build Kiln or set KILN_BUILD_DIR)")
    cache = BUILD_DIR / "CMakeCache.txt"
    if cache.is_file() and any(line.startswith("KILN_SANITIZE:") and line.split("=", 1)[1].strip()
                               for line in cache.read_text().splitlines()):
        pytest.skip(f"{BUILD_DIR} is a sanitizer build: the archive links its libraries without the sanitizers")
    work = tmp_path_factory.mktemp("packed")
    archive = work / "gpu_jit.tar.xz"
    subprocess.run([str(ROOT / "scripts" / "pack_gpu_jit.sh"), str(BUILD_DIR), str(archive)], check=True,
                   capture_output=True, text=True)
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="tar" if sys.version_info >= (3, 12) else None)
    folder = work / "kiln_gpu_jit"
    built = subprocess.run([str(folder / "build.sh")], env=dict(os.environ, PYTHON=sys.executable),
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return archive, folder


def run_probe(folder, tmp_path):
    """PROBE's findings in a fresh process that imports kiln from ``folder``."""
    env = dict(os.environ, PYTHONPATH=str(folder), KILN_CACHE_DIR=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_archive_fits_and_needs_no_llvm(packed):
    archive, folder = packed
    assert archive.stat().st_size <= LIMIT, f"{archive.stat().st_size} bytes"
    needed = subprocess.run(["readelf", "-d", str(folder / "kiln" / "libkiln_compiler.so")], capture_output=True,
                            text=True, check=True).stdout
    libraries = [line.split("[")[1].rstrip("]") for line in needed.splitlines() if "(NEEDED)" in line]
    assert libraries and all(name.startswith(("libc.", "libm.", "libgcc_s.", "libstdc++.", "ld-linux"))
                             for name in libraries), libraries


def test_packed_jit_compiles_like_the_full_build(packed, tmp_path):
    _, folder = packed
    probe = run_probe(folder, tmp_path)
    assert probe["package"].startswith(str(folder)) and probe["extension"].startswith(str(folder))
    assert "host backend is not part of this install" in probe["host"]
    assert probe["wgmma"], "the sm_90a matmul did not take the wgmma kernel"
    assert probe["launcher"] == "kiln._kiln_launch", "build.sh did not build the launch module"
    env = dict(os.environ, PYTHONPATH=str(BUILD_DIR / "python"), KILN_CACHE_DIR=str(tmp_path / "full"))
    full = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    assert json.loads(full.stdout.strip().splitlines()[-1])["ptx"] == probe["ptx"]
