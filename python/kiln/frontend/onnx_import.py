"""ONNX import: a ModelProto (or .onnx file) to one kiln IR function.

Why a Python importer: the onnx package already parses and validates the protobuf, and numpy folds the shape
arithmetic, mask and table computations that exporters leave in the graph; the compiler only ever sees kiln ops
on static shapes. The importer walks the nodes in their (topological) order, folds every node whose inputs are
all constants, and writes the rest as kiln ops with the node's name as their location, so that a diagnostic from
the compiler points back into the ONNX graph. It checks the whole graph for unsupported operators before it
starts, and reports all of them at once.
"""

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import trace
from . import onnx_attention, onnx_ops
from .values import ELEMENTS, Const, FrontendError, Weight, constant_text

#: Operator -> emitter, for every operator the importer reads.
OPS = {**onnx_ops.OPS, **onnx_attention.OPS}
#: Operator -> the newest default-domain schema version (``since_version``) its emitter follows.
SCHEMAS = {**onnx_ops.SCHEMAS, **onnx_attention.SCHEMAS}
#: The oldest default-domain opset the importer reads; the newest is the installed onnx release's.
OLDEST_OPSET = 13
_DOMAINS = ("", "ai.onnx", "com.microsoft")
_REQUIRED = object()


@dataclass
class ImportedGraph:
    """The kiln IR of a model and what its function takes and returns."""
    text: str
    inputs: list = field(default_factory=list)   # (onnx name, numpy dtype, shape)
    outputs: list = field(default_factory=list)  # (onnx name, numpy dtype, shape)
    weights: list = field(default_factory=list)  # (onnx name, numpy dtype, shape, array or None), after inputs


class Node:
    """One ONNX node with its attributes decoded."""

    def __init__(self, proto, index):
        from onnx import helper
        self.proto = proto
        self.name = proto.name or f"{proto.op_type}#{index}"
        self.attributes = {}
        for attr in proto.attribute:
            value = helper.get_attribute_value(attr)
            self.attributes[attr.name] = value.decode() if isinstance(value, bytes) else value

    def describe(self):
        return f"{self.proto.op_type} node '{self.name}'"


