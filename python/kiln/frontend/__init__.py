"""kiln.frontend: whole models into Kiln — ONNX files (and torch modules through the ONNX exporter).

``from_onnx(path)`` imports the graph (kiln/frontend/onnx_import.py), lets the compiler fuse it into a few
kernels and returns a ``Model``: call it on numpy arrays (host target), read ``.kernels`` and ``.ir(stage)``.
"""

from .model import Kernel, Model, export_torch, from_onnx, from_torch
from .onnx_import import ImportedGraph, import_onnx, unsupported_ops
from .values import FrontendError

__all__ = ["FrontendError", "ImportedGraph", "Kernel", "Model", "export_torch", "from_onnx", "from_torch",
           "import_onnx", "unsupported_ops"]
