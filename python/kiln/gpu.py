"""GPU programs: a compiled module's kernels and run plan, launched on torch CUDA tensors.

Why the plan runs here: a compiled entry function is kernels plus a plan — inputs, buffers, views, constants and
launches in order (Driver/RunPlan.h). Executing it in Python over the runtime keeps the GPU path free of MLIR,
so a program compiled on one machine (or found in the disk cache) runs on another that has only the runtime,
torch and this package. Arguments are checked by position and name the entry; outputs are new torch tensors on
the inputs' device, and every launch goes to the current stream.
"""

import json
import sys
from pathlib import Path

import numpy as np

from . import runtime
from .extensions import native

#: torch dtype name of each kiln element type.
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i64": "int64", "i32": "int32",
                "i1": "bool"}
_NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i64": np.int64, "i32": np.int32, "i1": np.bool_}
#: Compute capability each target's cubin needs.
CAPABILITIES = {"sm_80": (8, 0), "sm_90a": (9, 0)}


_RAW_STREAM = []


def _current_stream(torch, index):
    """The current CUDA stream of GPU ``index`` as a raw handle (torch's fast accessor when it has one)."""
    if not _RAW_STREAM:
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _RAW_STREAM.append(raw or (lambda i: torch.cuda.current_stream(i).cuda_stream))
    return _RAW_STREAM[0](index)


def chip_for(capability):
    """The Kiln GPU target for a device's compute capability, or None when Kiln has none."""
    if capability == (9, 0):
        return "sm_90a"
    if capability[0] >= 8:
        return "sm_80"
    return None


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
    return gpu.assemble if gpu.capability == CAPABILITIES.get(target) else None


class ManifestError(ValueError):
    """A manifest.json this Kiln cannot run: damaged, edited by hand, or written by an older Kiln."""


_KINDS = {str: "a string", int: "an integer", list: "a list", dict: "an object"}


def _checked_manifest(folder):
    """The manifest of ``folder``, once every field that loading and launching the program reads is there with
    its type, every file it names is in the folder and every id it uses is defined; else a ManifestError that
    names the file and the field (a KeyError at the first call would name neither)."""
    path = folder / "manifest.json"

    def bad(why):
        raise ManifestError(f"{path}: {why}; compile the program again")

    def field(obj, key, kind, where, optional=False):
        if optional and key not in obj:
            return kind()
        value = obj.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            bad(f"{where} has no {key!r} ({_KINDS[kind]})")
        return value

    def objects(obj, key, where):
        items = field(obj, key, list, where)
        if not all(isinstance(item, dict) for item in items):
            bad(f"{where}'s {key!r} holds something other than objects")
        return items

    def integers(obj, key, where, count=None, optional=False):
        values = field(obj, key, list, where, optional)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values) or \
                count is not None and len(values) != count:
            bad(f"{where}'s {key!r} is not a list of {f'{count} ' if count else ''}integers")
        return values

    def file(obj, key, where):
        name = field(obj, key, str, where)
        if Path(name).name != name or not (folder / name).is_file():
            bad(f"{where} names {key} {name!r}, which is not a file of the folder")

    try:
        manifest = json.loads(path.read_text())
    except ValueError as error:  # not JSON, or not text
        bad(f"not JSON ({error})")
    if not isinstance(manifest, dict):
        bad("not a JSON object")
    if field(manifest, "target", str, "the manifest") not in CAPABILITIES:
        bad(f"target {manifest['target']!r} is not one of {', '.join(CAPABILITIES)}")
    kernels = objects(manifest, "kernels", "the manifest")
    unnamed = [k.get("name", "?") for k in kernels if not k.get("ptx") or not k.get("function")]
    if unnamed:  # written before each kernel had files of its own, or named the function it launches
        raise ManifestError(f"{folder}: kernel {unnamed[0]} names no PTX file or function; the folder comes from "
                            f"an older Kiln, compile it again")
    for kernel in kernels:
        where = f"kernel {field(kernel, 'name', str, 'a kernel')!r}"
        field(kernel, "function", str, where)
        # A folder may travel with its cubins alone (the PTX is only needed where no cubin fits the GPU).
        if kernel.get("cubin") is not None:
            file(kernel, "cubin", where)
        else:
            file(kernel, "ptx", where)
        objects(kernel, "params", where)
        integers(kernel, "grid", where, 3)
        integers(kernel, "block", where, 3)
        field(kernel, "dynamic_shared_bytes", int, where)
        integers(kernel, "sizes", where, optional=True)
        if not isinstance(kernel.get("dependent_launch", False), bool):
            bad(f"{where}'s 'dependent_launch' is not true or false")
        for spec in field(kernel, "tensor_maps", list, where, optional=True):
            if not isinstance(spec, dict):
                bad(f"{where}'s tensor map is not an object")
            field(spec, "dtype", str, f"{where}'s tensor map")
            for key in ("buffer", "swizzle"):
                field(spec, key, int, f"{where}'s tensor map")
            for key in ("dims", "strides", "box"):
                integers(spec, key, f"{where}'s tensor map")
    names = {kernel["name"] for kernel in kernels}
    for plan in objects(manifest, "plans", "the manifest"):
        where = f"plan {field(plan, 'function', str, 'a plan')!r}"
        values = objects(plan, "values", where)
        ids = {field(value, "id", int, f"a value of {where}") for value in values}
        for value in values:
            at = f"value {value['id']} of {where}"
            kind = field(value, "kind", str, at)
            if field(value, "dtype", str, at) not in TORCH_DTYPES:
                bad(f"{at} has dtype {value['dtype']!r}")
            integers(value, "shape", at)
            if kind == "input":
                field(value, "index", int, at)
                if not isinstance(value.get("updated_in_place", False), bool):
                    bad(f"{at}'s 'updated_in_place' is not true or false")
            elif kind == "view":
                if field(value, "of", int, at) not in ids:
                    bad(f"{at} is a view of value {value['of']}, which the plan does not define")
            elif kind == "constant":
                file(value, "file", at)
            elif kind != "buffer":
                bad(f"{at} is of unknown kind {kind!r}")
        for step in objects(plan, "steps", where):
            if field(step, "kernel", str, f"a step of {where}") not in names:
                bad(f"a step of {where} launches kernel {step['kernel']!r}, which the manifest does not list")
            if not set(integers(step, "args", f"step {step['kernel']!r} of {where}")) <= ids:
                bad(f"step {step['kernel']!r} of {where} takes a value the plan does not define")
        if not set(integers(plan, "outputs", where)) <= ids:
            bad(f"{where} returns a value it does not define")
    return manifest