class _Context:
    """What an operator function needs: the node, its attributes, the opset, and the function being built."""

    def __init__(self, graph, opset, weights_as_arguments):
        self.graph, self.opset = graph, opset
        self.weights_as_arguments = weights_as_arguments
        self.node = None
        self.arguments = []       # weight arguments, in order of first use
        self._materialized = {}   # id(Const) -> (Const, Tensor)

    def attr(self, name, default=_REQUIRED):
        if name in self.node.attributes:
            return self.node.attributes[name]
        if default is _REQUIRED:
            raise FrontendError(f"{self.node.describe()}: missing attribute '{name}'")
        return default

    def emit(self, text, shape, element):
        location = self.node.name.replace("\\", "\\\\").replace('"', '\\"')
        return self.graph.emit(f'{text} loc("{location}")', shape, element)

    def const(self, value, what):
        if not isinstance(value, Const) or (isinstance(value, Weight) and not value.has_data):
            raise FrontendError(f"{self.node.describe()}: {what} must be a constant, but it depends on a graph "
                                f"input")
        return value

    def tensor(self, value, like=None):
        """The value as a tensor of the function: constants are written once as kiln.constant, weights kept out
        of the IR become arguments."""
        if isinstance(value, trace.Tensor):
            return value
        key = id(value)
        cached = self._materialized.get(key)
        if cached is not None and cached[0] is value:
            return cached[1]
        if isinstance(value, Weight):
            if value.element is None:
                raise FrontendError(f"initializer '{value.name}' has dtype {value.dtype}, which kiln has no type for")
            tensor = trace.Tensor(self.graph, f"%w{len(self.arguments)}", value.shape, value.element)
            self.arguments.append((value, tensor))
        else:
            array = value.array
            if array.dtype == np.float64:
                array = array.astype(trace.DTYPES[like.element] if like is not None else np.float32)
            element = ELEMENTS.get(array.dtype)
            if element is None:
                raise FrontendError(f"{self.node.describe()}: a constant of dtype {array.dtype} has no kiln type")
            tensor = self.emit(constant_text(array, element), array.shape, element)
        self._materialized[key] = (value, tensor)  # holding the value keeps its id from being reused
        return tensor

    def float_tensor(self, value, what):
        tensor = self.tensor(value)
        if tensor.element not in ("f32", "f16", "bf16"):
            raise FrontendError(f"{self.node.describe()}: {what} must be a float tensor, got {tensor.element}")
        return tensor

    def same_float(self, a, b):
        """Both operands as float tensors of one element type; a constant takes the other operand's type."""
        if isinstance(a, Const) and not isinstance(a, Weight) and isinstance(b, trace.Tensor):
            a = Const(a.array.astype(trace.DTYPES[b.element]))
        if isinstance(b, Const) and not isinstance(b, Weight) and isinstance(a, trace.Tensor):
            b = Const(b.array.astype(trace.DTYPES[a.element]))
        a, b = self.float_tensor(a, "input A"), self.float_tensor(b, "input B")
        if a.element != b.element:
            raise FrontendError(f"{self.node.describe()}: inputs have different types ({a.element} and {b.element})")
        return a, b

    def same_type(self, a, b, names=("input A", "input B")):
        """Both operands as tensors of one element type, any of kiln's (float, integer or bool); a constant takes
        the other operand's type."""
        if isinstance(a, Const) and not isinstance(a, Weight) and isinstance(b, trace.Tensor):
            a = Const(a.array.astype(trace.DTYPES[b.element]))
        if isinstance(b, Const) and not isinstance(b, Weight) and isinstance(a, trace.Tensor):
            b = Const(b.array.astype(trace.DTYPES[a.element]))
        a, b = self.tensor(a), self.tensor(b)
        if a.element != b.element:
            raise FrontendError(f"{self.node.describe()}: {names[0]} and {names[1]} have different types "
                                f"({a.element} and {b.element})")
        return a, b

    def tensor_proto_array(self, proto):
        return _to_array(proto)


def _to_array(proto, base_dir=None):
    from onnx import numpy_helper
    if base_dir is not None:
        return numpy_helper.to_array(proto, base_dir=str(base_dir))
    return numpy_helper.to_array(proto)


def _initializer_array(init, base_dir=None):
    """An initializer's data as a numpy array; FrontendError naming it when its bytes do not make one."""
    try:
        return _to_array(init, base_dir)
    except Exception as error:
        raise FrontendError(f"initializer '{init.name}': cannot read its data ({error})") from None


