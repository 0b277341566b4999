"""The disk cache of GPU programs, pinned kernel configs and autotuning's compile half, without a GPU.

Compiling for sm_90a needs no GPU, so CI checks what the cache promises: a second process finds the program
without compiling, a corrupt, truncated or incomplete entry is detected and rebuilt, processes compiling the
same program at the same time end up with one valid entry and no leftovers, and a different compiler build
never reads another build's entries. Running the programs is the GPU suite's job (test/GPU/python).
"""

import ctypes
import hashlib
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from numerics import BUILD_DIR, kiln
from kiln import cache, compiler
from kiln.autotune import default_space

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "gpu_attention_block.mlir")

PTX_FILE = "mm_k0_matmul_module.ptx"  # each kernel's files are named after its gpu.module

SOURCE = """func.func @mm(%a: tensor<40x64xbf16>, %b: tensor<64x72xbf16>) -> tensor<40x72xbf16> {
  %c = kiln.matmul %a, %b : tensor<40x64xbf16>, tensor<64x72xbf16> -> tensor<40x72xbf16>
  return %c : tensor<40x72xbf16>
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    compiler._compile_cached.cache_clear()
    yield tmp_path
    compiler._compile_cached.cache_clear()


class NoCompiler:
    """Stands in for the extension where a test asserts that nothing is compiled."""

    def compile_gpu(self, *args):
        raise AssertionError("compiled although the cache had the program")


def entries(root):
    """The program entries (the autotuner keeps its records in space/ and tuned/ beside them, the compiler its
    kernel cache in kernels/)."""
    return [p for p in root.iterdir() if not p.name.startswith(".") and p.name not in ("space", "tuned", "kernels")]


def test_entry_is_sealed(cache_dir):
    program = kiln.compile(SOURCE, target="sm_90a")
    (entry,) = entries(cache_dir)
    assert program.folder == entry and entry.name == cache.key(SOURCE, "sm_90a", "")
    checksums = json.loads((entry / "checksums.json").read_text())
    assert {"manifest.json", PTX_FILE} <= set(checksums) and program.kernels[0]["ptx"] == PTX_FILE
    assert program.entry == "mm" and program.inputs == [("bf16", (40, 64)), ("bf16", (64, 72))]
    assert ".target sm_90a" in program.ptx and program.kernels[0]["op"] == "kiln.matmul"
    assert "nvvm.mma.sync" in program.ir("llvm") or "mma" in program.ir("llvm")


def test_second_process_reads_the_cache(cache_dir):
    kiln.compile(SOURCE, target="sm_90a")
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); import kiln\n"
            "from kiln import compiler\n"
            "class No:\n    def compile_gpu(self, *a): raise SystemExit('compiled')\n"
            "compiler.native = lambda: No()\n"
            "p = kiln.compile(open(sys.argv[2]).read(), target='sm_90a'); print(p.entry)")
    source = cache_dir / "mm.mlir"
    source.write_text(SOURCE)
    result = subprocess.run([sys.executable, "-c", code, str(BUILD_DIR / "python"), str(source)],
                            capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0 and result.stdout.strip() == "mm", result.stderr


@pytest.mark.parametrize("damage", ["truncate ptx", "truncate cubin", "edit manifest", "drop checksums",
                                    "extra file", "empty checksums"])
def test_damaged_entry_is_rebuilt(cache_dir, monkeypatch, damage):
    entry = kiln.compile(SOURCE, target="sm_90a").folder
    ptx = (entry / PTX_FILE).read_text()
    if damage == "truncate ptx":
        (entry / PTX_FILE).write_text(ptx[: len(ptx) // 2])
    elif damage == "truncate cubin":
        cubin = entry / kiln.compile(SOURCE, target="sm_90a").kernels[0]["cubin"]
        cubin.write_bytes(cubin.read_bytes()[:4096])
    elif damage == "edit manifest":
        (entry / "manifest.json").write_text((entry / "manifest.json").read_text().replace("sm_90a", "sm_80"))
    elif damage == "drop checksums":
        (entry / "checksums.json").unlink()
    elif damage == "extra file":
        (entry / "stray.bin").write_bytes(b"\0")
    else:
        (entry / "checksums.json").write_text("")
    compiler._compile_cached.cache_clear()
    rebuilt = kiln.compile(SOURCE, target="sm_90a")
    assert rebuilt.folder == entry and (entry / PTX_FILE).read_text() == ptx
    assert cache.lookup(entry.name) == entry
    # And a valid entry is used as it is.
    compiler._compile_cached.cache_clear()
    monkeypatch.setattr(compiler, "native", lambda: NoCompiler())
    assert kiln.compile(SOURCE, target="sm_90a").folder == entry


def _reseal(entry):
    """Writes an entry's checksums anew, as a hand edit that knows the format would."""
    checksums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                 for p in sorted(entry.iterdir()) if p.name != "checksums.json"}
    (entry / "checksums.json").write_text(json.dumps(checksums))


@pytest.mark.parametrize("edit", ["empty object", "no grid", "unknown kernel", "missing constant"])
def test_hand_edited_manifest_is_rebuilt(cache_dir, monkeypatch, edit):
    """A manifest edited by hand and sealed again (its checksums match) is not one this Kiln can run: the entry
    is rebuilt (a raw KeyError came from the manifest {} once), and kiln.load names the file and the field."""
    source = SOURCE if edit != "missing constant" else CONSTANT_SOURCE
    entry = kiln.compile(source, target="sm_90a").folder
    manifest = json.loads((entry / "manifest.json").read_text())
    if edit == "empty object":
        manifest, error = {}, "the manifest has no 'target'"
    elif edit == "no grid":
        del manifest["kernels"][0]["grid"]
        error = "kernel 'mm_k0_matmul' has no 'grid'"
    elif edit == "unknown kernel":
        manifest["plans"][0]["steps"][0]["kernel"] = "gone"
        error = "a step of plan 'mm' launches kernel 'gone', which the manifest does not list"
    else:
        (constant,) = [v for v in manifest["plans"][0]["values"] if v["kind"] == "constant"]
        (entry / constant["file"]).unlink()
        error = f"value {constant['id']} of plan 'scaled' names file '{constant['file']}', which is not a file"
    (entry / "manifest.json").write_text(json.dumps(manifest))
    _reseal(entry)
    assert cache.lookup(entry.name) == entry  # sealed: only reading the manifest tells
    with pytest.raises(kiln.gpu.ManifestError, match=re.escape(str(entry / "manifest.json")) + ": " +
                       re.escape(error)):
        kiln.load(entry)
    compiler._compile_cached.cache_clear()
    rebuilt = kiln.compile(source, target="sm_90a")
    assert rebuilt.folder == entry and rebuilt.target == "sm_90a" and cache.lookup(entry.name) == entry
    assert kiln.load(entry).kernels[0]["grid"] == rebuilt.kernels[0]["grid"]


