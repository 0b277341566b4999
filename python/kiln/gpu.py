"""GPU programs: a compiled module's kernels and run plan, run on torch CUDA tensors.

Why the runtime runs the plan: a compiled entry function is kernels plus a plan — inputs, buffers, views,
constants and launches in order (Driver/RunPlan.h). The runtime (libkiln_runtime, no MLIR) reads the folder's
manifest, checks it, loads the kernels and runs the plan in one C call (kiln_plan_run_with_buffers); this module
checks torch arguments by position and name, allocates the plan's scratch buffers with torch's allocator on the
inputs' device, and hands the runtime their addresses and the current stream. So a program compiled on one
machine (or found in the disk cache) runs on another that has only the runtime, torch and this package, and
C programs, kiln-plan-run and Python run one executor.
"""

import json
import math
import sys
from pathlib import Path

from . import runtime
from .extensions import native

#: torch dtype name of each kiln element type.
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i64": "int64", "i32": "int32",
                "i1": "bool"}


_RAW_STREAM = []


def _current_stream(torch, index):
    """The current CUDA stream of GPU ``index`` as a raw handle (torch's fast accessor when it has one)."""
    if not _RAW_STREAM:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _RAW_STREAM.append(raw or (lambda i: torch.cuda.current_stream(i).cuda_stream))
    return _RAW_STREAM[0](index)


def chip_for(capability):
    """The Kiln GPU target for a device's compute capability, or None when Kiln has none (the runtime's table)."""
    return runtime.target_for(capability)


def driver_assembler(target):
    """The CUDA driver's in-process PTX JIT of the current GPU (torch's current device, else GPU 0) when that GPU
    is exactly ``target``'s architecture, so that its cubin runs wherever the target's does; else None: no
    runtime, no driver, no GPU, or another architecture (whose cubin a cache shared with other machines must
    not hold). The compile falls back to ptxas when the driver fails."""
    torch = sys.modules.get("torch")
    ordinal = torch.cuda.current_device() if torch is not None and torch.cuda.is_initialized() else 0
    try:
        gpu = runtime.device(ordinal)
    except (RuntimeError, OSError):
        return None
    return gpu.assemble if gpu.capability == runtime.target_capability(target) else None


ManifestError = runtime.ManifestError


