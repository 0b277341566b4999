"""A mutation fuzzer over the ONNX importer: models it must import or refuse with a FrontendError.

Why: ONNX files come from exporters, hand-written graphs and bug reports; the importer must turn every model it
cannot use into a FrontendError naming the node, input or file at fault, never an IndexError from deep inside, a
hang or a crash. Each run takes the example blocks (examples/onnx_blocks.py: GPT-2 and Llama style, f32 and bf16,
written node by node as exporters write them) and applies one to three structural edits to a copy: another
operator type, inputs dropped, renamed, emptied or added, attributes set to extreme values or removed, initializer
dims, dtypes and bytes changed, graph input dtypes and shapes changed, the opset moved, nodes deleted, swapped or
duplicated, a graph output renamed, or the serialized bytes cut or flipped. Every edited model goes through
``frontend.import_onnx``; anything but a result or a FrontendError is a finding, reported with the seed that
replays it, and so is a result whose kiln IR ``kiln-opt`` (when given) does not parse and verify.

``PYTHONPATH=build/python python3 test/Integration/frontend/onnx_fuzz.py [--seconds N] [--seed S] [--kiln-opt
build/bin/kiln-opt]`` runs it (scripts/fuzz.sh SECONDS onnx); test_onnx_fuzz.py runs a bounded number of draws in
``make test``.
"""
import argparse
import copy
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2] / "examples"))

import onnx  # noqa: E402
from onnx import TensorProto  # noqa: E402

import onnx_blocks  # noqa: E402
from kiln import frontend  # noqa: E402
from kiln.frontend.onnx_import import OPS  # noqa: E402

EXTREME_INTS = [0, -1, 1, 2, 3, -4, 7, 2 ** 31, -2 ** 31, 2 ** 62, -2 ** 63 + 1]
EXTREME_FLOATS = [0.0, -0.0, 1e-45, 1e38, float("inf"), float("-inf"), float("nan")]
ELEM_TYPES = [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE, TensorProto.INT64,
              TensorProto.INT32, TensorProto.INT8, TensorProto.UINT8, TensorProto.BOOL, TensorProto.STRING, 0]


def seed_models():
    """The models every draw starts from: small enough to import in milliseconds."""
    return [onnx_blocks.gpt2_block(batch=1, seq=4, hidden=16, heads=2)[0],
            onnx_blocks.gpt2_block(batch=2, seq=5, hidden=32, heads=4, layer_norm_op=True)[0],
            onnx_blocks.llama_block(batch=1, seq=6, hidden=32, heads=4, kv_heads=2, mlp=48)[0],
            onnx_blocks.llama_block(batch=1, seq=3, hidden=32, heads=2, kv_heads=1, mlp=40, dtype="bfloat16")[0]]


def _value_names(graph):
    names = [v.name for v in graph.input] + [i.name for i in graph.initializer]
    for node in graph.node:
        names += [o for o in node.output if o]
    return names


def _edit_node(model, rng):
    graph = model.graph
    if not graph.node:
        return "no node"
    node = rng.choice(graph.node)
    choice = rng.randrange(7)
    if choice == 0:
        node.op_type = rng.choice(sorted(OPS))
        return f"node {node.name} became {node.op_type}"
    if choice == 1 and node.input:
        del node.input[rng.randrange(len(node.input))]
        return f"node {node.name} lost an input"
    if choice == 2 and node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice(["", "undefined_value"] + _value_names(graph))
        return f"node {node.name} reads another input"
    if choice == 3:
        node.input.append(rng.choice(_value_names(graph)))
        return f"node {node.name} got an extra input"
    if choice == 4 and node.attribute:
        del node.attribute[rng.randrange(len(node.attribute))]
        return f"node {node.name} lost an attribute"
    if choice == 5 and node.attribute:
        attribute = rng.choice(node.attribute)
        if attribute.type == onnx.AttributeProto.INT:
            attribute.i = rng.choice(EXTREME_INTS)
        elif attribute.type == onnx.AttributeProto.FLOAT:
            attribute.f = rng.choice(EXTREME_FLOATS)
        elif attribute.type == onnx.AttributeProto.INTS:
            del attribute.ints[:]
            attribute.ints.extend(rng.choice(EXTREME_INTS) for _ in range(rng.randrange(6)))
        elif attribute.type == onnx.AttributeProto.TENSOR:
            attribute.t.dims.append(rng.choice([0, 2, 3]))
        return f"node {node.name} attribute {attribute.name} changed"
    name = rng.choice(["axis", "perm", "keepdims", "alpha", "epsilon", "to", "mode", "transB"])
    value = rng.choice(EXTREME_INTS + [[1, 0], [0, 2, 1, 3], "linear"])
    node.attribute.append(onnx.helper.make_attribute(name, value))
    return f"node {node.name} got attribute {name}={value!r}"


