"""The _kiln_launch module on the CPU: a launch reaches the runtime's launch function with exactly its arguments.

Why here: the GPU suite shows launches work end to end, but not what a launch passes. Here the launcher calls a
stand-in for kiln_kernel_launch (a ctypes callback) that records the kernel handle, grid, block, shared memory,
stream and each device address it was given, and can fail like the runtime does; bad calls must raise before
anything is launched.
"""

import ctypes
import ctypes.util
import threading
import time

import pytest

from numerics import kiln  # noqa: F401 (puts the built package on the path)
from kiln import _kiln_launch as native  # every build makes it: a failure to import is a failure here
from kiln import runtime

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint),
                          ctypes.c_uint, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
LAST_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p)
ERROR_TEXT = ctypes.create_string_buffer(b"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources requested)")


class FakeRuntime:
    """kiln_kernel_launch and kiln_last_error stand-ins; each launch is recorded with the values its argument
    pointers point at."""

    def __init__(self, status=0):
        self.calls, self.status = [], status

        def launch(kernel, grid, block, shared, stream, args):
            count = self.expected_count
            addresses = [ctypes.cast(args[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(count)]
            self.calls.append((kernel, tuple(grid[:3]), tuple(block[:3]), shared, stream, addresses))
            return self.status

        self.launch, self.last_error = LAUNCH(launch), LAST_ERROR(lambda: ctypes.addressof(ERROR_TEXT))
        self.expected_count = 0

    def launcher(self, kernel=0x1234, grid=(3, 2, 1), block=(128, 1, 1), shared=0, count=3):
        self.expected_count = count
        return native.Launcher(address(self.launch), address(self.last_error), kernel, grid, block, shared, count)


def address(function):
    return ctypes.cast(function, ctypes.c_void_p).value


def test_a_launch_passes_its_arguments_through():
    fake = FakeRuntime()
    launch = fake.launcher(grid=(7, 5, 3), block=(256, 1, 1), shared=70000, count=3)
    launch([0x7F0000001000, 0x7F0000002000, 2**64 - 1], 0xABCDEF)
    launch((1, 2, 3), None)  # a tuple of addresses; None is the default stream
    first = [0x7F0000001000, 0x7F0000002000, 2**64 - 1]
    assert fake.calls == [(0x1234, (7, 5, 3), (256, 1, 1), 70000, 0xABCDEF, first),
                          (0x1234, (7, 5, 3), (256, 1, 1), 70000, None, [1, 2, 3])]


def test_a_kernel_with_more_parameters_than_the_stack_block():
    fake = FakeRuntime()
    launch = fake.launcher(count=40)
    launch(list(range(100, 140)), 0)
    assert fake.calls[0][5] == list(range(100, 140))


def test_bad_calls_raise_before_launching():
    fake = FakeRuntime()
    launch = fake.launcher(count=2)
    with pytest.raises(TypeError, match="the kernel takes 2 device addresses, got 3"):
        launch([1, 2, 3], 0)
    with pytest.raises(TypeError, match="list of device addresses"):
        launch(5, 0)
    with pytest.raises(TypeError):
        launch([1, "not an address"], 0)
    with pytest.raises(OverflowError):
        launch([1, -1], 0)
    with pytest.raises(TypeError):
        launch([1, 2], "stream")
    with pytest.raises(TypeError, match="no keywords"):
        launch([1, 2], stream=0)
    with pytest.raises(TypeError):
        launch([1, 2])
    assert fake.calls == []


def test_bad_launchers_are_refused():
    fake = FakeRuntime()
    with pytest.raises(ValueError, match="non-null"):
        fake.launcher(kernel=0)
    for bad, message in ((dict(count=-1), "argument count must be an int"),
                         (dict(grid=(1, 1)), "grid must have three dimensions"),
                         (dict(grid=(-1, 1, 1)), "grid must be an int"),
                         (dict(block=(2**32 + 5, 1, 1)), "block must be at most 4294967295"),
                         (dict(shared=-1), "dynamic shared memory must be an int"),
                         (dict(shared=2**31), "dynamic shared memory must be at most"),
                         (dict(kernel=-1), "kernel must be an int"),
                         (dict(grid=5), "sequences of three ints")):
        with pytest.raises((ValueError, TypeError), match=message):
            fake.launcher(**bad)
    with pytest.raises(RuntimeError, match="not initialised"):
        native.Launcher.__new__(native.Launcher)([], 0)
    assert fake.calls == []


def test_a_launcher_is_set_up_once():
    """A second __init__, good or bad, changes nothing: the launcher keeps launching what it was made for."""
    fake = FakeRuntime()
    launch = fake.launcher(grid=(2, 1, 1), count=1)
    for arguments in ((0, 0, 0, (9, 9, 9), (1024, 1, 1), 99999, 1),
                      (address(fake.launch), address(fake.last_error), 0x99, (9, 9, 9), (64, 1, 1), 0, 1)):
        with pytest.raises(TypeError, match="already initialised"):
            launch.__init__(*arguments)
    launch([7], 0)
    assert fake.calls == [(0x1234, (2, 1, 1), (128, 1, 1), 0, None, [7])]


def test_the_launch_runs_without_the_gil():
    """Another Python thread runs while a launch waits in the runtime (here libc's usleep stands in for the
    launch function: its first argument, the kernel handle, is the microseconds to sleep)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    fake = FakeRuntime()
    sleeping = native.Launcher(address(libc.usleep), address(fake.last_error), 200_000, (1, 1, 1), (1, 1, 1), 0, 0)
    stamps, stop = [], threading.Event()

    def count():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            for _ in range(1000):
                pass

    counter = threading.Thread(target=count)
    counter.start()
    while not stamps:
        time.sleep(0.001)
    start = time.perf_counter()
    sleeping([], 0)
    end = time.perf_counter()
    stop.set()
    counter.join()
    middle = [t for t in stamps if start + 0.05 < t < end - 0.05]
    assert end - start >= 0.19 and middle, "no other thread ran in the middle of the launch: it held the GIL"


def test_a_failed_launch_raises_the_runtime_message():
    fake = FakeRuntime(status=2)
    with pytest.raises(RuntimeError, match=r"kiln_kernel_launch: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES \(too many"):
        fake.launcher(count=1)([42], 0)
    assert len(fake.calls) == 1


def test_threads_launch_with_their_own_addresses():
    fake = FakeRuntime()
    launch = fake.launcher(count=4)

    def work(thread):
        for call in range(300):
            base = (thread << 32) | (call << 8)
            launch([base, base + 1, base + 2, base + 3], thread)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake.calls) == 1200
    for _, _, _, _, stream, addresses in fake.calls:
        assert addresses[0] >> 32 == stream and addresses == [addresses[0] + i for i in range(4)]


def test_the_runtime_launcher_is_the_native_one():
    """runtime.launcher hands the runtime's own kiln_kernel_launch and kiln_last_error to the native launcher:
    a zero grid dimension comes back with the runtime's message (it checks the grid before the kernel)."""
    class Kernel:
        value = 0x5678

    shape = {"grid": [0, 1, 1], "block": [32, 1, 1], "dynamic_shared_bytes": 0}
    launch = runtime.launcher(Kernel(), shape, 2)
    assert isinstance(launch, native.Launcher)
    with pytest.raises(TypeError, match="takes 2 device addresses, got 1"):
        launch([1], 0)
    with pytest.raises(RuntimeError, match="kiln_kernel_launch: .*grid and block dimensions must be positive"):
        launch([1, 2], 0)


def test_tensor_map_specs_from_the_manifest():
    """A manifest's tensor map becomes the runtime's kiln_tensor_map_spec field by field; a dtype or rank the
    runtime cannot describe raises before any call into it."""
    spec = runtime.TensorMapSpec.of({"buffer": 1, "dtype": "bf16", "dims": [520, 257, 3], "strides": [1040, 267280],
                                     "box": [64, 128, 1], "swizzle": 128})
    assert (spec.buffer, spec.dtype, spec.rank, spec.swizzle_bytes) == (1, 1, 3, 128)
    assert list(spec.dims) == [520, 257, 3, 0, 0] and list(spec.strides) == [1040, 267280, 0, 0]
    assert list(spec.box) == [64, 128, 1, 0, 0]
    with pytest.raises(ValueError, match="dtype must be f16 or bf16"):
        runtime.TensorMapSpec.of({"buffer": 0, "dtype": "f32", "dims": [8], "strides": [], "box": [8], "swizzle": 0})
    with pytest.raises(ValueError, match="with 1 to 5 dims"):
        runtime.TensorMapSpec.of({"buffer": 0, "dtype": "f16", "dims": [8] * 6, "strides": [16] * 5, "box": [8] * 6,
                                  "swizzle": 0})
