"""ONNX's own backend node tests as a conformance check of the ONNX importer on the CPU host backend.

Why: the importer's operator table says which operators Kiln reads, but not whether each variant the ONNX
specification allows is read correctly. The onnx package carries a test case (a one-node model with inputs and
expected outputs) for most variants of every operator; ``collect_testcases`` builds them in memory. This file
keeps the cases built only from operators the importer lists (Kiln's operator table, default domain), imports and
compiles each for the host, runs it on every data set, and sorts it into exactly one outcome:

- **pass**: every output has the expected shape and dtype and is close to the expected values;
- **refused**: a ``FrontendError`` or ``CompileError`` whose message falls in one of the categories below (a
  refusal with a message no category knows fails the run, so a new kind of refusal is looked at; an opset from
  13 to the installed onnx release's newest is never one);
- **wrong** (an output that differs) or **crash** (any other exception): never; either fails the run.

Many cases feed axes, shapes, starts, split sizes, indices, positions and boolean masks as graph inputs, which
Kiln refuses (its programs have static shapes; it reads such values only as constants). So every case with such
integer or boolean inputs also runs a second time with them made initializers, which checks the importer's
constant path on the same expected outputs.

Tolerance, per output dtype, as ``np.testing.assert_allclose`` in float64: float32 and exact types take the
case's own rtol/atol (ONNX's defaults are 1e-3 and 1e-7); float16 rtol = atol = 5e-3 and bfloat16 2e-2 (or the
case's when larger): Kiln computes in f32 where the reference rounds every step to the half type.

With onnx 1.23.2 (opsets up to 28): 810 cases, 436 pass, none wrong; of the 147 second runs, 135 pass. The
whole file took 100 s on the 2-core build machine while a C++ build ran beside it: building the cases takes
11 s, and every case compiles its own program (an Attention case about 1 s).
"""

import re
import warnings
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from numerics import kiln  # noqa: F401  (the package under test, from the build)
from kiln.compiler import CompileError
from kiln.frontend import FrontendError, from_onnx, import_onnx, onnx_import
from kiln.frontend.onnx_import import OPS

#: Fewest cases that must pass, as given and with constant integer inputs; raise them when the importer learns
#: more.
MIN_PASSED = 436
MIN_PASSED_CONSTANT = 135
#: float16 / bfloat16 outputs: rtol = atol (at least the case's own).
HALF_TOLERANCES = {"float16": 5e-3, "bfloat16": 2e-2}

#: Refusal categories, each a pattern of the messages it covers; the first that matches names the refusal.
REFUSALS = {
    "opset older than 13": r"opset ([0-9]|1[0-2]) is not supported",
    "type kiln lacks (int8/16, unsigned, float64, 8/6/4/2-bit, sequence, optional)":
        r"kiln has no (type|such type)|must be a float tensor, got|cast of a runtime tensor from"
        r"|kiln takes tensors only",
    "Dropout in training mode": r"training_mode",
    "runtime-valued input (axes, shape, starts, split, nonpad_kv_seqlen)": r"must be a constant",
}


