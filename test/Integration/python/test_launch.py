"""The _kiln_launch module on the CPU: a plan run reaches the runtime's run function with exactly its arguments.

Why here: the GPU suite shows runs work end to end, but not what a run passes. Here the runner calls a stand-in for
kiln_plan_run_with_buffers (a ctypes callback) that records the plan handle, stream and each input and buffer
address it was given, and can fail like the runtime does; bad calls must raise before anything runs. The last
tests run the real runtime's function, through the native runner and through ctypes, on a plan read without a GPU.
"""

import ctypes
import ctypes.util
import threading
import time

import pytest

from numerics import kiln  # noqa: F401 (puts the built package on the path)
from kiln import _kiln_launch as native  # every build makes it: a failure to import is a failure here
from kiln import runtime

RUN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                       ctypes.POINTER(ctypes.c_uint64), ctypes.c_void_p)
LAST_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p)
ERROR_TEXT = ctypes.create_string_buffer(b"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources requested)")

SOURCE = """func.func @mm(%a: tensor<40x64xbf16>, %b: tensor<64x72xbf16>) -> tensor<40x72xbf16> {
  %c = kiln.matmul %a, %b : tensor<40x64xbf16>, tensor<64x72xbf16> -> tensor<40x72xbf16>
  return %c : tensor<40x72xbf16>
}
"""


class FakeRuntime:
    """kiln_plan_run_with_buffers and kiln_last_error stand-ins; each run is recorded with the addresses its two
    arrays hold."""

    def __init__(self, status=0):
        self.calls, self.status, self.counts = [], status, (0, 0)

        def run(plan, inputs, buffers, stream):
            self.calls.append((plan, stream, inputs[:self.counts[0]], buffers[:self.counts[1]]))
            return self.status

        self.run, self.last_error = RUN(run), LAST_ERROR(lambda: ctypes.addressof(ERROR_TEXT))

    def runner(self, plan=0x1234, inputs=2, buffers=1):
        self.counts = (inputs, buffers)
        return native.PlanRunner(address(self.run), address(self.last_error), plan, inputs, buffers)


def address(function):
    return ctypes.cast(function, ctypes.c_void_p).value


def test_a_run_passes_its_arguments_through():
    fake = FakeRuntime()
    run = fake.runner(inputs=2, buffers=1)
    run([0x7F0000001000, 2**64 - 1], [0x7F0000002000], 0xABCDEF)
    run((1, 2), (3,), None)  # tuples of addresses; None is the default stream
    assert fake.calls == [(0x1234, 0xABCDEF, [0x7F0000001000, 2**64 - 1], [0x7F0000002000]),
                          (0x1234, None, [1, 2], [3])]


def test_a_plan_with_more_addresses_than_the_stack_block():
    fake = FakeRuntime()
    run = fake.runner(inputs=40, buffers=50)
    run(list(range(100, 140)), list(range(200, 250)), 0)
    assert fake.calls[0][2:] == (list(range(100, 140)), list(range(200, 250)))


def test_bad_calls_raise_before_running():
    fake = FakeRuntime()
    run = fake.runner(inputs=2, buffers=1)
    with pytest.raises(TypeError, match="the plan takes 2 input addresses, got 3"):
        run([1, 2, 3], [4], 0)
    with pytest.raises(TypeError, match="the plan takes 1 buffer addresses, got 0"):
        run([1, 2], [], 0)
    with pytest.raises(TypeError, match="list of input addresses"):
        run(5, [4], 0)
    with pytest.raises(TypeError, match="list of buffer addresses"):
        run([1, 2], 4, 0)
    with pytest.raises(TypeError):
        run([1, "not an address"], [4], 0)
    with pytest.raises(OverflowError):
        run([1, 2], [-1], 0)
    with pytest.raises(TypeError):
        run([1, 2], [4], "stream")
    with pytest.raises(TypeError, match="no keywords"):
        run([1, 2], [4], stream=0)
    with pytest.raises(TypeError):
        run([1, 2], [4])
    assert fake.calls == []