class GpuProgram:
    """A compiled entry function for a GPU target; call it with torch CUDA tensors."""

    def __init__(self, folder, entry=None, source=None):
        self.folder = Path(folder)
        self._plan = runtime.Plan(self.folder, entry)  # the runtime reads and checks the manifest
        self.target, self.entry = self._plan.target, self._plan.function
        self.inputs, self.outputs = self._plan.inputs, self._plan.outputs
        # Inputs that a kernel updates in place (kiln.append_kv's caches): no other input may share their memory.
        self._in_place = self._plan.in_place
        self._source = source
        self._manifest = None
        self._loaded = {}
        self._expected = None
        # Each scratch buffer is allocated as the first output it holds (dtype, shape), else as bytes; an output
        # is that tensor, a view of it, or an input the plan updates in place.
        self._allocations = [((max(size, 1),), "u8") for size in self._plan.buffer_bytes]
        self._results = []
        for (dtype, shape), (where, index) in zip(self.outputs, self._plan.output_sources):
            if where == "buffer" and self._allocations[index][1] == "u8":
                self._allocations[index] = (shape, dtype)
            self._results.append((where == "input", index, shape, dtype))

    @property
    def manifest(self):
        """The manifest as JSON, for what it describes (kernel configs, registers, compile stage times): the
        runtime has read and checked it; the plan runs from the runtime's reading."""
        if self._manifest is None:
            self._manifest = json.loads((self.folder / "manifest.json").read_text())
        return self._manifest

    @property
    def ptx(self):
        """The kernels' PTX, kernel by kernel."""
        files = dict.fromkeys(k["ptx"] for k in self.manifest["kernels"])
        return "".join((self.folder / name).read_text() for name in files)

    @property
    def kernels(self):
        """The manifest's kernel entries (name, launch, config, registers, ...), in plan order."""
        by_name = {k["name"]: k for k in self.manifest["kernels"]}
        plan = next(p for p in self.manifest["plans"] if p["function"] == self.entry)
        return [by_name[step["kernel"]] for step in plan["steps"]]

    def ir(self, stage="kiln"):
        """The module at ``stage``: kiln, fused, tiled (target-independent), gpu or llvm (this target), ptx."""
        if stage == "ptx":
            return self.ptx
        if self._source is None:
            raise ValueError("this program was loaded from compiled files; only its 'ptx' stage is available")
        if stage in ("gpu", "llvm"):
            return native().gpu_ir(self._source, self.target, stage)
        return native().source_ir(self._source, stage)

    def __call__(self, *tensors):
        import torch
        return self.run_checked(torch, tensors, self._check(torch, tensors))

    def run_checked(self, torch, tensors, index):
        """Runs on ``tensors`` that are known to be this program's inputs (dtype, shape, contiguity) on GPU
        ``index``: what ``@kiln.jit`` calls when its cache key already proved that."""
        if self._in_place:
            self._check_in_place(tensors)
        device, run, dtypes, _ = self._loaded.get(index) or self._load(torch, index)
        buffers = self._buffers(torch.empty, device, dtypes)
        run([t.data_ptr() for t in tensors], [b.data_ptr() for b in buffers], _current_stream(torch, index))
        results = self._outputs(tensors, buffers, dtypes)
        return results[0] if len(results) == 1 else tuple(results)

    def bind(self, *tensors, out=None):
        """The program bound to these input tensors, with its buffers allocated once: ``launch()`` runs the
        plan (refill the inputs in place between calls; the outputs are the same tensors every time), and
        ``capture()`` records it into a CUDA graph that ``replay()`` issues with one call. ``out`` (one tensor
        or None per output) gives the tensors that outputs held in buffers of their own are written to."""
        import torch
        index = self._check(torch, tensors)
        if self._in_place:
            self._check_in_place(tensors)
        device, run, dtypes, _ = self._loaded.get(index) or self._load(torch, index)
        buffers = self._buffers(torch.empty, device, dtypes)
        for position, given in enumerate(out or ()):
            if given is not None:
                buffers[self._out_buffer(torch, position, given, device)] = given
        inputs, addresses = [t.data_ptr() for t in tensors], [b.data_ptr() for b in buffers]
        return BoundProgram(device, lambda stream: run(inputs, addresses, stream),
                            self._outputs(tensors, buffers, dtypes), (tensors, buffers))

    def _buffers(self, empty, device, dtypes):
        """New scratch buffers for one run, each as the first output it holds or as bytes."""
        return [empty(shape, dtype=dtypes[dtype], device=device) for shape, dtype in self._allocations]

    def _outputs(self, tensors, buffers, dtypes):
        """The results of a run: each output's input, buffer, or the buffer's bytes under its dtype and shape."""
        results = []
        for is_input, index, shape, dtype in self._results:
            held = tensors[index] if is_input else buffers[index]
            if held.dtype is dtypes["u8"]:  # a buffer allocated as bytes: its first bytes under the output's dtype
                wanted = dtypes[dtype]
                held = held[:math.prod(shape) * wanted.itemsize].view(wanted).view(shape)
            elif held.shape != shape:
                held = held.view(shape)
            results.append(held)
        return results

    def _out_buffer(self, torch, position, given, device):
        """The buffer of output ``position``, which the tensor ``given`` is to be; raises unless it can be."""
        if not 0 <= position < len(self._results) or self._results[position][0]:
            raise ValueError(f"output {position} of '{self.entry}' is not written to a buffer of its own")
        _, index, shape, dtype = self._results[position]
        expected = getattr(torch, TORCH_DTYPES[dtype])
        if not (isinstance(given, torch.Tensor) and given.device == device and given.dtype is expected and
                tuple(given.shape) == shape and given.is_contiguous() and given.data_ptr() % 16 == 0 and
                self._allocations[index] == (shape, dtype)):
            raise ValueError(f"out[{position}] of '{self.entry}' must be a contiguous, 16-byte aligned "
                             f"torch.{TORCH_DTYPES[dtype]} tensor of shape {shape} on {device}")
        return index

    def _check(self, torch, tensors):
        """Checks the arguments; returns the index of the GPU they are on."""
        if len(tensors) != len(self.inputs):
            raise TypeError(f"'{self.entry}' takes {len(self.inputs)} arguments, got {len(tensors)}")
        expected = self._expected or self._prepare_checks(torch)
        device = None
        for index, tensor in enumerate(tensors):
            dtype, shape = expected[index]
            if not (isinstance(tensor, torch.Tensor) and tensor.is_cuda and tensor.dtype is dtype
                    and tensor.shape == shape and tensor.is_contiguous() and tensor.data_ptr() % 16 == 0
                    and (device is None or tensor.device == device)):
                self._reject(torch, index, tensor, device)
            device = tensor.device
        return torch.cuda.current_device() if device is None else device.index

    def _check_in_place(self, tensors):
        """Refuses a call where an argument that the program updates in place shares memory with another one:
        the kernel writing it would change what the other argument holds (two caches passed as one tensor)."""
        def extent(tensor):
            start = tensor.data_ptr()
            return start, start + tensor.numel() * tensor.element_size()
        for i in self._in_place:
            start, end = extent(tensors[i])
            for j, other in enumerate(tensors):
                other_start, other_end = extent(other)
                if j != i and other_start < end and start < other_end:
                    raise ValueError(f"'{self.entry}' updates argument {i} in place, but argument {j} shares its "
                                     f"memory; pass separate tensors")

    def _prepare_checks(self, torch):
        """Per input, the torch dtype and shape to compare against (built once)."""
        self._expected = [(getattr(torch, TORCH_DTYPES[dtype]), torch.Size(shape)) for dtype, shape in self.inputs]
        return self._expected

    def _reject(self, torch, index, tensor, device):
        """Raises the error that says what is wrong with argument ``index``."""
        dtype, shape = self.inputs[index]
        name = f"argument {index} of '{self.entry}'"
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name} must be a torch CUDA tensor, got {type(tensor).__name__}")
        if not tensor.is_cuda:
            raise ValueError(f"{name} is on {tensor.device}; a {self.target} program takes CUDA tensors")
        if device is not None and tensor.device != device:
            raise ValueError(f"{name} is on {tensor.device} but argument 0 is on {device}")
        if tensor.dtype != getattr(torch, TORCH_DTYPES[dtype]):
            raise TypeError(f"{name} has dtype {tensor.dtype}, expected torch.{TORCH_DTYPES[dtype]}")
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, expected {shape}")
        if not tensor.is_contiguous():
            raise ValueError(f"{name} is not contiguous; call .contiguous() first")
        # The kernels copy 16-byte pieces (cp.async, TMA): a view that starts between them would fault.
        raise ValueError(f"{name} starts at {tensor.data_ptr():#x}, not on a 16-byte boundary (a view at an "
                         f"offset); call .clone() first")

    def _load(self, torch, index):
        """The device, what runs the plan loaded on GPU ``index`` (the runtime picks each kernel's cubin or PTX),
        the torch dtype of each allocation and the loaded plan, prepared on its first call."""
        gpu = runtime.device(index)
        self._plan.check_chip(gpu.capability)
        plan = runtime.Plan(self.folder, self.entry, gpu)
        dtypes = {name: getattr(torch, torch_name) for name, torch_name in TORCH_DTYPES.items()}
        dtypes["u8"] = torch.uint8
        loaded = self._loaded[index] = (torch.device("cuda", index), plan.runner(), dtypes, plan)
        return loaded


class BoundProgram:
    """A GpuProgram bound to fixed tensors (``GpuProgram.bind``): runs with nothing left to decide."""

    def __init__(self, device, run, outputs, keep):
        self.device, self.run, self.outputs = device, run, outputs
        self._keep = keep  # the inputs and buffers whose addresses the run passes
        self.graph = None

    def launch(self):
        import torch
        self.run(_current_stream(torch, self.device.index))
        return self.outputs

    def capture(self):
        """Records the run into a CUDA graph (after one warm run on a side stream)."""
        import torch
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.launch()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        # On a stream of this program's device: torch's default capture stream is made on whichever device was
        # current at a process's first capture, and a capture on another device's stream records nothing.
        with torch.cuda.device(self.device), torch.cuda.graph(self.graph, stream=torch.cuda.Stream(self.device)):
            self.launch()
        return self

    def replay(self):
        self.graph.replay()
        return self.outputs


def load(folder, entry=None):
    """A GpuProgram from a folder kilnc or ``kiln.compile`` wrote (manifest.json, kernels, constants)."""
    folder = Path(folder)
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(f"{folder}: no manifest.json (not a compiled Kiln program)")
    return GpuProgram(folder, entry)