def test_folder_with_cubins_alone_loads(cache_dir, tmp_path):
    """A compiled folder may travel with its cubins alone (the GPU visit scripts ship it so): the manifest's PTX
    files are needed only where no cubin fits, so kiln.load takes the folder; a cubin it names and lacks is an
    error naming that file."""
    ptxas_or_skip()
    folder = tmp_path / "out"
    shutil.copytree(kiln.compile(SOURCE, target="sm_90a").folder, folder)
    for ptx in folder.glob("*.ptx"):
        ptx.unlink()
    assert kiln.load(folder).kernels[0]["name"] == "mm_k0_matmul"
    for cubin in folder.glob("*.cubin"):
        cubin.unlink()
    with pytest.raises(kiln.gpu.ManifestError, match="names cubin '.*', which is not a file of the folder"):
        kiln.load(folder)


CONSTANT_SOURCE = """func.func @scaled(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = kiln.constant dense<1.5> : tensor<4x8xf32>
  %r = kiln.mul %a, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
"""


@pytest.mark.parametrize("what", ["file", "dangling symlink"])
def test_entry_path_that_is_not_a_folder_is_replaced(cache_dir, what):
    """A file or a dangling symlink where a program's folder belongs is replaced by the program (every compile
    failed with 'could not be written' until it was removed by hand)."""
    path = cache_dir / cache.key(SOURCE, "sm_90a", "")
    if what == "file":
        path.write_text("not an entry")
    else:
        path.symlink_to(cache_dir / "missing")
    program = kiln.compile(SOURCE, target="sm_90a")
    assert program.folder == path and not path.is_symlink() and path.is_dir() and cache.lookup(path.name) == path