def test_bad_runners_are_refused():
    fake = FakeRuntime()
    with pytest.raises(ValueError, match="non-null"):
        fake.runner(plan=0)
    for bad, message in ((dict(inputs=-1), "input count must be an int"),
                         (dict(buffers=2**21), "buffer count must be at most"),
                         (dict(plan=-1), "plan must be an int")):
        with pytest.raises((ValueError, TypeError), match=message):
            fake.runner(**bad)
    with pytest.raises(RuntimeError, match="not initialised"):
        native.PlanRunner.__new__(native.PlanRunner)([], [], 0)
    assert fake.calls == []


def test_a_runner_is_set_up_once():
    """A second __init__, good or bad, changes nothing: the runner keeps running what it was made for."""
    fake = FakeRuntime()
    run = fake.runner(inputs=1, buffers=0)
    for arguments in ((0, 0, 0, 9, 9), (address(fake.run), address(fake.last_error), 0x99, 3, 3)):
        with pytest.raises(TypeError, match="already initialised"):
            run.__init__(*arguments)
    run([7], [], 0)
    assert fake.calls == [(0x1234, None, [7], [])]


def test_the_run_runs_without_the_gil():
    """Another Python thread runs while a run waits in the runtime (here libc's usleep stands in for the run
    function: its first argument, the plan handle, is the microseconds to sleep)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    fake = FakeRuntime()
    sleeping = native.PlanRunner(address(libc.usleep), address(fake.last_error), 200_000, 0, 0)
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
    sleeping([], [], 0)
    end = time.perf_counter()
    stop.set()
    counter.join()
    middle = [t for t in stamps if start + 0.05 < t < end - 0.05]
    assert end - start >= 0.19 and middle, "no other thread ran in the middle of the run: it held the GIL"


def test_a_failed_run_raises_the_runtime_message():
    fake = FakeRuntime(status=3)
    with pytest.raises(RuntimeError, match=r"running the plan: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES \(too many"):
        fake.runner(inputs=1, buffers=0)([42], [], 0)
    assert len(fake.calls) == 1


def test_threads_run_with_their_own_addresses():
    fake = FakeRuntime()
    run = fake.runner(inputs=3, buffers=1)

    def work(thread):
        for call in range(300):
            base = (thread << 32) | (call << 8)
            run([base, base + 1, base + 2], [base + 3], thread)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake.calls) == 1200
    for _, stream, inputs, buffers in fake.calls:
        assert inputs[0] >> 32 == stream and inputs + buffers == [inputs[0] + i for i in range(4)]


@pytest.fixture(scope="module")
def read_plan(tmp_path_factory):
    """The runtime's reading of a compiled sm_90a matmul (no GPU needed to read it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KILN_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield runtime.Plan(kiln.compile(SOURCE, target="sm_90a").folder)


def test_the_runtime_reads_the_plan(read_plan):
    """What the runtime reads of the folder: target, entry, inputs, outputs, and the output's own buffer."""
    assert (read_plan.target, read_plan.function) == ("sm_90a", "mm")
    assert read_plan.inputs == [("bf16", (40, 64)), ("bf16", (64, 72))]
    assert read_plan.outputs == [("bf16", (40, 72))] and read_plan.in_place == []
    assert read_plan.buffer_bytes == [40 * 72 * 2] and read_plan.output_sources == [("buffer", 0)]
    with pytest.raises(RuntimeError, match="compiled for sm_90a .*the GPU has 8.0"):
        read_plan.check_chip((8, 0))
    read_plan.check_chip((9, 0))


@pytest.mark.parametrize("through", ["native", "ctypes"])
def test_a_plan_read_without_a_gpu_is_not_run(read_plan, through):
    """The runner reaches the runtime's own kiln_plan_run_with_buffers, which refuses a plan that was only read
    (kiln_plan_read), with the runtime's message, through the native runner and through ctypes alike."""
    run = read_plan.runner() if through == "native" else runtime._CtypesRunner(read_plan)
    assert isinstance(run, native.PlanRunner) == (through == "native")
    with pytest.raises(RuntimeError, match="was read without a GPU"):
        run([1, 2], [3], 0)
    with pytest.raises(TypeError, match="takes 2 input"):
        run([1], [3], 0)


