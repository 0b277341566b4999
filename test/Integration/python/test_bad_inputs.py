"""Bad inputs across the tools and the Python API that no other test pins (docs/bad-inputs.md is the catalogue).

Each case checks that the error is clear and names the culprit (the file, argument, op, dtype or shape at fault),
with a non-zero exit or a Python exception, never a crash, a hang or a silent wrong answer. The tools run as
subprocesses with a time limit, so that a hang fails the test instead of stalling it. Ctrl-C is a SIGINT sent to
the process group, as a terminal sends it. Cases that still crash or mislead are marked xfail(strict=True) with
the place to fix them: once fixed they pass, and the strict mark fails the run until it is removed. Nothing here
needs a GPU: the no-driver and other-chip paths run against a missing libcuda or a stand-in device.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from numerics import BUILD_DIR, kiln
from kiln import compiler, runtime

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "gpu_attention_block.mlir")
LIMIT = 60  # seconds any tool may take here before the test counts it as a hang

#: Bytes no process can allocate: 2^48 (256 TiB) is beyond x86-64's 128 TiB of user address space, whatever the
#: machine's memory or overcommit setting, yet the byte count fits in int64, so only the allocation can fail.
HUGE = 2**46  # f32 elements


def tool(name):
    path = BUILD_DIR / "bin" / name
    if not path.exists():
        pytest.skip(f"no {name} at {path} (testing an installed package without a build tree)")
    return str(path)


def run(cmd, **kwargs):
    return subprocess.run([str(part) for part in cmd], capture_output=True, text=True, timeout=LIMIT, **kwargs)


def run_failing(cmd, *expected, **kwargs):
    """Runs ``cmd``, which must exit with a non-zero status (not die on a signal) and name each of ``expected``."""
    proc = run(cmd, **kwargs)
    assert proc.returncode > 0, f"exit status {proc.returncode} for {cmd}\nstderr:\n{proc.stderr[-3000:]}"
    assert "Stack dump" not in proc.stderr and "LLVM ERROR" not in proc.stderr, proc.stderr[-3000:]
    for text in expected:
        assert text in proc.stderr, f"stderr does not mention {text!r}:\n{proc.stderr[-3000:]}"
    return proc


def func(name, args, result, body):
    """A one-function module: ``args`` as [(name, type)], ``body`` the ops ending in %r of type ``result``."""
    params = ", ".join(f"%{n}: {t}" for n, t in args)
    lines = "".join(f"  {line}\n" for line in body)
    return f"func.func @{name}({params}) -> {result} {{\n{lines}  return %r : {result}\n}}\n"


MATMUL = func("mm", [("a", "tensor<4x8xf32>"), ("b", "tensor<8x16xf32>")], "tensor<4x16xf32>",
              ["%r = kiln.matmul %a, %b : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>"])


@pytest.fixture
def matmul_files(tmp_path):
    """A matmul module and valid inputs for kiln-run: (source, a.npy, b.npy)."""
    source, a, b = tmp_path / "mm.mlir", tmp_path / "a.npy", tmp_path / "b.npy"
    source.write_text(MATMUL)
    np.save(a, np.ones((4, 8), np.float32))
    np.save(b, np.ones((8, 16), np.float32))
    return source, a, b


def slow_ptxas(folder, quick_after_interrupt=True):
    """A ptxas on PATH that marks that it started and then sleeps, so that a compile is in its assembly while it
    runs; one started after the interrupt (``folder/interrupted`` exists) fails at once, as a real ptxas on a
    small kernel would end within a moment, unless ``quick_after_interrupt`` is False (a large kernel)."""
    folder.mkdir()
    mark = folder / "started"
    quick = f"[ -e {folder / 'interrupted'} ] && exit 1\n" if quick_after_interrupt else ""
    (folder / "ptxas").write_text(f"#!/bin/sh\n{quick}touch {mark}\nexec sleep 30\n")
    (folder / "ptxas").chmod(0o755)
    return dict(os.environ, PATH=f"{folder}{os.pathsep}{os.environ['PATH']}"), mark, folder / "interrupted"


def interrupt(proc, ready, before=None):
    """Waits until ``ready()`` holds, calls ``before()``, then sends SIGINT to the process group (as Ctrl-C does);
    returns the seconds until the process ended, its stdout and its stderr."""
    deadline = time.monotonic() + LIMIT
    while not ready():
        assert proc.poll() is None, f"ended before it was interrupted: {proc.communicate()}"
        assert time.monotonic() < deadline, "never got to the point where the test interrupts it"
        time.sleep(0.05)
    if before:
        before()
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("still running a minute after Ctrl-C") from None
    return time.monotonic() - sent, out, err


# --- kiln-run ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("array,message", [
    (np.ones((4, 8), np.int32), "input #0 of 'mm' must be tensor<4x8xf32>, got tensor<4x8xi32>"),
    (np.ones(32, np.float32), "input #0 of 'mm' must be tensor<4x8xf32>, got tensor<32xf32>"),
    (np.ones((0, 8), np.float32), "input #0 of 'mm' must be tensor<4x8xf32>, got tensor<0x8xf32>"),
    (np.ones((4, 8), ">f4"), "bad.npy: unsupported dtype '>f4'"),
    (np.array([[None] * 8] * 4, dtype=object), "bad.npy: unsupported dtype '|O'"),
], ids=["integer", "another rank", "zero-size", "big-endian", "object"])
def test_kiln_run_refuses_npy(matmul_files, tmp_path, array, message):
    """A .npy of the wrong dtype, rank or size, byte order, or a pickled object array (never unpickled)."""
    source, _, b = matmul_files
    bad = tmp_path / "bad.npy"
    np.save(bad, array, allow_pickle=True)
    run_failing([tool("kiln-run"), source, f"--input={bad}", f"--input={b}", f"--output={tmp_path / 'out.npy'}"],
                message)
    assert not (tmp_path / "out.npy").exists()


def test_kiln_run_zero_size_tensors(tmp_path):
    """A function over zero-size tensors runs and writes an empty result of the declared shape."""
    source = tmp_path / "empty.mlir"
    source.write_text(func("r", [("a", "tensor<0x8xf32>")], "tensor<0x8xf32>", ["%r = kiln.relu %a : tensor<0x8xf32>"]))
    x, out = tmp_path / "x.npy", tmp_path / "out.npy"
    np.save(x, np.ones((0, 8), np.float32))
    proc = run([tool("kiln-run"), source, f"--input={x}", f"--output={out}"])
    assert proc.returncode == 0, proc.stderr
    assert np.load(out).shape == (0, 8)


HUGE_RESULT = func("big", [("a", "tensor<1xf32>")], f"tensor<{HUGE}xf32>",
                   [f"%r = kiln.broadcast %a : tensor<1xf32> -> tensor<{HUGE}xf32>"])
HUGE_INTERMEDIATE = func("big", [("a", "tensor<1xf32>")], "tensor<f32>", [
    f"%y = kiln.broadcast %a : tensor<1xf32> -> tensor<{HUGE}xf32>",
    f"%z = kiln.exp %y : tensor<{HUGE}xf32>",
    f"%r = kiln.reduce sum %z axes [0] : tensor<{HUGE}xf32> -> tensor<f32>"])

@pytest.mark.parametrize("source,message", [
    (HUGE_RESULT, f"big.mlir:1:1: result #0 of 'big': the host cannot allocate tensor<{HUGE}xf32> (256.0 TiB)"),
    (HUGE_INTERMEDIATE, f"big.mlir:2:8: 'kiln.broadcast' op result #0: the host cannot allocate tensor<{HUGE}xf32> "
                        "(256.0 TiB)"),
], ids=["result", "intermediate"])
def test_kiln_run_buffer_larger_than_memory(tmp_path, source, message):
    """A result or intermediate larger than memory (its bytes fit in int64): an error naming the buffer, its op's
    location and its size (it was an abort in operator new for a result, SIGSEGV on the JIT code's unchecked
    malloc for an intermediate)."""
    path = tmp_path / "big.mlir"
    path.write_text(source)
    run_failing([tool("kiln-run"), path, "--random-inputs", "--seed=1"], message)


def test_kiln_run_interrupted(tmp_path):
    """Ctrl-C while kiln-run runs: it ends at once with a non-zero status and writes no output file."""
    n = 256
    source, out = tmp_path / "long.mlir", tmp_path / "out.npy"
    source.write_text(func("mm", [("a", f"tensor<{n}x{n}xf32>")], f"tensor<{n}x{n}xf32>",
                           [f"%r = kiln.matmul %a, %a : tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32> -> "
                            f"tensor<{n}x{n}xf32>"]))
    proc = subprocess.Popen([tool("kiln-run"), str(source), "--random-inputs", "--seed=1", "--time",
                             "--repeat=100000000", f"--output={out}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    started = time.monotonic()
    seconds, _, err = interrupt(proc, lambda: time.monotonic() - started > 1.0)
    assert proc.returncode != 0 and seconds < 5, (proc.returncode, seconds, err[-2000:])
    assert not out.exists()


# --- kilnc ------------------------------------------------------------------------------------------------------------

def interrupted_kilnc(tmp_path):
    env, started, interrupted = slow_ptxas(tmp_path / "bin")
    out = tmp_path / "out"
    proc = subprocess.Popen([tool("kilnc"), EXAMPLE, "--target=sm_90a", "-o", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seconds, _, err = interrupt(proc, started.exists, interrupted.touch)
    return proc.returncode, seconds, err, out


def test_kilnc_interrupted_ends_at_once(tmp_path):
    """Ctrl-C while kilnc assembles its kernels: it ends within seconds with a non-zero status."""
    status, seconds, err, _ = interrupted_kilnc(tmp_path)
    assert status != 0 and seconds < 5, (status, seconds, err[-2000:])


@pytest.mark.parametrize("earlier", [False, True], ids=["new folder", "over an earlier compile"])
def test_kilnc_interrupted_leaves_no_partial_folder(tmp_path, earlier):
    """Ctrl-C while kilnc assembles: no output folder, or the earlier compile's folder as it was, and no staging
    folder (it wrote its PTX into -o as it went, beside an earlier compile's manifest)."""
    out = tmp_path / "out"
    if earlier:
        run([tool("kilnc"), EXAMPLE, "--target=sm_80", "-o", out], env=dict(os.environ, PATH="/nonexistent"))
    before = {p.name: p.read_bytes() for p in out.iterdir()} if earlier else None
    status, _, err, _ = interrupted_kilnc(tmp_path)
    assert status != 0, err[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == (["bin", "out"] if earlier else ["bin"])
    assert not earlier or {p.name: p.read_bytes() for p in out.iterdir()} == before


# --- kiln-import ------------------------------------------------------------------------------------------------------

def onnx_model(path, op="Relu", opset=18, elem=None):
    """Saves a one-node model (x -> op -> y, float [2, 3] unless ``elem`` names another TensorProto type)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    elem = getattr(TensorProto, elem or "FLOAT")
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], name="n1")], "g",
                              [helper.make_tensor_value_info("x", elem, [2, 3])],
                              [helper.make_tensor_value_info("y", elem, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def kiln_import(*args):
    env = dict(os.environ, PYTHONPATH=str(BUILD_DIR / "python"))
    return run([sys.executable, "-m", "kiln.frontend.cli", *args], env=env)


@pytest.mark.parametrize("case", ["missing file", "directory", "unwritable output", "unsupported operator",
                                  "newer opset", "integer input", "unknown --weights"])
def test_kiln_import_refuses(tmp_path, case):
    model = tmp_path / "m.onnx"
    args, status, message = [str(model)], 1, None
    if case == "missing file":
        message = f"kiln-import: error: {model}: no such file"
    elif case == "directory":
        args, message = [str(tmp_path)], f"kiln-import: error: {tmp_path}: a directory, not an ONNX model file"
    elif case == "unwritable output":
        onnx_model(model)
        args += ["-o", str(tmp_path / "missing" / "out.mlir")]
        message = f"kiln-import: error: cannot write {tmp_path / 'missing' / 'out.mlir'}: No such file or directory"
    elif case == "unsupported operator":
        onnx_model(model, op="LSTM")
        message = "kiln-import: error: 1 unsupported operator(s): LSTM (node 'n1')"
    elif case == "newer opset":
        onnx_model(model, opset=30)
        message = "kiln-import: error: opset 30 is not supported (opsets 13-"
    elif case == "integer input":
        onnx_model(model, elem="INT32")
        message = "kiln-import: error: Relu node 'n1': input must be a float tensor, got i32"
    else:
        onnx_model(model)
        args, status = args + ["--weights=inline"], 2
        message = "argument --weights: invalid choice: 'inline'"
    proc = kiln_import(*args)
    assert proc.returncode == status and message in proc.stderr, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr


# --- Python API: host programs ----------------------------------------------------------------------------------------

MM = func("mm", [("a", "tensor<4x6xf32>"), ("b", "tensor<6x5xf32>")], "tensor<4x5xf32>",
          ["%r = kiln.matmul %a, %b : tensor<4x6xf32>, tensor<6x5xf32> -> tensor<4x5xf32>"])
B = np.linspace(-1, 1, 30, dtype=np.float32).reshape(6, 5)


@pytest.mark.parametrize("view", ["offset and step", "reversed", "broadcast (stride 0)"])
def test_views_give_the_right_answer(view):
    """Arrays that are views at an offset, with steps, negative or zero strides, are read as numpy reads them."""
    base = np.arange(128, dtype=np.float32).reshape(8, 16) / 10
    a = {"offset and step": base[1::2, 3::2][:, :6], "reversed": base[:4, :6][::-1, ::-1],
         "broadcast (stride 0)": np.broadcast_to(base[0, :6], (4, 6))}[view]
    assert not a.flags.c_contiguous
    np.testing.assert_allclose(kiln.compile(MM)(a, B), a.astype(np.float64) @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("array,error,message", [
    (np.ones((4, 6), ">f4"), TypeError, "argument 0 of 'mm' has dtype >f4, expected float32"),
    (np.ones((4, 6), np.int32), TypeError, "argument 0 of 'mm' has dtype int32, expected float32"),
    (np.float32(1.0), TypeError, "argument 0 of 'mm' must be a numpy array, got float32"),
    (np.ones((0, 6), np.float32), ValueError, "argument 0 of 'mm' has shape (0, 6), expected (4, 6)"),
], ids=["big-endian", "integer", "numpy scalar", "zero-size"])
def test_bad_host_argument(array, error, message):
    with pytest.raises(error) as raised:
        kiln.compile(MM)(array, B)
    assert message in str(raised.value)


def test_integer_tensors_to_a_float_op():
    with pytest.raises(kiln.CompileError, match=r"<kiln source>:2:\d+: error: 'kiln.matmul' op operand #0 must be "
                                                r".* but got 'tensor<4x6xi32>'"):
        kiln.compile(MM.replace("xf32>", "xi32>"))


def test_zero_size_dimensions():
    """An empty M gives an empty result; an empty K gives zeros (an empty sum), as numpy does."""
    empty_m = kiln.compile(MM.replace("4x", "0x"))(np.ones((0, 6), np.float32), B)
    assert empty_m.shape == (0, 5)
    empty_k = func("mm", [("a", "tensor<4x0xf32>"), ("b", "tensor<0x5xf32>")], "tensor<4x5xf32>",
                   ["%r = kiln.matmul %a, %b : tensor<4x0xf32>, tensor<0x5xf32> -> tensor<4x5xf32>"])
    np.testing.assert_array_equal(kiln.compile(empty_k)(np.ones((4, 0), np.float32), np.ones((0, 5), np.float32)),
                                  np.zeros((4, 5), np.float32))
    np.testing.assert_array_equal(kiln.ops.matmul(np.ones((4, 0), np.float32), np.ones((0, 5), np.float32)),
                                  np.zeros((4, 5), np.float32))


def test_attention_without_keys():
    q, kv = np.ones((1, 2, 4, 8), np.float32), np.ones((1, 2, 0, 8), np.float32)
    with pytest.raises(ValueError, match=r"attention: 'k' has sequence length 0 \(dim 2, shape \(1, 2, 0, 8\)\)"):
        kiln.ops.attention(q, kv, kv)


def test_attention_without_keys_in_ir():
    """The same in kiln IR: the verifier names the attention, not the softmax of its decomposition."""
    t, kv = "tensor<1x2x4x8xf32>", "tensor<1x2x0x8xf32>"
    source = func("att", [("q", t), ("k", kv)], t, [f"%r = kiln.attention %q, %k, %k : {t}, {kv}, {kv} -> {t}"])
    with pytest.raises(kiln.CompileError, match=r"'kiln.attention' op sequence length of 'k' \(dimension 2\) is 0"):
        kiln.compile(source)


@pytest.mark.parametrize("op", ["reduce sum %a axes [1]", "logsumexp %a axis 1"])
def test_reduction_over_an_empty_axis(op):
    """A reduction over a size-0 axis is refused by the verifier, naming the op and the axis (it used to fail in
    tiling on an internal tensor.extract_slice)."""
    source = func("r", [("a", "tensor<3x0xf32>")], "tensor<3xf32>",
                  [f"%r = kiln.{op} : tensor<3x0xf32> -> tensor<3xf32>"])
    name = op.split()[0]
    with pytest.raises(kiln.CompileError, match=rf"'kiln.{name}' op axis 1 of the input has size 0; "
                                                rf"\w+ needs at least one element to reduce over"):
        kiln.compile(source)


def test_result_larger_than_memory():
    """A result no host can hold is a MemoryError naming it and its size."""
    with pytest.raises(MemoryError, match=rf"<kiln source>:1:1: result #0 of 'big': the host cannot allocate "
                                          rf"tensor<{HUGE}xf32> \(256.0 TiB\)"):
        kiln.compile(HUGE_RESULT)(np.ones(1, np.float32))


def test_intermediate_larger_than_memory(tmp_path):
    """An intermediate no host can hold is a MemoryError naming its op and size (it was SIGSEGV), and the process
    goes on: the program runs again on another call. In a child process, so that a crash fails only this test."""
    (tmp_path / "big.mlir").write_text(HUGE_INTERMEDIATE)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import numpy as np, kiln\n"
            "program = kiln.compile(open(sys.argv[2]).read())\n"
            "for attempt in range(2):\n"
            "    try:\n        program(np.ones(1, np.float32))\n"
            "    except MemoryError as error:\n        print(error)\n")
    proc = run([sys.executable, "-c", code, BUILD_DIR / "python", tmp_path / "big.mlir"])
    message = (f"<kiln source>:2:8: 'kiln.broadcast' op result #0: the host cannot allocate tensor<{HUGE}xf32> "
               "(256.0 TiB)")
    assert proc.returncode == 0 and proc.stdout.splitlines() == [message] * 2, \
        (proc.returncode, proc.stdout, proc.stderr[-2000:])


def test_host_run_interrupted():
    """Ctrl-C while a host program runs: KeyboardInterrupt once the running call returns (the native run is not
    interruptible), and a non-zero exit."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import numpy as np, kiln\n"
            "n = 384\n"
            "t = f'tensor<{n}x{n}xf32>'\n"
            "p = kiln.compile(f'func.func @mm(%a: {t}) -> {t} {{\\n  %r = kiln.matmul %a, %a : {t}, {t} -> {t}\\n"
            "  return %r : {t}\\n}}\\n')\n"
            "a = np.ones((n, n), np.float32)\n"
            "p(a)\n"
            "print('running', flush=True)\n"
            "while True:\n    p(a)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(BUILD_DIR / "python")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout.readline().strip() == "running", proc.communicate()
    seconds, _, err = interrupt(proc, lambda: True)
    assert proc.returncode != 0 and err.rstrip().endswith("KeyboardInterrupt"), (proc.returncode, err[-2000:])
    assert seconds < 30


# --- Python API: GPU programs -----------------------------------------------------------------------------------------

def test_gpu_compile_interrupted_leaves_no_cache_entry(tmp_path):
    """Ctrl-C while kiln.compile assembles a GPU program (ptxas killed with it): KeyboardInterrupt within seconds,
    and nothing of the entry stays in the cache (the interrupt often fired inside the removal of the staging
    folder, which stayed for an hour)."""
    env, started, interrupted = slow_ptxas(tmp_path / "bin")
    cache = tmp_path / "cache"
    env["KILN_CACHE_DIR"] = str(cache)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import kiln\n"
            "from kiln import compiler\n"
            "compiler.driver_assembler = lambda target: None  # ptxas (the slow stand-in) assembles, GPU or not\n"
            "kiln.compile(open(sys.argv[2]).read(), target='sm_90a')\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(BUILD_DIR / "python"), EXAMPLE], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    seconds, _, err = interrupt(proc, started.exists, interrupted.touch)
    assert proc.returncode != 0 and err.rstrip().endswith("KeyboardInterrupt"), (proc.returncode, err[-2000:])
    assert seconds < 5
    assert not [p for p in cache.rglob("*") if p.is_file() or p.name.startswith(".")], \
        sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))


