"""Model: an imported graph compiled into kernels, callable like the framework module it came from.

On the host target a Model takes numpy arrays; on sm_80/sm_90a torch CUDA tensors (the weights are copied to the
inputs' device on first use).

Why a class of its own: a user of an imported model thinks in the model's terms — its input names, its weights,
how many kernels it became — not in kiln functions. ``Model`` keeps the imported text (stage "imported"), the
compiled program behind every later stage, the weight arrays when weights are kept out of the IR, and checks
each call's arrays by the ONNX input names.
"""

import re
from dataclasses import dataclass

import numpy as np

from ..compiler import check_target, compile
from .onnx_import import import_onnx
from .values import FrontendError

_KERNEL = re.compile(r"func\.func private @(\w+?_k\d+_(\w+))\(.*attributes \{[^}]*kiln\.kernel")


@dataclass(frozen=True)
class Kernel:
    """One kernel of a compiled model: its symbol and the kiln op it computes (matmul, attention, rms_norm...;
    "matmul x3" for a launch that runs three independent matmuls)."""
    name: str
    op: str


def _kernel_op(entry):
    """A manifest kernel's op without the dialect prefix; a grouped kernel (several independent ops of one kind
    in one launch) reads "matmul x3"."""
    op = entry["op"].removeprefix("kiln.")
    return f"{op} x{entry['group']}" if entry.get("group", 1) > 1 else op


class Model:
    """A compiled model; call it with one numpy array per graph input (positionally or by ONNX name)."""

    def __init__(self, imported, target):
        self.imported = imported
        self.target = target
        self.input_names = [name for name, _, _ in imported.inputs]
        self.output_names = [name for name, _, _ in imported.outputs]
        missing = [name for name, _, _, array in imported.weights if array is None]
        if missing:
            raise FrontendError(f"weights {missing[:4]}{'...' if len(missing) > 4 else ''} have no data in the "
                                f"file; a model to run needs them")
        self._weights = [array for _, _, _, array in imported.weights]
        self._device_weights = {}
        self.program = compile(imported.text, target=target)
        self._kernels = None

    @property
    def kernels(self):
        """The kernels the model compiles into, in launch order."""
        if self._kernels is None:
            if self.target == "host":
                self._kernels = [Kernel(name, op) for name, op in _KERNEL.findall(self.program.ir("tiled"))]
            else:
                self._kernels = [Kernel(k["name"], _kernel_op(k)) for k in self.program.kernels]
        return self._kernels

    def ir(self, stage="fused"):
        """The model at ``stage``: "imported" (the importer's kiln IR) or any compiler stage (kiln, fused, tiled,
        loops, llvm)."""
        if stage == "imported":
            return self.imported.text
        return self.program.ir(stage)

    def __call__(self, *arrays, **named):
        if named:
            unknown = set(named) - set(self.input_names)
            if unknown:
                raise TypeError(f"unknown input(s) {sorted(unknown)}; the model's inputs are {self.input_names}")
            if arrays:
                raise TypeError("pass the inputs either positionally or by name, not both")
            missing = [n for n in self.input_names if n not in named]
            if missing:
                raise TypeError(f"missing input(s) {missing}")
            arrays = tuple(named[n] for n in self.input_names)
        if len(arrays) != len(self.input_names):
            raise TypeError(f"the model takes {len(self.input_names)} input(s) {self.input_names}, got {len(arrays)}")
        if self.target != "host":
            return self.program(*arrays, *self._weights_on(arrays))
        for (name, dtype, shape), array in zip(self.imported.inputs, arrays):
            if not isinstance(array, np.ndarray):
                raise TypeError(f"input '{name}' must be a numpy array, got {type(array).__name__}")
            if array.dtype != dtype:
                raise TypeError(f"input '{name}' has dtype {array.dtype}, expected {dtype}")
            if tuple(array.shape) != tuple(shape):
                raise ValueError(f"input '{name}' has shape {tuple(array.shape)}, expected {tuple(shape)}")
        return self.program(*arrays, *self._weights)

    def _weights_on(self, tensors):
        """The weights as torch tensors on the device of the inputs, copied there on first use."""
        import torch
        device = tensors[0].device if tensors and isinstance(tensors[0], torch.Tensor) else torch.device("cuda")
        if device not in self._device_weights:
            moved = []
            for array in self._weights:
                if array.dtype.name == "bfloat16":
                    moved.append(torch.from_numpy(array.view(np.int16)).view(torch.bfloat16).to(device))
                else:
                    moved.append(torch.from_numpy(np.ascontiguousarray(array)).to(device))
            self._device_weights[device] = moved
        return self._device_weights[device]


def from_onnx(source, target="host", *, weights="constants", input_shapes=None):
    """Imports an ONNX model (path, ModelProto or serialized bytes) and compiles it for ``target`` ("host",
    "sm_80" or "sm_90a"; GPU kernels take bf16/f16 models); returns a ``Model``."""
    check_target(target)
    return Model(import_onnx(source, weights=weights, input_shapes=input_shapes), target)


def export_torch(module, example_inputs, *, opset=18):
    """A torch module as an ONNX ModelProto at the shapes of ``example_inputs``: torch.onnx.export with the
    dynamo exporter (torch.export), or the TorchScript exporter where that one is missing or fails."""
    import io

    import onnx
    import torch

    module = module.eval()
    with torch.no_grad():
        try:
            return torch.onnx.export(module, tuple(example_inputs), dynamo=True, opset_version=opset).model_proto
        except Exception:  # no onnxscript, or a graph torch.export cannot capture
            buffer = io.BytesIO()
            torch.onnx.export(module, tuple(example_inputs), buffer, opset_version=opset, dynamo=False)
            return onnx.load_from_string(buffer.getvalue())


def from_torch(module, example_inputs, target="host", *, opset=18, weights="constants"):
    """Exports a torch module (``export_torch``) and imports and compiles the result; returns a ``Model``."""
    return Model(import_onnx(export_torch(module, example_inputs, opset=opset), weights=weights), target)