def _cases():
    """ONNX's node test cases whose every node is an operator the importer lists."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        cases = collect_testcases()
    return [case for case in cases
            if all(node.op_type in OPS and node.domain in ("", "ai.onnx") for node in case.model.graph.node)]


def _with_constant_integers(case):
    """The model and data with every integer and boolean input made an initializer (one data set only), or
    None when the case has no such input or nothing else."""
    if len(case.data_sets) != 1:
        return None
    inputs, expected = case.data_sets[0]
    arrays = [_array(value) for value in inputs]
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    fixed = [i for i, array in enumerate(arrays) if array.dtype.kind in "iub"]
    if not fixed or len(fixed) == len(arrays):
        return None
    graph.initializer.extend(numpy_helper.from_array(arrays[i], graph.input[i].name) for i in fixed)
    kept = [value for i, value in enumerate(graph.input) if i not in fixed]
    del graph.input[:]
    graph.input.extend(kept)
    return model, [([a for i, a in enumerate(arrays) if i not in fixed], expected)]


def _array(value):
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else np.asarray(value)


def _compare(actual, expected, rtol, atol):
    """None when ``actual`` matches ``expected``, else what differs."""
    actual, expected = np.asarray(actual), _array(expected)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"got {actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}"
    half = HALF_TOLERANCES.get(expected.dtype.name, 0.0)
    wide = (lambda a: a.astype(np.float64)) if expected.dtype.kind in "fV" else (lambda a: a)
    try:
        np.testing.assert_allclose(wide(actual), wide(expected), rtol=max(rtol, half), atol=max(atol, half))
    except AssertionError as error:
        return " ".join(str(error).split())[:300]
    return None


def _outcome(case, onnx_model, data_sets):
    """('pass', ''), ('refused', category + message), ('wrong', what differs) or ('crash', the exception)."""
    try:
        with np.errstate(all="ignore"):  # constants folded to inf or NaN on purpose (Log of 0, ...)
            return _run(case, onnx_model, data_sets)
    except (FrontendError, CompileError) as error:
        message = str(error)
        category = next((name for name, pattern in REFUSALS.items() if re.search(pattern, message)), None)
        if category is None:
            return "unclassified refusal", message
        return "refused", f"{category}: {message}"
    except Exception as error:  # anything else is a bug: the importer must refuse or run
        return "crash", f"{type(error).__name__}: {error}"


def _run(case, onnx_model, data_sets):
    """Imports, compiles and runs the model on each data set; ('pass', '') or ('wrong', what differs)."""
    model = from_onnx(onnx_model)
    names = [value.name for value in onnx_model.graph.input]
    for inputs, expected in data_sets:
        results = model(**{name: _array(value) for name, value in zip(names, inputs)})
        results = results if isinstance(results, tuple) else (results,)
        if len(results) != len(expected):
            return "wrong", f"{len(results)} outputs, expected {len(expected)}"
        for index, (actual, reference) in enumerate(zip(results, expected)):
            difference = _compare(actual, reference, case.rtol, case.atol)
            if difference:
                return "wrong", f"output {index}: {difference}"
    return "pass", ""


@pytest.fixture(scope="module")
def outcomes():
    """Each case's outcome as given and, where it has integer or boolean inputs, with them constant."""
    given, constant = {}, {}
    for case in _cases():
        given[case.name] = _outcome(case, case.model, case.data_sets)
        variant = _with_constant_integers(case)
        if variant is not None:
            constant[case.name] = _outcome(case, *variant)
    return {"as given": given, "integer inputs constant": constant}


@pytest.mark.parametrize("form", ["as given", "integer inputs constant"])
def test_no_case_is_wrong_or_crashes(outcomes, form):
    bad = {name: result for name, result in outcomes[form].items() if result[0] not in ("pass", "refused")}
    assert not bad, "\n".join(f"{name}: {kind}: {detail}" for name, (kind, detail) in sorted(bad.items()))


@pytest.mark.parametrize("form, least", [("as given", MIN_PASSED), ("integer inputs constant", MIN_PASSED_CONSTANT)])
def test_passed_cases(outcomes, form, least):
    counts = Counter(kind for kind, _ in outcomes[form].values())
    refusals = Counter(detail.split(":")[0] for kind, detail in outcomes[form].values() if kind == "refused")
    summary = f"{form}: {len(outcomes[form])} cases: {dict(counts)}; refusals: {dict(refusals)}"
    print(summary)
    assert counts["pass"] >= least, summary



def test_every_operator_follows_its_newest_revision():
    """Each operator's emitter follows the revision in effect at the installed onnx release's newest opset (an
    onnx upgrade that revises one fails here until the emitter is checked against it)."""
    newest = onnx.defs.onnx_opset_version()
    stale = {op: (version, onnx.defs.get_schema(op, newest, "").since_version)
             for op, version in onnx_import.SCHEMAS.items()
             if onnx.defs.get_schema(op, newest, "").since_version > version}
    assert not stale


def test_a_newer_operator_revision_is_refused_by_node(monkeypatch):
    monkeypatch.setitem(onnx_import.SCHEMAS, "Relu", 13)  # as if Relu-14 were newer than the emitter
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 14)])
    with pytest.raises(FrontendError, match=r"1 operator revision\(s\) newer than the importer reads: "
                                            r"Relu-14 \(node 'relu'\)"):
        import_onnx(model)