def test_gpu_compile_interrupted_starts_no_more_assemblers(tmp_path):
    """Ctrl-C while ptxas assembles one of many kernels: the compile starts no ptxas for the kernels left (each
    would run to its end before the KeyboardInterrupt), so it ends within seconds whatever the kernels' size."""
    env, started, interrupted = slow_ptxas(tmp_path / "bin", quick_after_interrupt=False)
    env["KILN_CACHE_DIR"] = str(tmp_path / "cache")
    t = "tensor<64x64xbf16>"
    source = "".join(func(op, [("a", t)], t, [f"%r = kiln.{op} %a : {t}"])
                     for op in ["exp", "neg", "abs", "tanh", "sigmoid", "relu", "silu", "sqrt"])
    (tmp_path / "many.mlir").write_text(source)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import kiln\n"
            "from kiln import compiler\n"
            "compiler.driver_assembler = lambda target: None  # ptxas (the slow stand-in) assembles, GPU or not\n"
            "kiln.compile(open(sys.argv[2]).read(), target='sm_90a')\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(BUILD_DIR / "python"), str(tmp_path / "many.mlir")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seconds, _, err = interrupt(proc, started.exists, interrupted.touch)
    assert proc.returncode != 0 and err.rstrip().endswith("KeyboardInterrupt"), (proc.returncode, err[-2000:])
    assert seconds < 10, (seconds, err[-2000:])