def load_model(source):
    """A ModelProto and the folder its external data is read from (None when there is none) from a path, a
    ModelProto or the model's serialized bytes; errors name the file."""
    import onnx
    if isinstance(source, onnx.ModelProto):
        return source, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        where = f"<{len(source)} bytes>"
        try:
            model = onnx.load_model_from_string(bytes(source))
        except Exception as error:  # the protobuf parser raises DecodeError and friends
            raise FrontendError(f"{where}: not a readable ONNX model ({type(error).__name__}: {error})") from None
        if not model.graph.node and not model.graph.output:
            raise FrontendError(f"{where}: the bytes hold no ONNX graph")
        return model, None
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"an ONNX model is a path, a ModelProto or its serialized bytes, got "
                        f"{type(source).__name__}")
    path = Path(source)
    if path.is_dir():
        raise FrontendError(f"{path}: a directory, not an ONNX model file")
    if not path.is_file():
        raise FrontendError(f"{path}: no such file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # the protobuf parser raises DecodeError and friends
        raise FrontendError(f"{path}: not a readable ONNX model ({type(error).__name__}: {error})") from None
    if not model.graph.node and not model.graph.output:
        raise FrontendError(f"{path}: the file holds no ONNX graph")
    return model, path.parent


def supported_opsets():
    """Default-domain opsets the importer reads: 13 up to the newest the installed onnx release defines. A newer
    release may revise an operator; ``outdated_ops`` then names the nodes whose operator version is newer than
    the one its emitter follows, so the range can follow the release without reading a revision wrongly."""
    import onnx.defs
    return range(OLDEST_OPSET, onnx.defs.onnx_opset_version() + 1)


def outdated_ops(graph, opset):
    """'OpType-version (node name)' for every default-domain node whose operator, at ``opset``, is a revision
    newer than the one the importer follows."""
    import onnx.defs
    found = []
    for index, proto in enumerate(graph.node):
        if proto.domain not in ("", "ai.onnx") or proto.op_type not in SCHEMAS:
            continue
        try:
            version = onnx.defs.get_schema(proto.op_type, opset, "").since_version
        except onnx.defs.SchemaError:  # not defined at this opset: read as the revision the importer follows
            continue
        if version > SCHEMAS[proto.op_type]:
            found.append(f"{proto.op_type}-{version} (node '{Node(proto, index).name}')")
    return found


def _opset(model):
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    raise FrontendError("the model declares no default-domain opset")


def unsupported_ops(graph):
    """'OpType (node name)' for every node the importer has no rule for."""
    found = []
    for index, proto in enumerate(graph.node):
        node = Node(proto, index)
        if proto.domain not in _DOMAINS or proto.op_type not in OPS:
            domain = f"{proto.domain}." if proto.domain not in ("", "ai.onnx") else ""
            found.append(f"{domain}{proto.op_type} (node '{node.name}')")
    return found


def _input_shape(value, overrides):
    if value.name in overrides:
        return overrides[value.name]
    dims = []
    for i, dim in enumerate(value.type.tensor_type.shape.dim):
        if dim.HasField("dim_value"):
            dims.append(dim.dim_value)
        else:
            name = dim.dim_param or "?"
            raise FrontendError(f"input '{value.name}' has a symbolic dimension '{name}' (dim {i}); pass "
                                f"input_shapes={{'{value.name}': (...)}} to fix it")
    return tuple(dims)


def import_onnx(source, *, weights="constants", input_shapes=None, name="main"):
    """Imports an ONNX model (path, ModelProto or serialized bytes) as one kiln function ``@name``.

    ``weights="constants"`` writes the initializers into the IR; ``"arguments"`` makes every float initializer
    the program reads a function argument after the graph inputs (for large models, and for weights that live
    on the device). ``input_shapes`` pins symbolic input dimensions. Raises ``FrontendError`` naming the file,
    input or node at fault; every unsupported operator is listed in one error.
    """
    from onnx import helper
    if weights not in ("constants", "arguments"):
        raise ValueError(f"weights must be 'constants' or 'arguments', got {weights!r}")
    model, base_dir = load_model(source)
    opset = _opset(model)
    opsets = supported_opsets()
    if opset not in opsets:
        raise FrontendError(f"opset {opset} is not supported (opsets {opsets.start}-{opsets.stop - 1})")
    graph_proto = model.graph
    missing = unsupported_ops(graph_proto)
    if missing:
        raise FrontendError(f"{len(missing)} unsupported operator(s): " + ", ".join(missing))
    outdated = outdated_ops(graph_proto, opset)
    if outdated:
        raise FrontendError(f"{len(outdated)} operator revision(s) newer than the importer reads: "
                            + ", ".join(outdated))
    overrides = {k: tuple(v) for k, v in (input_shapes or {}).items()}

    env = {}
    for init in graph_proto.initializer:
        dtype = _initializer_dtype(init)
        external = init.data_location == init.EXTERNAL
        float_weight = weights == "arguments" and ELEMENTS.get(dtype) in ("f32", "f16", "bf16") and len(init.dims)
        if float_weight:
            array = None if external else _initializer_array(init)
            env[init.name] = Weight(init.name, array, tuple(init.dims), dtype)
        else:
            if external and base_dir is None:
                raise FrontendError(f"initializer '{init.name}' keeps its data in an external file; load the model "
                                    f"from its path")
            env[init.name] = Const(_initializer_array(init, base_dir if external else None))

    graph = trace.Graph()
    params, inputs = [], []
    for value in graph_proto.input:
        if value.name in env:
            continue
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            raise FrontendError(f"input '{value.name}' is of ONNX type {kind or 'unknown'}; kiln takes tensors only")
        dtype = _onnx_dtype(value.type.tensor_type.elem_type, f"input '{value.name}'")
        element = ELEMENTS.get(dtype)
        if element is None:
            raise FrontendError(f"input '{value.name}' has dtype {dtype}, which kiln has no type for")
        shape = _input_shape(value, overrides)
        tensor = trace.Tensor(graph, f"%arg{len(params)}", shape, element)
        params.append(tensor)
        inputs.append((value.name, dtype, shape))
        env[value.name] = tensor
    unknown = set(overrides) - {name for name, _, _ in inputs}
    if unknown:
        raise FrontendError(f"input_shapes names {sorted(unknown)}, which are not graph inputs")

    ctx = _Context(graph, opset, weights == "arguments")
    for index, proto in enumerate(graph_proto.node):
        ctx.node = Node(proto, index)
        args = []
        for input_name in proto.input:
            if input_name == "":
                args.append(None)
            elif input_name not in env:
                raise FrontendError(f"{ctx.node.describe()}: input '{input_name}' is not defined before it")
            else:
                args.append(env[input_name])
        while args and args[-1] is None:
            args.pop()
        args = _resolve_weights(ctx, args)
        try:
            results = OPS[proto.op_type](ctx, *args)
        except FrontendError:
            raise
        except TypeError as error:
            raise FrontendError(f"{ctx.node.describe()}: wrong number of inputs ({len(args)}): {error}") from None
        except (ValueError, IndexError, KeyError, AttributeError, RuntimeError, ArithmeticError) as error:
            # An operand the node cannot take (shapes that do not broadcast or reshape, an attribute out of
            # range, a constant it cannot fold): named by the node, with what numpy or the op's rule said.
            raise FrontendError(f"{ctx.node.describe()}: cannot import it: {type(error).__name__}: {error}") \
                from None
        used = [o for o in proto.output if o]
        if len(results) < len(used) and any(proto.output[len(results):]):
            raise FrontendError(f"{ctx.node.describe()}: only the first {len(results)} output(s) are supported")
        for output_name, result in zip(proto.output, results):
            if output_name:
                env[output_name] = result

    ctx.node = Node(helper.make_node("Return", [], [], name="return"), len(graph_proto.node))
    results, outputs = [], []
    for value in graph_proto.output:
        if value.name not in env:
            raise FrontendError(f"graph output '{value.name}' is never computed")
        tensor = ctx.tensor(env[value.name])
        results.append(tensor)
        outputs.append((value.name, trace.DTYPES[tensor.element], tensor.shape))

    weight_list = [(w.name, w.dtype, w.shape, w.array if w.has_data else None) for w, _ in ctx.arguments]
    signature = [f"{t.name}: {t.type}" for t in params] + [f"{t.name}: {t.type}" for _, t in ctx.arguments]
    types = ", ".join(t.type for t in results)
    body = "".join(f"  {line}\n" for line in graph.lines)
    text = (f"func.func @{name}({', '.join(signature)}) -> ({types}) {{\n{body}"
            f"  return {', '.join(t.name for t in results)} : {types}\n}}\n")
    return ImportedGraph(text, inputs, outputs, weight_list)


def _resolve_weights(ctx, args):
    """Weights fold like constants when every input is constant and their data is at hand; otherwise they are
    tensors of the program (function arguments)."""
    weights = [a for a in args if isinstance(a, Weight)]
    if not weights:
        return args
    all_constant = all(a is None or isinstance(a, Const) for a in args)
    if all_constant and all(w.has_data for w in weights):
        return [Const(a.array) if isinstance(a, Weight) else a for a in args]
    return [ctx.tensor(a) if isinstance(a, Weight) else a for a in args]


def _bf16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def _onnx_dtype(elem_type, what):
    """The numpy dtype of an ONNX element type; FrontendError naming ``what`` for a type ONNX does not define."""
    from onnx import helper
    if elem_type == 16:
        return _bf16()
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        raise FrontendError(f"{what} has ONNX element type {elem_type}, which is not a tensor dtype") from None


def _initializer_dtype(init):
    return _onnx_dtype(init.data_type, f"initializer '{init.name}'")