@pytest.fixture
def mounts():
    """Mounts for a test (a read-only bind mount, a tiny tmpfs), undone after it; skips where mounting is not
    allowed. As root, a folder's mode does not stop writes: only a read-only mount does."""
    mounted = []

    def mount(*args):
        target = args[-1]
        result = subprocess.run(["mount", *args], capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount here: {result.stderr.strip()}")
        if target not in mounted:  # a remount is no mount of its own
            mounted.append(target)

    yield mount
    for target in reversed(mounted):
        subprocess.run(["umount", target], check=True)


def make_read_only(folder, mounts):
    """Makes ``folder`` read-only for this process: by its mode, or for root by a read-only bind mount."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return
    mounts("--bind", str(folder), str(folder))
    mounts("-o", "remount,bind,ro", str(folder))


def test_read_only_cache_compiles_uncached(cache_dir, monkeypatch, mounts):
    """A cache directory that cannot be written costs time, not the compile: its entries are still used, and a
    program it lacks is compiled into a temporary folder outside it, with a CacheWarning for each cache."""
    counting_assembler(monkeypatch)
    cached = kiln.compile(SOURCE, target="sm_90a").folder
    before = sorted(str(p) for p in cache_dir.rglob("*"))
    make_read_only(cache_dir, mounts)
    compiler._compile_cached.cache_clear()
    with monkeypatch.context() as patch:  # a valid entry is read as ever
        patch.setattr(compiler, "native", lambda: NoCompiler())
        assert kiln.compile(SOURCE, target="sm_90a").folder == cached
    with pytest.warns(cache.CacheWarning) as caught:
        program = kiln.compile(SOURCE.replace("40x", "64x"), target="sm_90a")
    messages = [str(w.message) for w in caught]
    assert any(f"the kiln cache {cache_dir} cannot be written" in m for m in messages), messages
    assert any("kernel cache" in m and "cannot create" in m for m in messages), messages
    assert cache_dir not in program.folder.parents and program.kernels[0]["kernel_cache"] == "miss"
    assert program.inputs == [("bf16", (64, 64)), ("bf16", (64, 72))] and (program.folder / PTX_FILE).is_file()
    assert sorted(str(p) for p in cache_dir.rglob("*")) == before


def test_full_kernel_cache_is_skipped(cache_dir, monkeypatch, mounts):
    """A kernel cache on a full disk (a 16 KiB tmpfs: the kernel's files do not all fit) is skipped with a
    CacheWarning naming the file it could not write, and leaves no staging folder; the program compiles and is
    cached. (This once ended the process: "LLVM ERROR: IO failure on output stream".)"""
    counting_assembler(monkeypatch)
    kernels = cache_dir / "kernels" / cache.compiler_id()
    kernels.mkdir(parents=True)
    mounts("-t", "tmpfs", "-o", "size=16k", "tmpfs", str(kernels))
    with pytest.warns(cache.CacheWarning, match=r"kernel cache .* cannot be written "
                      r"\(cannot write .*(kernel\.(ptx|cubin)|entry\.json): No space left on device\)"):
        program = kiln.compile(SOURCE, target="sm_90a")
    assert program.kernels[0]["kernel_cache"] == "miss" and cache.lookup(program.folder.name) == program.folder
    assert "No space left on device" in program.manifest["kernel_cache_failed"]
    assert not list(kernels.iterdir()), "the kernel cache kept a staging folder or a partial entry"


def test_full_program_cache_is_a_named_error(cache_dir, monkeypatch, mounts):
    """A program cache on a full disk (a 12 KiB tmpfs: the PTX fits, its cubin does not) fails the compile with
    a CompileError naming the file (ptxas itself exits with 0 after writing a truncated cubin), and leaves no
    staging folder and no entry."""
    root = cache_dir / "full"
    root.mkdir()
    monkeypatch.setenv("KILN_CACHE_DIR", str(root))
    mounts("-t", "tmpfs", "-o", "size=12k", "tmpfs", str(root))
    with pytest.raises(kiln.CompileError, match=r"(cannot write \S+|ptxas wrote an incomplete cubin \S+"
                                                r"mm_k0_matmul_module\.sm_90a\.cubin)"):
        kiln.compile(SOURCE, target="sm_90a")
    assert [p.name for p in root.iterdir()] in ([], ["kernels"])
    assert not [p for p in root.rglob("*") if p.is_file()], "a failed compile left files in the cache"


def _compile_in_child(cache_root, build_python, queue):
    os.environ["KILN_CACHE_DIR"] = cache_root
    sys.path.insert(0, build_python)
    import kiln as child_kiln
    queue.put(str(child_kiln.compile(SOURCE, target="sm_90a").folder))


def test_processes_compiling_at_once(cache_dir):
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    children = [context.Process(target=_compile_in_child, args=(str(cache_dir), str(BUILD_DIR / "python"), queue))
                for _ in range(4)]
    for child in children:
        child.start()
    folders = {queue.get(timeout=120) for _ in children}
    for child in children:
        child.join(timeout=120)
        assert child.exitcode == 0
    (entry,) = entries(cache_dir)
    assert folders == {str(entry)} and cache.lookup(entry.name) == entry
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".")], "a staging folder was left behind"
    # The kernel cache, which the children wrote at once too: one entry, every child's staging folder gone.
    (kernel,) = (cache_dir / "kernels" / cache.compiler_id()).iterdir()
    assert sorted(p.name for p in kernel.iterdir()) == ["checksums.json", "entry.json", "kernel.cubin", "kernel.ptx"]


def test_compiler_build_is_part_of_the_key(cache_dir, monkeypatch):
    first = kiln.compile(SOURCE, target="sm_90a").folder
    compiler._compile_cached.cache_clear()
    monkeypatch.setattr(cache, "compiler_id", lambda: "another-build")
    second = kiln.compile(SOURCE, target="sm_90a").folder
    assert first != second and len(entries(cache_dir)) == 2
    assert cache.key(SOURCE, "sm_80", "") != cache.key(SOURCE, "sm_90a", "")


def ptxas_or_skip():
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if not os.access(ptxas, os.X_OK):
        pytest.skip("no ptxas to stand in for the driver's JIT")
    return ptxas


def ptxas_assembler(ptxas):
    """What the driver's JIT returns, with ptxas standing in: PTX bytes -> (cubin, a ptxas -v log). Each call
    works in a folder of its own, so that the compile's threads may call it at once."""
    def assemble(ptx):
        with tempfile.TemporaryDirectory(prefix="kiln-asm-") as folder:
            source, cubin = os.path.join(folder, "in.ptx"), os.path.join(folder, "out.cubin")
            with open(source, "wb") as out:
                out.write(ptx)
            run = subprocess.run([ptxas, "-arch=sm_90a", "-v", source, "-o", cubin], capture_output=True, text=True,
                                 check=True)
            with open(cubin, "rb") as image:
                return image.read(), run.stdout + run.stderr
    return assemble


def test_in_process_assembler_makes_the_cubin(cache_dir, monkeypatch):
    stand_in, calls = ptxas_assembler(ptxas_or_skip()), []

    def assemble(ptx):
        calls.append(ptx)
        return stand_in(ptx)

    monkeypatch.setattr(compiler, "driver_assembler", lambda target: assemble if target == "sm_90a" else None)
    program = kiln.compile(SOURCE, target="sm_90a")
    assert len(calls) == 1 and calls[0].decode() == program.ptx
    manifest = program.manifest
    assert manifest["assembler"] == "the CUDA driver's JIT" and "Used" in manifest["ptxas"]
    (kernel,) = program.kernels
    assert (program.folder / kernel["cubin"]).read_bytes()[:4] == b"\x7fELF"
    assert kernel["registers"] > 0 and kernel["spill_stores"] == 0
    assert sorted(p.name for p in program.folder.iterdir()) == ["checksums.json", "manifest.json", PTX_FILE,
                                                                "mm_k0_matmul_module.sm_90a.cubin"]


def test_kernels_assemble_in_parallel(cache_dir, monkeypatch):
    """Each kernel of the two-kernel example is its own module: the assembler gets one PTX per kernel, on two
    threads at once, and each kernel entry names its own PTX and cubin."""
    import threading
    stand_in, calls = ptxas_assembler(ptxas_or_skip()), []

    def assemble(ptx):
        calls.append(threading.get_ident())
        return stand_in(ptx)

    monkeypatch.setattr(compiler, "driver_assembler", lambda target: assemble if target == "sm_90a" else None)
    program = kiln.compile(open(EXAMPLE).read(), target="sm_90a")
    kernels = program.manifest["kernels"]
    assert len(calls) == len(kernels) == 2
    assert len(set(calls)) == 2 or os.cpu_count() == 1  # at once, on two threads
    files = [(k["ptx"], k["cubin"]) for k in kernels]
    assert files == [(f"{k['name']}_module.ptx", f"{k['name']}_module.sm_90a.cubin") for k in kernels]
    assert all(k["registers"] > 0 for k in kernels)
    texts = [(program.folder / ptx).read_text() for ptx, _ in files]
    assert program.ptx == "".join(texts) and all(t.count(".entry") == 1 for t in texts)
    # Where the compile's time went: each stage, and each kernel's emission and assembly.
    stages = program.manifest["compile_us"]
    assert set(stages) == {"kernel_stage", "run_plans", "kernel_cache", "nvvm_lowering", "ptx_and_assembly", "total"}
    assert all(isinstance(value, int) and value > 0 for value in stages.values())
    assert stages["total"] >= sum(value for name, value in stages.items() if name != "total")
    assert all(k["compile_us"]["ptx"] > 0 and k["compile_us"]["assembly"] > 0 for k in kernels)
    assert all(k["compile_us"]["start"] >= 0 for k in kernels)
    assert max(k["compile_us"]["start"] + k["compile_us"]["ptx"] + k["compile_us"]["assembly"]
               for k in kernels) <= stages["ptx_and_assembly"]


MLP = """func.func @mlp(%x: tensor<77x512xbf16>, %w1: tensor<512x1536xbf16>, %b1: tensor<1536xbf16>,
                    %w2: tensor<1536x1024xbf16>, %b2: tensor<1024xbf16>, %w3: tensor<1024x512xbf16>)
    -> (tensor<77x512xbf16>) {
  %h = kiln.matmul %x, %w1 : tensor<77x512xbf16>, tensor<512x1536xbf16> -> tensor<77x1536xbf16>
  %hb = kiln.add %h, %b1 : tensor<77x1536xbf16>, tensor<1536xbf16> -> tensor<77x1536xbf16>
  %ha = kiln.silu %hb : tensor<77x1536xbf16>
  %g = kiln.matmul %ha, %w2 : tensor<77x1536xbf16>, tensor<1536x1024xbf16> -> tensor<77x1024xbf16>
  %gb = kiln.add %g, %b2 : tensor<77x1024xbf16>, tensor<1024xbf16> -> tensor<77x1024xbf16>
  %ga = kiln.silu %gb : tensor<77x1024xbf16>
  %y = kiln.matmul %ga, %w3 : tensor<77x1024xbf16>, tensor<1024x512xbf16> -> tensor<77x512xbf16>
  return %y : tensor<77x512xbf16>
}
"""


def test_matmuls_that_differ_in_size_share_a_kernel(cache_dir, monkeypatch):
    """The MLP's two bias + SiLU matmuls (512 -> 1536 and 1536 -> 1024) differ only in their sizes, which the
    size-generic kernel takes as parameters: one module is compiled and assembled for both, each entry launches
    it with its own grid and sizes. The last matmul has no epilogue: a kernel of its own."""
    calls = []
    stand_in = ptxas_assembler(ptxas_or_skip())

    def assemble(ptx):
        calls.append(ptx)
        return stand_in(ptx)

    monkeypatch.setattr(compiler, "driver_assembler", lambda target: assemble if target == "sm_90a" else None)
    program = kiln.compile(MLP, target="sm_90a")
    first, second, third = program.kernels
    assert len(calls) == 2 and program.ptx.count(".entry") == 2
    assert (second["ptx"], second["cubin"], second["function"]) == (first["ptx"], first["cubin"], first["name"])
    assert third["ptx"] != first["ptx"] and third["function"] == third["name"]
    assert [k["sizes"] for k in program.kernels] == [[77, 1536, 512], [77, 1024, 1536], [77, 512, 1024]]
    assert first["grid"] != second["grid"]
    assert "then a kernel's sizes as 64-bit integers" in program.manifest["abi"]


def counting_assembler(monkeypatch):
    """ptxas standing in for the driver's JIT on sm_90a compiles; returns the list of PTX texts it assembles."""
    calls, stand_in = [], ptxas_assembler(ptxas_or_skip())

    def assemble(ptx):
        calls.append(ptx)
        return stand_in(ptx)

    monkeypatch.setattr(compiler, "driver_assembler", lambda target: assemble if target == "sm_90a" else None)
    return calls


def test_kernel_cache_serves_a_program_of_other_sizes(cache_dir, monkeypatch):
    """A second program whose matmul differs in M and in its names finds the first's compiled kernel: nothing is
    lowered, emitted or assembled, its entry launches the first program's function with its own sizes, and the
    registers come from the cached report."""
    calls = counting_assembler(monkeypatch)
    first = kiln.compile(SOURCE, target="sm_90a")
    other = SOURCE.replace("@mm", "@other").replace("40x", "57x")
    second = kiln.compile(other, target="sm_90a")
    assert len(calls) == 1
    (a,), (b,) = first.kernels, second.kernels
    assert (a["kernel_cache"], b["kernel_cache"]) == ("miss", "hit")
    assert b["name"] == "other_k0_matmul" and b["function"] == a["function"] == "mm_k0_matmul"
    assert (a["sizes"], b["sizes"]) == ([40, 72, 64], [57, 72, 64]) and b["registers"] == a["registers"] > 0
    assert second.ptx == first.ptx and b["ptx"] == "other_k0_matmul_module.ptx"
    assert (second.folder / b["cubin"]).read_bytes() == (first.folder / a["cubin"]).read_bytes()
    assert b["compile_us"] == {"start": 0, "ptx": 0, "assembly": 0}
    assert second.manifest["compile_us"]["kernel_cache"] > 0
    # The kernel cache lives beside the programs, per build of the compiler.
    (entry,) = (cache_dir / "kernels" / cache.compiler_id()).iterdir()
    assert sorted(p.name for p in entry.iterdir()) == ["checksums.json", "entry.json", "kernel.cubin", "kernel.ptx"]


def test_kernels_that_need_other_code_are_not_shared(cache_dir, monkeypatch):
    """Sizes that change what the kernel's code must do make another kernel, which the kernel cache does not
    serve for the first: M = 64 is a whole 64-row tile where M = 40 is not; with a transposed rhs, an odd N stores
    element by element and an even one in pairs. Sizes that change nothing do share."""
    counting_assembler(monkeypatch)
    first = kiln.compile(SOURCE, target="sm_90a").kernels[0]
    whole = kiln.compile(SOURCE.replace("40x", "64x"), target="sm_90a").kernels[0]
    assert whole["config"] == first["config"] and whole["kernel_cache"] == "miss"
    transposed = """func.func @t(%a: tensor<40x64xbf16>, %b: tensor<73x64xbf16>) -> tensor<40x73xbf16> {
  %c = kiln.matmul %a, %b transpose_rhs : tensor<40x64xbf16>, tensor<73x64xbf16> -> tensor<40x73xbf16>
  return %c : tensor<40x73xbf16>
}
"""
    assert kiln.compile(transposed, target="sm_90a").kernels[0]["kernel_cache"] == "miss"
    assert kiln.compile(transposed.replace("73", "74"), target="sm_90a").kernels[0]["kernel_cache"] == "miss"
    assert kiln.compile(transposed.replace("73", "75"), target="sm_90a").kernels[0]["kernel_cache"] == "hit"
    assert kiln.compile(SOURCE.replace("40x", "41x"), target="sm_90a").kernels[0]["kernel_cache"] == "hit"


ATTENTION = """func.func @att(%q: tensor<1x2xSQx64xbf16>, %k: tensor<1x2xSKx64xbf16>, %v: tensor<1x2xSKx64xbf16>)
    -> tensor<1x2xSQx64xbf16> {
  %o = kiln.attention %q, %k, %v CAUSAL : tensor<1x2xSQx64xbf16>, tensor<1x2xSKx64xbf16>, tensor<1x2xSKx64xbf16>
    -> tensor<1x2xSQx64xbf16>
  return %o : tensor<1x2xSQx64xbf16>
}
"""


def attention_source(seq_q, seq_k, causal=False):
    return (ATTENTION.replace("SQ", str(seq_q)).replace("SK", str(seq_k))
            .replace("CAUSAL", "causal" if causal else ""))


def test_attention_kernel_cache_serves_other_lengths(cache_dir, monkeypatch):
    """The attention kernel reads Sq and Sk from its parameters wherever its loop nest does (the key loops'
    bounds, the masks): another length with the same config and the same static properties (whether the key
    tiles are whole, whether Sq is a whole number of query tiles, one query row or more under the causal mask)
    finds the compiled kernel and launches it with its own sizes and grid, however many key tiles it has; a
    length that changes one of them is another kernel. A growing KV cache finds its decode kernel at every
    length with the same wholeness."""
    calls = counting_assembler(monkeypatch)
    first = kiln.compile(attention_source(250, 250, causal=True), target="sm_90a").kernels[0]
    again = kiln.compile(attention_source(190, 240, causal=True), target="sm_90a").kernels[0]
    assert first["config"] == again["config"], "the lengths were meant to keep the config"
    assert (first["kernel_cache"], again["kernel_cache"]) == ("miss", "hit") and len(calls) == 1
    assert (first["sizes"], again["sizes"]) == ([250, 250], [190, 240]) and first["grid"] != again["grid"]
    assert again["function"] == first["function"]
    # Decoding with a growing KV cache: one query row against 300 keys, then as many as the same key tiles hold.
    step = kiln.compile(attention_source(1, 300, causal=True), target="sm_90a").kernels[0]
    bk = step["config"]["tile"][1]
    later = kiln.compile(attention_source(1, -(-300 // bk) * bk - 1, causal=True), target="sm_90a").kernels[0]
    assert step["config"] == later["config"] and (step["kernel_cache"], later["kernel_cache"]) == ("miss", "hit")
    many = kiln.compile(attention_source(1, 20 * bk + 7, causal=True), target="sm_90a").kernels[0]
    assert many["config"] == step["config"] and many["kernel_cache"] == "hit" and many["sizes"] == [1, 20 * bk + 7]
    filled = [kiln.compile(attention_source(1, n * bk, causal=True), target="sm_90a").kernels[0] for n in (8, 30)]
    assert [k["kernel_cache"] for k in filled] == ["miss", "hit"]  # whole key tiles: one more kernel for all
    whole = kiln.compile(attention_source(256, 256, causal=True), target="sm_90a").kernels[0]
    assert whole["config"] == first["config"] and whole["kernel_cache"] == "miss"  # no partial key tile
    longer = kiln.compile(attention_source(300, 300, causal=True), target="sm_90a").kernels[0]
    assert longer["config"] == first["config"] and longer["kernel_cache"] == "hit"  # a fifth key tile, partial


def test_folders_killed_processes_left_are_swept(cache_dir, monkeypatch):
    """Private folders (dot names) older than an hour, in the program cache and in the kernel cache, are removed
    by the next process that stores there; a fresh one (a live process's) and every entry stay."""
    counting_assembler(monkeypatch)
    kernels = cache_dir / "kernels" / cache.compiler_id()
    old = [cache_dir / ".0123456789abcdef.x1", kernels / ".staging-abandoned", kernels / ".damaged-abandoned"]
    fresh = [cache_dir / ".fedcba9876543210.x2", kernels / ".staging-live"]
    for folder in old + fresh:
        folder.mkdir(parents=True)
        (folder / "kernel.ptx").write_text("half written")
    for folder in old:
        os.utime(folder, (1e9, 1e9))
    kiln.compile(SOURCE, target="sm_90a")
    assert not any(folder.exists() for folder in old) and all(folder.exists() for folder in fresh)
    assert len(entries(cache_dir)) == 1 and len([p for p in kernels.iterdir() if not p.name.startswith(".")]) == 1


def test_report_of_a_cubin_from_the_drivers_own_cache(cache_dir, monkeypatch):
    """When the driver serves a cubin from its own JIT cache, its log says "Function properties for 'f':" and
    "used N registers, ..., M bytes lmem" instead of ptxas' lines (seen on the H200): the manifest still gets the
    registers, and no local memory means no spills."""
    stand_in = ptxas_assembler(ptxas_or_skip())

    def cached(ptx):
        cubin, _ = stand_in(ptx)
        return cubin, ("info    : 0 bytes gmem\ninfo    : Function properties for 'mm_k0_matmul':\n"
                       "info    : used 77 registers, used 1 barriers, 0 stack, 1024 bytes smem, 576 bytes cmem[0], "
                       "0 bytes lmem")

    monkeypatch.setattr(compiler, "driver_assembler", lambda target: cached if target == "sm_90a" else None)
    (kernel,) = kiln.compile(SOURCE, target="sm_90a").kernels
    assert (kernel["registers"], kernel["spill_stores"], kernel["spill_loads"]) == (77, 0, 0)


def test_build_without_an_id_has_no_kernel_cache(cache_dir, monkeypatch):
    """A build that does not know its id could take another build's kernels: it keeps none."""
    monkeypatch.setattr(cache, "compiler_id", lambda: "unknown-build")
    program = kiln.compile(SOURCE, target="sm_90a")
    assert "kernel_cache" not in program.kernels[0] and not (cache_dir / "kernels").exists()


def test_kernel_without_a_cubin_is_not_cached(cache_dir, monkeypatch):
    """A kernel module the in-process assembler failed on (ptxas then made its cubin) is not stored: the next
    program with that kernel compiles it again rather than take what the assembler of choice did not make."""
    def failing(ptx):
        raise RuntimeError("the driver's JIT is out of order")

    monkeypatch.setattr(compiler, "driver_assembler", lambda target: failing if target == "sm_90a" else None)
    first = kiln.compile(SOURCE, target="sm_90a")
    assert "in_process_assembly_failed" in first.manifest and first.kernels[0]["kernel_cache"] == "miss"
    assert not (cache_dir / "kernels" / cache.compiler_id()).exists() or \
        not list((cache_dir / "kernels" / cache.compiler_id()).iterdir())
    assert kiln.compile(SOURCE.replace("40x", "41x"), target="sm_90a").kernels[0]["kernel_cache"] == "miss"


@pytest.mark.parametrize("damage", ["truncate ptx", "truncate cubin", "edit cubin", "drop entry", "bad json",
                                    "edit function", "empty entry"])
def test_damaged_kernel_entry_is_compiled_again(cache_dir, monkeypatch, damage):
    """A kernel entry whose files or description (the function the cubin is launched by) do not match their
    checksums, or that cannot be read, is removed, and the kernel is compiled again and stored anew."""
    calls = counting_assembler(monkeypatch)
    kiln.compile(SOURCE, target="sm_90a")
    (entry,) = (cache_dir / "kernels" / cache.compiler_id()).iterdir()
    if damage == "truncate ptx":
        (entry / "kernel.ptx").write_text((entry / "kernel.ptx").read_text()[:100])
    elif damage == "truncate cubin":
        (entry / "kernel.cubin").write_bytes((entry / "kernel.cubin").read_bytes()[:4096])
    elif damage == "edit function":  # valid JSON, the files' checksums still match: a wrong name to launch
        description = json.loads((entry / "entry.json").read_text())
        (entry / "entry.json").write_text(json.dumps(dict(description, function="other_k0_matmul")))
    elif damage == "empty entry":
        (entry / "entry.json").write_text("{}")
    elif damage == "edit cubin":
        (entry / "kernel.cubin").write_bytes(b"\0" + (entry / "kernel.cubin").read_bytes()[1:])
    elif damage == "drop entry":
        (entry / "entry.json").unlink()
    else:
        (entry / "entry.json").write_text("{")
    program = kiln.compile(SOURCE.replace("40x", "41x"), target="sm_90a")
    assert len(calls) == 2 and program.kernels[0]["kernel_cache"] == "miss"
    assert sorted(p.name for p in entry.iterdir()) == ["checksums.json", "entry.json", "kernel.cubin", "kernel.ptx"]
    assert kiln.compile(SOURCE.replace("40x", "42x"), target="sm_90a").kernels[0]["kernel_cache"] == "hit"
    assert len(calls) == 2


@pytest.mark.parametrize("what", ["file", "dangling symlink", "symlink to an entry"])
def test_kernel_entry_path_that_is_not_a_folder_is_replaced(cache_dir, monkeypatch, what):
    """A file or a symlink where a kernel entry's folder belongs is removed and the kernel compiled and stored
    again, rather than missed by every compile; a symlink is never taken as an entry, even to a valid one."""
    calls = counting_assembler(monkeypatch)
    kiln.compile(SOURCE, target="sm_90a")
    (entry,) = (cache_dir / "kernels" / cache.compiler_id()).iterdir()
    elsewhere = cache_dir / "elsewhere"
    shutil.move(entry, elsewhere)
    if what == "file":
        entry.write_text("not an entry")
    else:
        entry.symlink_to(elsewhere if what == "symlink to an entry" else cache_dir / "missing")
    assert kiln.compile(SOURCE.replace("40x", "41x"), target="sm_90a").kernels[0]["kernel_cache"] == "miss"
    assert not entry.is_symlink() and entry.is_dir() and len(calls) == 2
    assert kiln.compile(SOURCE.replace("40x", "42x"), target="sm_90a").kernels[0]["kernel_cache"] == "hit"
    assert len(calls) == 2


def test_kernel_entry_from_another_build_is_not_taken(cache_dir, monkeypatch):
    """The kernel cache is one folder per compiler build, and an entry records the folder it was written for:
    one copied from another build's folder (same kernel text, same key) is compiled again, not loaded."""
    calls = counting_assembler(monkeypatch)
    kiln.compile(SOURCE, target="sm_90a")
    (entry,) = (cache_dir / "kernels" / cache.compiler_id()).iterdir()
    other = cache_dir / "kernels" / "another-build"
    other.mkdir()
    shutil.copytree(entry, other / entry.name)
    monkeypatch.setattr(cache, "compiler_id", lambda: "another-build")
    assert kiln.compile(SOURCE.replace("40x", "41x"), target="sm_90a").kernels[0]["kernel_cache"] == "miss"
    assert len(calls) == 2
    assert kiln.compile(SOURCE.replace("40x", "42x"), target="sm_90a").kernels[0]["kernel_cache"] == "hit"


def test_interrupt_in_the_assembler_is_raised_again(cache_dir, monkeypatch, tmp_path):
    """Ctrl-C while the in-process assembler runs (KeyboardInterrupt inside it) stops the compile with that
    interrupt: ptxas does not take over (a ptxas on PATH that would leave a mark is never run), and nothing lands
    in the cache."""
    stub, mark = tmp_path / "bin", tmp_path / "ptxas-ran"
    stub.mkdir()
    (stub / "ptxas").write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    (stub / "ptxas").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub}{os.pathsep}{os.environ['PATH']}")

    def interrupted(ptx):
        raise KeyboardInterrupt

    monkeypatch.setattr(compiler, "driver_assembler", lambda target: interrupted if target == "sm_90a" else None)
    with pytest.raises(KeyboardInterrupt):
        kiln.compile(open(EXAMPLE).read(), target="sm_90a")
    assert not mark.exists()
    assert not [p for p in cache_dir.rglob("manifest.json")]


def test_no_ptxas_after_an_interrupt(cache_dir, monkeypatch, tmp_path):
    """The first kernel's assembler is interrupted while the other kernel's runs on another worker; that one
    fails a moment later and must not fall back to ptxas (a ptxas on PATH that would leave a mark), since the
    compile is ending. (With one worker the second kernel is never assembled at all.)"""
    import threading
    import time
    stub, mark = tmp_path / "bin", tmp_path / "ptxas-ran"
    stub.mkdir()
    (stub / "ptxas").write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
    (stub / "ptxas").chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub}{os.pathsep}{os.environ['PATH']}")
    calls, lock, second_entered = [], threading.Lock(), threading.Event()

    def assemble(ptx):
        with lock:
            calls.append(ptx)
            first = len(calls) == 1
        if first:
            second_entered.wait(timeout=2)  # with two workers, both kernels are in their assemblers now
            raise KeyboardInterrupt
        second_entered.set()
        time.sleep(0.3)  # the interrupt has reached the compile by now
        raise RuntimeError("assembling the PTX: CUDA_ERROR_UNKNOWN")

    monkeypatch.setattr(compiler, "driver_assembler", lambda target: assemble if target == "sm_90a" else None)
    with pytest.raises(KeyboardInterrupt):
        kiln.compile(open(EXAMPLE).read(), target="sm_90a")
    assert not mark.exists()
    assert 1 <= len(calls) <= 2


def test_assembler_failing_on_one_kernel(tmp_path):
    """The in-process assembler fails on one kernel of two: that kernel falls back to ptxas, the other keeps the
    driver's cubin, and the manifest names both assemblers and the reason."""
    stand_in = ptxas_assembler(ptxas_or_skip())

    def assemble(ptx):
        if b"k0_attention" in ptx:
            raise RuntimeError("assembling the PTX: CUDA_ERROR_OUT_OF_MEMORY")
        return stand_in(ptx)

    out = tmp_path / "out"
    compiler.native().compile_gpu(open(EXAMPLE).read(), "sm_90a", str(out), assembler=assemble)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["assembler"] == "ptxas and the CUDA driver's JIT"  # in kernel order
    assert "CUDA_ERROR_OUT_OF_MEMORY" in manifest["in_process_assembly_failed"]
    for kernel in manifest["kernels"]:
        assert (out / kernel["cubin"]).read_bytes()[:4] == b"\x7fELF" and kernel["registers"] > 0


def test_ptxas_when_no_gpu_matches(cache_dir, monkeypatch):
    ptxas_or_skip()
    monkeypatch.setattr(compiler, "driver_assembler", lambda target: None)
    program = kiln.compile(SOURCE, target="sm_90a")
    assert program.manifest["assembler"] == "ptxas" and program.kernels[0]["registers"] > 0


def test_in_process_assembler_failure(cache_dir, monkeypatch, tmp_path):
    ptxas_or_skip()

    def broken(ptx):
        raise RuntimeError("assembling the PTX: CUDA_ERROR_OUT_OF_MEMORY")

    # The extension falls back to ptxas and keeps the reason in the manifest ...
    for index, (assembler, reason) in enumerate([(broken, "assembling the PTX: CUDA_ERROR_OUT_OF_MEMORY"),
                                                 (lambda ptx: ("not a pair",), "index")]):
        folder = tmp_path / f"out{index}"
        compiler.native().compile_gpu(SOURCE, "sm_90a", str(folder), assembler=assembler)
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["assembler"] == "ptxas" and reason in manifest["in_process_assembly_failed"]
        (kernel,) = manifest["kernels"]
        assert (folder / kernel["cubin"]).read_bytes()[:4] == b"\x7fELF" and kernel["registers"] > 0
    # ... and so does kiln.compile.
    monkeypatch.setattr(compiler, "driver_assembler", lambda target: broken)
    program = kiln.compile(SOURCE, target="sm_90a")
    assert program.manifest["assembler"] == "ptxas" and program.kernels[0]["registers"] > 0


class FakeDevice:
    capability = (9, 0)

    def assemble(self, ptx):
        raise AssertionError("not called here")


def test_driver_assembler_only_for_the_gpu_architecture(monkeypatch):
    from kiln import gpu, runtime
    monkeypatch.setattr(runtime, "device", lambda ordinal=0: FakeDevice())
    assert gpu.driver_assembler("sm_90a").__self__.__class__ is FakeDevice
    assert gpu.driver_assembler("sm_80") is None, "an sm_90 cubin must not be cached as sm_80's"

    for failure in (RuntimeError("no CUDA driver: cannot load libcuda.so.1"), OSError("libkiln_runtime.so: bad ELF")):
        def no_driver(ordinal=0, failure=failure):
            raise failure
        monkeypatch.setattr(runtime, "device", no_driver)
        assert gpu.driver_assembler("sm_90a") is None


def test_runtime_assembler_rejects_null_arguments():
    from kiln import runtime
    lib = runtime._library()
    cubin, size, log = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_void_p()
    assert lib.kiln_assemble_ptx(None, b"x", ctypes.c_size_t(1), ctypes.byref(cubin), ctypes.byref(size),
                                 ctypes.byref(log)) == 4  # KILN_ERROR_INVALID_ARGUMENT
    assert lib.kiln_last_error() == b"kiln_assemble_ptx: empty PTX or null pointer"
    lib.kiln_buffer_free(None)  # releasing nothing is allowed


def test_load_what_kilnc_wrote(tmp_path):
    kilnc = BUILD_DIR / "bin" / "kilnc"
    if not kilnc.exists():
        pytest.skip(f"no kilnc at {kilnc} (testing an installed package without a build tree)")
    source = tmp_path / "mm.mlir"
    source.write_text(SOURCE)
    subprocess.run([str(kilnc), str(source), "--target=sm_80", "-o", str(tmp_path / "out")],
                   check=True, capture_output=True)
    program = kiln.load(tmp_path / "out")
    assert program.target == "sm_80" and program.entry == "mm" and program.outputs == [("bf16", (40, 72))]
    with pytest.raises(ValueError, match="only its 'ptx' stage"):
        program.ir("fused")
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        kiln.load(tmp_path)
    with pytest.raises(ValueError, match="no function 'other'"):
        kiln.load(tmp_path / "out", entry="other")
    # A manifest from before per-kernel files (one kernels.ptx for all) is named as such, not a KeyError.
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    for kernel in manifest["kernels"]:
        del kernel["ptx"], kernel["cubin"]
    (tmp_path / "out" / "manifest.json").write_text(json.dumps(dict(manifest, ptx="kernels.ptx")))
    with pytest.raises(ValueError, match="mm_k0_matmul names no PTX file or function; .* older Kiln, compile it"):
        kiln.load(tmp_path / "out")
    # So is one from before kernels named the function they launch.
    for kernel in manifest["kernels"]:
        kernel.update(ptx="mm_k0_matmul_module.ptx", cubin=None)
        del kernel["function"]
    (tmp_path / "out" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="mm_k0_matmul names no PTX file or function; .* older Kiln, compile it"):
        kiln.load(tmp_path / "out")


def test_gpu_compile_errors(cache_dir):
    # A config that the mma_sync kernel cannot split into fragments (BK = 8 for bf16).
    pinned = SOURCE.replace(" : tensor<40x64xbf16>, tensor<64x72xbf16>", ' {kiln.config = #kiln.config<tile = [64, 64, 8], '
                            'warps = 4, stages = 3, lowering = "mma_sync">} : tensor<40x64xbf16>, tensor<64x72xbf16>')
    with pytest.raises(kiln.CompileError, match="does not fit the mma_sync kernel"):
        kiln.compile(pinned, target="sm_90a")
    assert not entries(cache_dir) and not list(cache_dir.iterdir()), "a failed compile left files in the cache"
    with pytest.raises(ValueError, match="unsupported target 'sm_75'"):
        kiln.compile(SOURCE, target="sm_75")


def test_pinned_configs(cache_dir):
    source = open(EXAMPLE).read()
    kernels = json.loads(compiler.native().tunable_kernels(source, "sm_90a"))
    assert [k["op"] for k in kernels] == ["kiln.attention", "kiln.matmul"]
    assert all(kiln.Config.of(k["config"]).as_json() == k["config"] for k in kernels)
    program = kiln.compile(source, target="sm_90a", configs=[((64, 64), 4, 2), ((64, 64, 64), 4, 3)])
    configs = [k["config"] for k in program.kernels if "config" in k]
    assert configs == [{"tile": [64, 64], "warps": 4, "stages": 2, "lowering": "mma_sync"},
                       {"tile": [64, 64, 64], "warps": 4, "stages": 3, "lowering": "mma_sync"}]
    default = kiln.compile(source, target="sm_90a")
    assert default.folder != program.folder
    with pytest.raises(ValueError, match="configs has 1 entries but the program has 2 tunable kernels"):
        kiln.compile(source, target="sm_90a", configs=[((64, 64), 4, 2)])
    with pytest.raises(kiln.CompileError, match="does not fit the mma_sync kernel"):
        kiln.compile(source, target="sm_90a", configs=[None, ((48, 40, 24), 4, 3)])
    with pytest.raises(ValueError, match="the host target has none to pin"):
        kiln.compile(source, configs=[None, None])
    # A kiln.Config is the same pin as its tuple; a value that is no config is named; #kiln.config's verifier
    # checks the numbers.
    assert kiln.compile(source, target="sm_90a", configs=[kiln.Config((64, 64), 4, 2),
                                                          ((64, 64, 64), 4, 3)]).folder == program.folder
    with pytest.raises(ValueError, match="a kernel config is .*, got \\('64x64', 4\\)"):
        kiln.compile(source, target="sm_90a", configs=[None, ("64x64", 4)])
    with pytest.raises(kiln.CompileError, match="invalid config: "):
        kiln.compile(source, target="sm_90a", configs=[((64, 64), 0, 2), None])
    hopper = kiln.compile(source, target="sm_90a", configs=[None, ((128, 64, 64), 8, 4, "wgmma")])
    assert [k["config"]["lowering"] for k in hopper.kernels if "config" in k] == ["wgmma", "wgmma"]
    assert "wgmma.mma_async" in hopper.ptx
    # A matmul's tile order (groups of tile rows) is pinned as the fifth entry, and kept in the manifest.
    grouped = kiln.compile(source, target="sm_90a", configs=[None, ((128, 64, 64), 8, 4, "wgmma", 4)])
    assert [k["config"].get("group") for k in grouped.kernels if "config" in k] == [None, 4]
    assert kiln.Config.of(grouped.kernels[-1]["config"]) == kiln.Config((128, 64, 64), 8, 4, "wgmma", 4)
    with pytest.raises(kiln.CompileError, match="group must be in \\[1, 64\\], got 0"):
        kiln.compile(source, target="sm_90a", configs=[None, ((128, 64, 64), 8, 4, "wgmma", 0)])
    with pytest.raises(kiln.CompileError, match="group orders a GPU matmul's tiles"):
        kiln.compile(source, target="sm_90a", configs=[((64, 64), 4, 2, "mma_sync", 2), None])
    with pytest.raises(ValueError, match="a kernel config is .*, got .*'wgmma', 1.5"):
        kiln.compile(source, target="sm_90a", configs=[None, ((128, 64, 64), 8, 4, "wgmma", 1.5)])
    # The contraction split over a cluster (k_splits) is the sixth entry: kept in the manifest, one kernel whose
    # PTX asks for clusters of that many blocks; more than 8, or on another lowering, the verifier refuses.
    clustered = kiln.compile(source, target="sm_90a", configs=[None, ((128, 64, 64), 8, 4, "wgmma", 1, 2)])
    assert kiln.Config.of(clustered.kernels[-1]["config"]) == kiln.Config((128, 64, 64), 8, 4, "wgmma", 1, 2)
    assert clustered.kernels[-1]["config"]["k_splits"] == 2 and ".reqnctapercluster 2, 1, 1" in clustered.ptx
    with pytest.raises(kiln.CompileError, match="k_splits must be in \\[1, 8\\]"):
        kiln.compile(source, target="sm_90a", configs=[None, ((128, 64, 64), 8, 4, "wgmma", 1, 9)])
    with pytest.raises(kiln.CompileError, match="k_splits splits a wgmma matmul's contraction"):
        kiln.compile(source, target="sm_90a", configs=[None, ((64, 64, 32), 4, 3, "mma_sync", 1, 2)])
    with pytest.raises(kiln.CompileError, match="the wgmma lowering needs sm_90a, not sm_80"):
        kiln.compile(source, target="sm_80", configs=[None, ((128, 64, 64), 8, 4, "wgmma")])
    with pytest.raises(kiln.CompileError, match="does not fit the wgmma attention: BQ must be a multiple of 64"):
        kiln.compile(source, target="sm_90a", configs=[((32, 64), 2, 2, "wgmma"), None])


def test_autotune_prepare_compiles_the_space(cache_dir):
    source = open(EXAMPLE).read()
    assert kiln.autotune(source, "sm_90a", prepare=True) is None
    kernels = json.loads(compiler.native().tunable_kernels(source, "sm_90a"))
    expected = sum(len(default_space(k["op"], k["config"])) for k in kernels)
    built = entries(cache_dir)
    assert 1 < len(built) <= expected + 1  # the default program, and the candidates that fit the kernels
    assert all(cache.lookup(entry.name) == entry for entry in built)


def test_python_assembler_and_a_gil_holding_thread_do_not_deadlock(tmp_path):
    """A Python assembler takes the GIL on the compile's threads, while another thread may hold the GIL and wait
    for the shared thread pool (a host program's ``ir`` does): the assembler stays off that pool, so both
    finish. Run in a subprocess with a time limit, so that a deadlock fails the test instead of hanging it."""
    ptxas = ptxas_or_skip()
    code = f"""
import sys, subprocess, tempfile, threading, pathlib
sys.path.insert(0, {str(BUILD_DIR / "python")!r})
import kiln
from kiln import compiler
def assemble(ptx):
    folder = pathlib.Path(tempfile.mkdtemp())
    (folder / "in.ptx").write_bytes(ptx)
    run = subprocess.run([{ptxas!r}, "-arch=sm_90a", "-v", str(folder / "in.ptx"), "-o", str(folder / "out.cubin")],
                         capture_output=True, text=True, check=True)
    return (folder / "out.cubin").read_bytes(), run.stdout + run.stderr
host = kiln.compile(open({EXAMPLE!r}).read().replace("gpu_attention_block", "block"), target="host")
done = []
def compile_gpu():
    for i in range(3):
        compiler.native().compile_gpu(open({EXAMPLE!r}).read(), "sm_90a", tempfile.mkdtemp(), assembler=assemble)
    done.append(True)
worker = threading.Thread(target=compile_gpu)
worker.start()
while worker.is_alive():
    host.ir("llvm")  # keeps the GIL while its passes run on the shared pool
worker.join()
print("ok" if done else "failed")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, KILN_CACHE_DIR=str(tmp_path)))
    assert result.stdout.strip().endswith("ok"), result.stderr[-2000:]