def _edit_initializer(model, rng):
    if not model.graph.initializer:
        return "no initializer"
    init = rng.choice(model.graph.initializer)
    choice = rng.randrange(4)
    if choice == 0 and init.dims:
        init.dims[rng.randrange(len(init.dims))] = rng.choice([0, 1, 5, 2 ** 40])
    elif choice == 1:
        init.data_type = rng.choice(ELEM_TYPES)
    elif choice == 2 and init.raw_data:
        init.raw_data = init.raw_data[:rng.randrange(len(init.raw_data))]
    else:
        init.dims.append(rng.choice([1, 2]))
    return f"initializer {init.name} edit {choice}"


def _edit_input(model, rng):
    if not model.graph.input:
        return "no input"
    value = rng.choice(model.graph.input)
    tensor = value.type.tensor_type
    choice = rng.randrange(4)
    if choice == 0:
        tensor.elem_type = rng.choice(ELEM_TYPES)
    elif choice == 1 and tensor.shape.dim:
        dim = rng.choice(tensor.shape.dim)
        if rng.random() < 0.5:
            dim.dim_value = rng.choice([0, 1, 2 ** 40, 7])
        else:
            dim.dim_param = "n"
    elif choice == 2:
        tensor.shape.dim.add().dim_value = rng.choice([1, 3])
    else:
        tensor.ClearField("shape")
    return f"input {value.name} edit {choice}"


def _edit_graph(model, rng):
    graph = model.graph
    choice = rng.randrange(5)
    if choice == 0:
        model.opset_import[0].version = rng.randrange(1, 30)
        return f"opset {model.opset_import[0].version}"
    if choice == 1 and graph.node:
        del graph.node[rng.randrange(len(graph.node))]
        return "a node deleted"
    if choice == 2 and len(graph.node) > 1:
        i, j = rng.randrange(len(graph.node)), rng.randrange(len(graph.node))
        a, b = copy.deepcopy(graph.node[i]), copy.deepcopy(graph.node[j])
        graph.node[i].CopyFrom(b)
        graph.node[j].CopyFrom(a)
        return f"nodes {i} and {j} swapped"
    if choice == 3 and graph.node:
        graph.node.append(copy.deepcopy(rng.choice(graph.node)))
        return "a node duplicated"
    if graph.output:
        graph.output[0].name = rng.choice(_value_names(graph) + ["never_computed"])
    return "graph output renamed"


def mutate(model, rng):
    """A mutated copy of ``model`` (a ModelProto, or bytes when the serialization itself was cut or flipped) and
    the edits that made it."""
    edited = copy.deepcopy(model)
    edits = []
    for _ in range(rng.randrange(1, 4)):
        edits.append(rng.choice([_edit_node, _edit_node, _edit_initializer, _edit_input, _edit_graph])(edited, rng))
    if rng.random() < 0.1:
        data = bytearray(edited.SerializeToString())
        if rng.random() < 0.5:
            del data[rng.randrange(len(data)):]
        else:
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        edits.append("bytes cut or flipped")
        return bytes(data), edits
    return edited, edits


def run(draws=None, seconds=None, seed=None, models=None, kiln_opt=None):
    """Imports mutated models until ``draws`` or ``seconds`` run out; returns (draws, imported, refused,
    findings), each finding a (seed, edits, traceback) of an import that raised anything but a FrontendError, or
    that gave IR which ``kiln_opt`` (a kiln-opt binary, optional) rejects."""
    seed = random.randrange(2 ** 63) if seed is None else seed
    rng = random.Random(seed)
    models = models or seed_models()
    start = time.monotonic()
    count = imported = refused = 0
    findings = []
    while (draws is None or count < draws) and (seconds is None or time.monotonic() - start < seconds):
        draw_seed = rng.randrange(2 ** 63)
        draw_rng = random.Random(draw_seed)
        source, edits = mutate(draw_rng.choice(models), draw_rng)
        count += 1
        try:
            graph = frontend.import_onnx(source)
            imported += 1
            if kiln_opt:
                check = subprocess.run([str(kiln_opt), "-"], input=graph.text, capture_output=True, text=True)
                if check.returncode != 0:
                    findings.append((draw_seed, edits, "kiln-opt rejected the imported IR:\n" + check.stderr[-2000:]))
        except frontend.FrontendError:
            refused += 1
        except Exception:  # noqa: BLE001 - any other exception is what the fuzzer looks for
            findings.append((draw_seed, edits, traceback.format_exc(limit=4)))
    return count, imported, refused, findings


def replay(draw_seed, models=None):
    """The model one draw made (from its printed seed), to debug a finding."""
    draw_rng = random.Random(draw_seed)
    return mutate(draw_rng.choice(models or seed_models()), draw_rng)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--kiln-opt", default=None, help="check each imported model's IR with this kiln-opt")
    args = parser.parse_args()
    count, imported, refused, findings = run(seconds=args.seconds, seed=args.seed, kiln_opt=args.kiln_opt)
    print(f"onnx_fuzz: {count} mutated models, {imported} imported, {refused} refused with a FrontendError, "
          f"{len(findings)} finding(s) (another exception, or IR that kiln-opt rejects)")
    for draw_seed, edits, trace in findings[:20]:
        print(f"--- draw seed {draw_seed}: {'; '.join(edits)}\n{trace}")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