ALIASING_SOURCE = """func.func @both(%a: tensor<4x8xbf16>) -> (tensor<32xbf16>, tensor<4x8xbf16>, tensor<32xbf16>) {
  %r = kiln.reshape %a : tensor<4x8xbf16> -> tensor<32xbf16>
  %m = kiln.mul %a, %a : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %r, %m, %r : tensor<32xbf16>, tensor<4x8xbf16>, tensor<32xbf16>
}
"""


def test_an_output_that_views_an_argument_gets_a_buffer_of_its_own(tmp_path, monkeypatch):
    """The runtime gives an output that is a view of an argument a scratch buffer of its own (copied into at
    the end of a run), once however often it is returned, so that no result aliases what the caller passed."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    plan = runtime.Plan(kiln.compile(ALIASING_SOURCE, target="sm_90a").folder)
    assert plan.outputs == [("bf16", (32,)), ("bf16", (4, 8)), ("bf16", (32,))]
    (copy_kind, copy), (product_kind, product), repeated = plan.output_sources
    assert copy_kind == product_kind == "buffer" and copy != product and repeated == ("buffer", copy)
    assert plan.buffer_bytes[copy] == plan.buffer_bytes[product] == 64


SLICING_SOURCE = """func.func @rows(%a: tensor<8x16xbf16>) -> (tensor<2x16xbf16>, tensor<4x16xbf16>) {
  %top = kiln.slice %a offsets [2, 0] strides [1, 1] : tensor<8x16xbf16> -> tensor<2x16xbf16>
  %m = kiln.mul %a, %a : tensor<8x16xbf16>, tensor<8x16xbf16> -> tensor<8x16xbf16>
  %low = kiln.slice %m offsets [4, 0] strides [1, 1] : tensor<8x16xbf16> -> tensor<4x16xbf16>
  return %top, %low : tensor<2x16xbf16>, tensor<4x16xbf16>
}
"""


def test_an_output_that_is_part_of_a_buffer_gets_a_buffer_of_its_own(tmp_path, monkeypatch):
    """Contiguous slices are views from a byte offset (no kernel); an output that is one, of an argument or of a
    kernel's result, is copied into a buffer of its own size, which is what a caller is handed."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    program = kiln.compile(SLICING_SOURCE, target="sm_90a")
    assert [k["name"] for k in program.kernels] == ["rows_k0_mul"]
    plan = runtime.Plan(program.folder)
    (top_kind, top), (low_kind, low) = plan.output_sources
    assert top_kind == low_kind == "buffer" and len({top, low}) == 2
    assert plan.buffer_bytes[top] == 2 * 16 * 2 and plan.buffer_bytes[low] == 4 * 16 * 2


def test_a_runner_keeps_its_plan_alive(tmp_path, monkeypatch):
    """A runner outlives every other reference to its plan (a bound program of a GpuProgram that is gone): the
    plan is freed with the runner, not before (a freed one crashed the process)."""
    import gc
    import weakref
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    plan = runtime.Plan(kiln.compile(SOURCE, target="sm_90a").folder)
    freed = weakref.ref(plan)
    run = plan.runner()
    del plan
    gc.collect()
    assert freed() is not None
    with pytest.raises(RuntimeError, match="was read without a GPU"):
        run([1, 2], [3], 0)
    del run
    gc.collect()
    assert freed() is None


def test_the_runtime_maps_targets_and_compute_capabilities():
    """One table, the runtime's, says which target a GPU takes and which GPU a target's cubins are built for."""
    assert [runtime.target_for(c) for c in ((9, 0), (8, 0), (8, 6), (8, 9), (10, 0), (7, 5))] == \
        ["sm_90a", "sm_80", "sm_80", "sm_80", "sm_80", None]
    assert runtime.target_capability("sm_90a") == (9, 0) and runtime.target_capability("sm_80") == (8, 0)
    assert runtime.target_capability("host") is None and runtime.target_capability("sm_70") is None
    assert kiln.compiler.native().targets() == ["host", "sm_80", "sm_90a"]
