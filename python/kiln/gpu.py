"""GPU programs: a compiled module's kernels and run plan, launched on torch CUDA tensors.

Why the plan runs here: a compiled entry function is kernels plus a plan — inputs, buffers, views, constants and
launches in order (Driver/RunPlan.h). Executing it in Python over the runtime keeps the GPU path free of MLIR,
so a program compiled on one machine (or found in the disk cache) runs on another that has only the runtime,
torch and this package. Arguments are checked by position and name the entry; outputs are new torch tensors on
the inputs' device, and every launch goes to the current stream.
"""

import json
from pathlib import Path

import numpy as np

from . import runtime

#: torch dtype name of each kiln element type.
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "i64": "int64", "i32": "int32",
                "i1": "bool"}
_NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i64": np.int64, "i32": np.int32, "i1": np.bool_}
#: Compute capability each target's cubin needs.
CAPABILITIES = {"sm_80": (8, 0), "sm_90a": (9, 0)}


def chip_for(capability):
    """The Kiln GPU target for a device's compute capability, or None when Kiln has none."""
    if capability == (9, 0):
        return "sm_90a"
    if capability[0] >= 8:
        return "sm_80"
    return None


class GpuProgram:
    """A compiled entry function for a GPU target; call it with torch CUDA tensors."""

    def __init__(self, folder, entry=None, source=None):
        self.folder = Path(folder)
        self.manifest = json.loads((self.folder / "manifest.json").read_text())
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
        self.outputs = [(values[i]["dtype"], tuple(values[i]["shape"])) for i in self.plan["outputs"]]
        self._source = source
        self._loaded = {}

    @property
    def ptx(self):
        """The kernels' PTX."""
        return (self.folder / self.manifest["ptx"]).read_text()

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
        from .compiler import native
        if stage in ("gpu", "llvm"):
            return native().gpu_ir(self._source, self.target, stage)
        return native().HostProgram(self._source, self.entry).ir(stage)

    def __call__(self, *tensors):
        import torch
        if len(tensors) != len(self.inputs):
            raise TypeError(f"'{self.entry}' takes {len(self.inputs)} arguments, got {len(tensors)}")
        device = None
        for index, (tensor, (dtype, shape)) in enumerate(zip(tensors, self.inputs)):
            name = f"argument {index} of '{self.entry}'"
            if not isinstance(tensor, torch.Tensor):
                raise TypeError(f"{name} must be a torch CUDA tensor, got {type(tensor).__name__}")
            if tensor.device.type != "cuda":
                raise ValueError(f"{name} is on {tensor.device}; a {self.target} program takes CUDA tensors")
            if device is not None and tensor.device != device:
                raise ValueError(f"{name} is on {tensor.device} but argument 0 is on {device}")
            device = tensor.device
            if tensor.dtype != getattr(torch, TORCH_DTYPES[dtype]):
                raise TypeError(f"{name} has dtype {tensor.dtype}, expected torch.{TORCH_DTYPES[dtype]}")
            if tuple(tensor.shape) != shape:
                raise ValueError(f"{name} has shape {tuple(tensor.shape)}, expected {shape}")
            if not tensor.is_contiguous():
                raise ValueError(f"{name} is not contiguous; call .contiguous() first")
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        kernels, constants = self._load(device)
        values = {}
        for value in self.plan["values"]:
            kind = value["kind"]
            if kind == "input":
                values[value["id"]] = tensors[value["index"]]
            elif kind == "buffer":
                values[value["id"]] = torch.empty(value["shape"], dtype=getattr(torch, TORCH_DTYPES[value["dtype"]]),
                                                  device=device)
            elif kind == "view":
                values[value["id"]] = values[value["of"]].view(value["shape"])
            elif kind == "constant":
                values[value["id"]] = constants[value["id"]]
            else:
                raise RuntimeError(f"unknown plan value kind '{kind}' in {self.folder / 'manifest.json'}")
        stream = torch.cuda.current_stream(device).cuda_stream
        for step in self.plan["steps"]:
            kernel, launch = kernels[step["kernel"]]
            runtime.packed_launch(kernel, launch, [values[i].data_ptr() for i in step["args"]])(stream)
        results = [values[i] for i in self.plan["outputs"]]
        return results[0] if len(results) == 1 else tuple(results)

    def _load(self, device):
        """Kernels and constants on ``device``, loaded on its first call."""
        if device.index in self._loaded:
            return self._loaded[device.index]
        import torch
        gpu = runtime.device(device.index)
        image = self._image(gpu.capability)
        module = gpu.load(image)
        by_name = {k["name"]: k for k in self.manifest["kernels"]}
        kernels = {name: (gpu.kernel(module, name), entry) for name, entry in by_name.items()}
        constants = {}
        for value in self.plan["values"]:
            if value["kind"] == "constant":
                raw = np.fromfile(self.folder / value["file"], dtype=_NUMPY[value["dtype"]]).reshape(value["shape"])
                tensor = torch.from_numpy(raw.view(np.int16) if value["dtype"] == "bf16" else raw)
                if value["dtype"] == "bf16":
                    tensor = tensor.view(torch.bfloat16)
                constants[value["id"]] = tensor.to(device)
        self._loaded[device.index] = (kernels, constants)
        return kernels, constants

    def _image(self, capability):
        needed = CAPABILITIES[self.target]
        if self.target == "sm_90a" and capability != needed:
            raise RuntimeError(f"this program is compiled for sm_90a (compute capability 9.0); the GPU has "
                               f"{capability[0]}.{capability[1]}")
        if capability < needed:
            raise RuntimeError(f"this program is compiled for {self.target}; the GPU's compute capability "
                               f"{capability[0]}.{capability[1]} is older")
        cubin = self.manifest.get("cubin")
        if cubin and capability[0] == needed[0]:
            return (self.folder / cubin).read_bytes()
        return (self.folder / self.manifest["ptx"]).read_bytes()  # the driver JIT-compiles it for this GPU


def load(folder, entry=None):
    """A GpuProgram from a folder kilnc or ``kiln.compile`` wrote (manifest.json, kernels, constants)."""
    folder = Path(folder)
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(f"{folder}: no manifest.json (not a compiled Kiln program)")
    return GpuProgram(folder, entry)
