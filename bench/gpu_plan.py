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
        for step in plan["steps"]:
            kernel, entry = self.kernels[step["kernel"]]
            self.runtime.launch(kernel, entry, [values[i] for i in step["args"]])
        return [values[i] for i in plan["outputs"]]