class GpuProgram:
    """A compiled entry function for a GPU target; call it with torch CUDA tensors."""

    def __init__(self, folder, entry=None, source=None):
        self.folder = Path(folder)
        self.manifest = _checked_manifest(self.folder)
        self.target = self.manifest["target"]
        plans = self.manifest["plans"]
        names = [plan["function"] for plan in plans]
        if entry:
            if entry not in names:
                raise ValueError(f"no function '{entry}' in the compiled module (it has {', '.join(names)})")
            self.plan = plans[names.index(entry)]
        elif len(plans) == 1:
            self.plan = plans[0]
        else:
            raise ValueError(f"the module has {len(plans)} public functions ({', '.join(names)}); pass entry=NAME")
        self.entry = self.plan["function"]
        values = {value["id"]: value for value in self.plan["values"]}
        inputs = sorted((v for v in self.plan["values"] if v["kind"] == "input"), key=lambda v: v["index"])
        self.inputs = [(v["dtype"], tuple(v["shape"])) for v in inputs]
        # Inputs that a kernel updates in place (kiln.append_kv's caches): no other input may share their memory.
        self._in_place = [position for position, v in enumerate(inputs) if v.get("updated_in_place", False)]
        self.outputs = [(values[i]["dtype"], tuple(values[i]["shape"])) for i in self.plan["outputs"]]
        self._source = source
        self._loaded = {}
        self._expected = None
        # Every plan value gets a slot in a flat list: inputs first (by argument index), then the rest in order.
        self._slots = {v["id"]: v["index"] for v in inputs}
        self._layout = []
        for value in self.plan["values"]:
            if value["kind"] == "input":
                continue
            self._slots[value["id"]] = len(self._slots)
            self._layout.append((self._slots[value["id"]], value))
        self._value_count = len(self._slots)
        self._output_slots = [self._slots[i] for i in self.plan["outputs"]]
        # Outputs that are (views of) inputs or constants are copied, so that a caller's result never aliases an
        # argument or the program's own constants; but an argument that a kernel updates in place (the paged
        # caches of kiln.append_kv) is returned itself, updated, as torch's in-place ops return theirs.
        kinds = {self._slots[v["id"]]: v for v in self.plan["values"]}
        def root(slot):
            value = kinds.get(slot)
            return root(self._slots[value["of"]]) if value and value["kind"] == "view" else value
        def copied(value):
            return value is None or value["kind"] == "constant" or (
                value["kind"] == "input" and not value.get("updated_in_place", False))
        self._copied_outputs = {slot for slot in self._output_slots if copied(root(slot))}

    @property
    def ptx(self):
        """The kernels' PTX, kernel by kernel."""
        files = dict.fromkeys(k["ptx"] for k in self.manifest["kernels"])
        return "".join((self.folder / name).read_text() for name in files)

    @property
    def kernels(self):
        """The manifest's kernel entries (name, launch, config, registers, ...), in plan order."""
        by_name = {k["name"]: k for k in self.manifest["kernels"]}
        return [by_name[step["kernel"]] for step in self.plan["steps"]]

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
        device, steps, values = self._values(torch, tensors, index)
        stream = _current_stream(torch, index)
        for launch, slots, sizes in steps:
            launch([values[s].data_ptr() for s in slots] + sizes, stream)
        copied = self._copied_outputs
        results = [values[s].clone() if s in copied else values[s] for s in self._output_slots]
        return results[0] if len(results) == 1 else tuple(results)

    def bind(self, *tensors):
        """The program bound to these input tensors, with its buffers allocated once: ``launch()`` issues the
        kernels (refill the inputs in place between calls; the outputs are the same tensors every time), and
        ``capture()`` records them into a CUDA graph that ``replay()`` issues with one call."""
        import torch
        index = self._check(torch, tensors)
        if self._in_place:
            self._check_in_place(tensors)
        device, steps, values = self._values(torch, tensors, index)
        launches = [(launch, [values[s].data_ptr() for s in slots] + sizes) for launch, slots, sizes in steps]
        return BoundProgram(device, launches, [values[s] for s in self._output_slots], values)

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

    def _values(self, torch, tensors, index):
        """Every plan value for a call on GPU ``index``: the inputs, then new buffers, views and the constants,
        in slot order."""
        device, steps, fills = self._loaded.get(index) or self._load(torch, index)
        values = list(tensors)
        empty = torch.empty
        for kind, first, second in fills:
            if kind == "buffer":
                values.append(empty(first, dtype=second, device=device))
            elif kind == "view":
                values.append(values[first].view(second))
            else:
                values.append(first)
        return device, steps, values

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
        """The launches and how to fill every non-input slot on GPU ``index``, prepared on its first call."""
        device = torch.device("cuda", index)
        gpu = runtime.device(index)
        entries = {k["name"]: k for k in self.manifest["kernels"]}
        modules, steps = {}, []  # one module per kernel file, loaded once
        for step in self.plan["steps"]:
            entry = entries[step["kernel"]]
            image = self._image(entry, gpu.capability)
            if image not in modules:
                try:
                    modules[image] = gpu.load((self.folder / image).read_bytes())
                except RuntimeError as error:  # the driver names the CUDA error, not the file it was given
                    raise RuntimeError(f"{self.folder / image}: {error} (compiled for {self.target}; the GPU has "
                                       f"compute capability {gpu.capability[0]}.{gpu.capability[1]})") from None
            kernel = gpu.manifest_kernel(modules[image], entry)
            # A size-generic kernel takes its sizes after the buffers (the same at every call of the step), and a
            # TMA kernel its tensor maps after those, which the runtime builds at each launch.
            sizes = list(entry.get("sizes", []))
            launch = runtime.launcher(kernel, entry, len(step["args"]) + len(sizes))
            steps.append((launch, [self._slots[i] for i in step["args"]], sizes))
        fills = []  # one per non-input slot, in slot order
        for _, value in self._layout:
            dtype = getattr(torch, TORCH_DTYPES[value["dtype"]])
            if value["kind"] == "constant":
                raw = np.fromfile(self.folder / value["file"], dtype=_NUMPY[value["dtype"]]).reshape(value["shape"])
                tensor = torch.from_numpy(raw.view(np.int16) if value["dtype"] == "bf16" else raw)
                fills.append(("constant", (tensor.view(dtype) if value["dtype"] == "bf16" else tensor).to(device),
                              None))
            elif value["kind"] == "buffer":
                fills.append(("buffer", tuple(value["shape"]), dtype))
            else:
                fills.append(("view", self._slots[value["of"]], tuple(value["shape"])))
        loaded = self._loaded[index] = (device, steps, fills)
        return loaded

    def _image(self, kernel, capability):
        """The file of ``kernel`` to load on a GPU of ``capability``: its cubin, or its PTX for the driver to
        JIT-compile (another 8.x GPU than the cubin's, or no cubin)."""
        needed = CAPABILITIES[self.target]
        if self.target == "sm_90a" and capability != needed:
            raise RuntimeError(f"this program is compiled for sm_90a (compute capability 9.0); the GPU has "
                               f"{capability[0]}.{capability[1]}")
        if capability < needed:
            raise RuntimeError(f"this program is compiled for {self.target}; the GPU's compute capability "
                               f"{capability[0]}.{capability[1]} is older")
        cubin = kernel.get("cubin")
        return cubin if cubin and capability[0] == needed[0] else kernel["ptx"]


class BoundProgram:
    """A GpuProgram bound to fixed tensors (``GpuProgram.bind``): launches with nothing left to decide."""

    def __init__(self, device, launches, outputs, values):
        self.device, self.launches, self.outputs = device, launches, outputs
        self._values = values  # keeps the buffers alive while the launches point at them
        self.graph = None

    def launch(self):
        import torch
        stream = _current_stream(torch, self.device.index)
        for launch, pointers in self.launches:
            launch(pointers, stream)
        return self.outputs

    def capture(self):
        """Records the launches into a CUDA graph (after one warm launch on a side stream)."""
        import torch
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.launch()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
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