@pytest.mark.parametrize("case", ["zero-size", "grid too large"])
def test_gpu_compile_refuses_what_no_launch_runs(tmp_path, monkeypatch, case):
    """A zero-size tensor or one too large for a grid, for a GPU target: a CompileError naming the tensor or the
    kernel at compile time (no GPU needed), not a launch the driver refuses; nothing stays in the cache."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    if case == "zero-size":
        t = "tensor<0x8xbf16>"
        source = func("zero", [("a", t)], t, [f"%r = kiln.add %a, %a : {t}, {t} -> {t}"])
        message = rf"argument #0 of @zero has zero-size type '{t}'; the GPU targets take no zero-size tensors"
    else:
        t = "tensor<1099511627775xbf16>"  # not whole 16-byte runs: an element a thread, 2^32 blocks
        source = func("big", [("a", "tensor<1xbf16>")], t, [f"%r = kiln.broadcast %a : tensor<1xbf16> -> {t}"])
        message = r"kernel 'big_k0_broadcast' \(kiln.broadcast\) needs a grid of \[4294967296, 1, 1\] blocks"
    compiler._compile_cached.cache_clear()
    with pytest.raises(kiln.CompileError, match=message):
        kiln.compile(source, target="sm_90a")
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], sorted(map(str, tmp_path.rglob("*")))


def test_gpu_append_reading_the_old_cache_is_refused(tmp_path, monkeypatch):
    """A jitted decode step that attends over the old v cache after appending to it: value semantics allow it and
    the host runs it, but the GPU writes the caches in place, so compiling it for sm_90a is a CompileError naming
    the cache (no GPU needed), not a silently wrong attention."""
    import ml_dtypes
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))

    @kiln.jit
    def stale_step(q, k, v, k_cache, v_cache, table, positions, lens):
        k_new, v_new = kiln.append_kv(k_cache, v_cache, k, v, table, positions)
        return kiln.paged_attention(q, k_new, v_cache, table, lens), k_new

    bf16 = ml_dtypes.bfloat16
    arrays = (np.zeros((2, 4, 1, 64), bf16), np.zeros((2, 2, 1, 64), bf16), np.zeros((2, 2, 1, 64), bf16),
              np.zeros((8, 16, 2, 64), bf16), np.zeros((8, 16, 2, 64), bf16), np.zeros((2, 4), np.int32),
              np.zeros(2, np.int32), np.ones(2, np.int32))
    compiler._compile_cached.cache_clear()
    with pytest.raises(kiln.CompileError, match=r"kiln.append_kv on the GPU writes its caches in place, but the old "
                                                r"'v_cache' is used after the append"):
        kiln.compile(stale_step.source(*arrays), target="sm_90a")


def test_cache_disk_full_when_sealing(tmp_path, monkeypatch):
    """A cache whose disk fills up just as an entry is sealed (its files fit, checksums.json does not; a kernel
    that shrank made kiln.compile reach this): an OSError naming the file, and nothing left in the cache."""
    from kiln import cache
    root = tmp_path / "full"
    root.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(root)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount here: {mounted.stderr.strip()}")
    try:
        monkeypatch.setenv("KILN_CACHE_DIR", str(root))

        def build(folder):  # two pages: the 8 KiB file system is full
            for name in ("kernel.ptx", "kernel.cubin"):
                with open(os.path.join(folder, name), "wb") as out:
                    out.write(b"x" * 4096)

        with pytest.raises(OSError, match=r"cannot write \S+checksums\.json: No space left on device"):
            cache.store("0" * 64, build)
        assert not list(root.iterdir())
    finally:
        subprocess.run(["umount", str(root)], check=True)


@pytest.fixture(scope="module")
def gpu_folders(tmp_path_factory):
    """A small bf16 matmul compiled for sm_80 and for sm_90a (no GPU needed), once: {target: folder}."""
    source = func("mm", [("a", "tensor<32x64xbf16>"), ("b", "tensor<64x48xbf16>")], "tensor<32x48xbf16>",
                  ["%r = kiln.matmul %a, %b : tensor<32x64xbf16>, tensor<64x48xbf16> -> tensor<32x48xbf16>"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KILN_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        patch.setattr(compiler, "driver_assembler", lambda target: None)
        compiler._compile_cached.cache_clear()
        try:
            yield {target: kiln.compile(source, target=target).folder for target in ("sm_80", "sm_90a")}
        finally:
            compiler._compile_cached.cache_clear()


class StandInGpu:
    """runtime.Device's face for a GPU of ``capability``: a program refused by chip never gets further."""

    def __init__(self, capability):
        self.capability = capability

    @property
    def handle(self):
        raise AssertionError("loaded a program that should have been refused")


