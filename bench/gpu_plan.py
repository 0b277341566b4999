"""Runs a kilnc run plan (manifest.json "plans") on the GPU through Kiln's runtime.

Why: a compiled graph is kernels plus a plan — buffers, views, constants and launches in order. This executes
the plan as written, with torch allocating the device buffers, so a whole block can be checked end to end on
the GPU machine, where there is no MLIR.
"""
import json
from pathlib import Path

import numpy as np
import torch

from gpu_visit import DTYPES, Runtime

NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i64": np.int64, "i32": np.int32, "i1": np.bool_}


class PlanRunner:
    """One compiled module: its kernels loaded once, its plans runnable on torch CUDA tensors."""

    def __init__(self, runtime: Runtime, folder: Path):
        self.runtime = runtime
        self.folder = Path(folder)
        self.manifest = json.loads((self.folder / "manifest.json").read_text())
        cubin = self.folder / self.manifest["cubin"]
        self.kernels = {k["name"]: (runtime.load(cubin, k["name"]), k) for k in self.manifest["kernels"]}
        self.constants = {}  # (plan, value id) -> device tensor, read from its file once

    def run(self, inputs, plan_index=0):
        values, plan = self._values(inputs, plan_index)
        for step in plan["steps"]:
            kernel, entry = self.kernels[step["kernel"]]
            self.runtime.launch(kernel, entry, [values[i] for i in step["args"]])
        return [values[i] for i in plan["outputs"]]

    def prepare(self, inputs, plan_index=0):
        """The plan bound to these input tensors: buffers allocated and launch arguments packed once, so that a
        call is only the launches (or one CUDA graph replay). Refill the inputs in place between calls; the
        outputs are the same tensors every time."""
        values, plan = self._values(inputs, plan_index)
        launches = []
        for step in plan["steps"]:
            kernel, entry = self.kernels[step["kernel"]]
            launches.append(self.runtime.packed_launch(kernel, entry, [values[i] for i in step["args"]]))
        return PreparedPlan(launches, [values[i] for i in plan["outputs"]])

    def _values(self, inputs, plan_index):
        plan = self.manifest["plans"][plan_index]
        values = {}
        for value in plan["values"]:
            dtype, shape = DTYPES[value["dtype"]], value["shape"]
            if value["kind"] == "input":
                tensor = inputs[value["index"]]
                if list(tensor.shape) != shape or tensor.dtype != dtype or not tensor.is_contiguous():
                    raise ValueError(f"input {value['index']} must be a contiguous {shape} {value['dtype']} tensor, "
                                     f"got {list(tensor.shape)} {tensor.dtype}")
            elif value["kind"] == "buffer":
                tensor = torch.empty(shape, dtype=dtype, device="cuda")
            elif value["kind"] == "view":
                tensor = values[value["of"]].view(shape)
            elif value["kind"] == "constant":
                key = (plan_index, value["id"])
                if key not in self.constants:
                    raw = np.fromfile(self.folder / value["file"], dtype=NUMPY[value["dtype"]]).reshape(shape)
                    tensor = torch.from_numpy(raw.view(np.int16) if value["dtype"] == "bf16" else raw)
                    self.constants[key] = (tensor.view(torch.bfloat16) if value["dtype"] == "bf16" else tensor).to("cuda")
                tensor = self.constants[key]
            else:
                raise ValueError(f"unknown plan value kind {value['kind']}")
            values[value["id"]] = tensor
        return values, plan


class PreparedPlan:
    """A plan bound to its tensors: ``launch()`` issues its kernels on the current stream; ``capture()`` records
    them once into a CUDA graph that ``replay()`` then issues with one call."""

    def __init__(self, launches, outputs):
        self.launches, self.outputs, self.graph = launches, outputs, None

    def launch(self):
        for launch in self.launches:
            launch()
        return self.outputs

    def capture(self):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.launch()  # warm: the first launch of a kernel may set its shared-memory limit
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.launch()
        return self

    def replay(self):
        self.graph.replay()
        return self.outputs