TORCH = types.SimpleNamespace(device=lambda kind, index: (kind, index))  # all GpuProgram._load asks of torch


@pytest.mark.parametrize("target,capability,message", [
    ("sm_90a", (8, 0), "this program is compiled for sm_90a (compute capability 9.0); the GPU has 8.0"),
    ("sm_90a", (10, 0), "this program is compiled for sm_90a (compute capability 9.0); the GPU has 10.0"),
    ("sm_80", (7, 5), "this program is compiled for sm_80; the GPU's compute capability 7.5 is older"),
])
def test_program_for_another_chip(gpu_folders, monkeypatch, target, capability, message):
    """A program (its cubins) compiled for another chip is refused by name before anything is loaded."""
    monkeypatch.setattr(runtime, "device", lambda ordinal=0: StandInGpu(capability))
    with pytest.raises(RuntimeError) as raised:
        kiln.load(gpu_folders[target])._load(TORCH, 0)
    assert str(raised.value) == message


@pytest.mark.parametrize("edit,message", [
    (lambda m: dict(m, target="sm_100"), "target 'sm_100' is not one of sm_80, sm_90a"),
    (lambda m: json.dumps(m)[:200], "not JSON"),
    (lambda m: [m], "not a JSON object"),
    (lambda m: dict(m, kernels=[dict(m["kernels"][0], dependent_launch="yes")] + m["kernels"][1:]),
     "kernel '.*': 'dependent_launch' is not true or false"),
], ids=["newer target", "truncated", "not an object", "dependent launch not a boolean"])
def test_manifest_this_build_cannot_run(gpu_folders, tmp_path, edit, message):
    """A manifest from another compiler build (a target this one lacks) or a damaged one: a ManifestError naming
    the file and what is wrong."""
    folder = tmp_path / "program"
    folder.mkdir()
    for path in gpu_folders["sm_90a"].iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    edited = edit(json.loads((folder / "manifest.json").read_text()))
    (folder / "manifest.json").write_text(edited if isinstance(edited, str) else json.dumps(edited))
    with pytest.raises(kiln.gpu.ManifestError) as raised:
        kiln.load(folder)
    assert re.match(re.escape(f"{folder / 'manifest.json'}: ") + message, str(raised.value)), raised.value


def test_no_cuda_driver(gpu_folders):
    """Without a CUDA driver the runtime, and a program's first run, say so and name the library they looked for."""
    code = ("import sys, types; sys.path.insert(0, sys.argv[1]); import kiln\n"
            "from kiln import runtime\n"
            "for what, call in [('device', lambda: runtime.device(0)),\n"
            "                   ('program', lambda: kiln.load(sys.argv[2])._load(\n"
            "                       types.SimpleNamespace(device=lambda kind, index: None), 0))]:\n"
            "    try:\n        call()\n"
            "    except RuntimeError as error:\n        print(what, error)\n")
    env = dict(os.environ, KILN_LIBCUDA="/nonexistent/libcuda.so.1")
    proc = run([sys.executable, "-c", code, BUILD_DIR / "python", gpu_folders["sm_90a"]], env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["device", "program"], proc.stdout
    for line in lines:
        assert "opening GPU 0: no CUDA driver: cannot load /nonexistent/libcuda.so.1" in line, line
