"""score_mod and mask_mod: Python functions traced into an attention's scalar regions (FlexAttention style).

``kiln.ops.attention(q, k, v, score_mod=f, mask_mod=g)`` takes torch's flex_attention functions:
``f(score, b, h, q_idx, kv_idx)`` returns the new score, ``g(b, h, q_idx, kv_idx)`` whether key ``kv_idx`` is
visible to query ``q_idx``. Each is called once, at trace time, on ``Scalar`` stand-ins; the operations it applies
(``+ - * /``, comparisons, ``& | ~``, ``abs``, ``kiln.tanh``, ``kiln.exp``, ``kiln.where``, and indexing a table)
are written into the op's ``score_mod`` / ``mask_mod`` region, which the compiler fuses into the attention kernel.
Tables the functions read (closure variables or globals holding arrays: an ALiBi slope per head, a bias table,
document ids) become the op's mod operands, passed on every call, so new values need no recompile; a table read
outside its bounds gives 0 (false). Positions are ``index`` scalars, the score ``f32``, a visibility ``i1``; an
integer table element reads as an index, a float one as f32.
"""

import math
import numbers
import sys
import types

import numpy as np

_INDEX, _F32, _I1 = "index", "f32", "i1"
_INT_COMPARE = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}
_FLOAT_COMPARE = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}


class Region:
    """The body of one region being traced: its lines and fresh value names."""

    def __init__(self, prefix):
        self.prefix, self.lines, self.count = prefix, [], 0

    def emit(self, text, kind):
        name = f"%{self.prefix}{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {text}")
        return Scalar(self, name, kind)

    def constant(self, value, kind):
        if kind == _F32:
            value = float(value)
            # inf and nan have no decimal literal in MLIR: their f32 bit pattern.
            literal = f"{value:.9e}" if math.isfinite(value) else \
                "0x" + np.array(value, np.float32).view(np.uint32).item().to_bytes(4, "big").hex().upper()
            return self.emit(f"arith.constant {literal} : f32", _F32)
        if kind == _I1:
            return self.emit(f"arith.constant {'true' if value else 'false'}", _I1)
        return self.emit(f"arith.constant {int(value)} : index", _INDEX)


class Scalar:
    """A scalar value of a mod region: the score (f32), a position (index), a visibility (i1)."""

    def __init__(self, region, name, kind):
        self.region, self.name, self.kind = region, name, kind

    def __repr__(self):
        return f"kiln.mods.Scalar({self.name}: {self.kind})"

    def __bool__(self):
        raise TypeError("a score_mod or mask_mod value has no truth value while it is traced; combine conditions "
                        "with & | ~ and choose values with kiln.where instead of and/or/if")

    def __index__(self):
        raise TypeError("a traced position cannot index a Python sequence or a numpy array here; read tables that "
                        "the function closes over (they become the attention's mod operands)")

    # Arithmetic: index with index stays index; anything with a float is f32.
    def _arith(self, other, op, reverse=False):
        lhs, rhs = _coerce(self, other)
        if reverse:
            lhs, rhs = rhs, lhs
        if lhs.kind == _I1 or rhs.kind == _I1:
            raise TypeError(f"a visibility (i1) takes & | ~, not arithmetic ({op})")
        if lhs.kind == _INDEX and rhs.kind == _INDEX and op != "div":
            return self.region.emit(f"arith.{op}i {lhs.name}, {rhs.name} : index", _INDEX)
        lhs, rhs = _to_f32(lhs), _to_f32(rhs)
        return self.region.emit(f"arith.{op}f {lhs.name}, {rhs.name} : f32", _F32)

    def __add__(self, other):
        return self._arith(other, "add")

    def __radd__(self, other):
        return self._arith(other, "add", reverse=True)

    def __sub__(self, other):
        return self._arith(other, "sub")

    def __rsub__(self, other):
        return self._arith(other, "sub", reverse=True)

    def __mul__(self, other):
        return self._arith(other, "mul")

    def __rmul__(self, other):
        return self._arith(other, "mul", reverse=True)

    def __truediv__(self, other):
        return self._arith(other, "div")

    def __rtruediv__(self, other):
        return self._arith(other, "div", reverse=True)

    def __floordiv__(self, other):
        lhs, rhs = _coerce(self, other)
        if lhs.kind != _INDEX or rhs.kind != _INDEX:
            raise TypeError("// takes positions (index values); divide scores with /")
        return self.region.emit(f"arith.floordivsi {lhs.name}, {rhs.name} : index", _INDEX)

    def __neg__(self):
        return self._arith(0, "sub", reverse=True)

    def __abs__(self):
        if self.kind == _F32:
            return self.region.emit(f"math.absf {self.name} : f32", _F32)
        if self.kind == _INDEX:
            return where(self < 0, -self, self)
        raise TypeError("abs takes a score or a position")

    # Comparisons give a visibility (i1).
    def _compare(self, other, op):
        lhs, rhs = _coerce(self, other)
        if lhs.kind == _INDEX and rhs.kind == _INDEX:
            return self.region.emit(f"arith.cmpi {_INT_COMPARE[op]}, {lhs.name}, {rhs.name} : index", _I1)
        if _I1 in (lhs.kind, rhs.kind):
            raise TypeError(f"a visibility (i1) is not compared with {op}")
        lhs, rhs = _to_f32(lhs), _to_f32(rhs)
        return self.region.emit(f"arith.cmpf {_FLOAT_COMPARE[op]}, {lhs.name}, {rhs.name} : f32", _I1)

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    def __eq__(self, other):
        return self._compare(other, "==")

    def __ne__(self, other):
        return self._compare(other, "!=")

    __hash__ = None

    # Logic on visibilities.
    def _logic(self, other, op):
        lhs, rhs = _coerce(self, other)
        if lhs.kind != _I1 or rhs.kind != _I1:
            raise TypeError(f"& | ^ combine visibilities (comparisons), got {lhs.kind} and {rhs.kind}")
        return self.region.emit(f"arith.{op} {lhs.name}, {rhs.name} : i1", _I1)

    def __and__(self, other):
        return self._logic(other, "andi")

    __rand__ = __and__

    def __or__(self, other):
        return self._logic(other, "ori")

    __ror__ = __or__

    def __xor__(self, other):
        return self._logic(other, "xori")

    __rxor__ = __xor__

    def __invert__(self):
        return self._logic(True, "xori")


class Table:
    """A tensor a mod function reads (a mod operand): ``table[i, j]`` with positions or ints."""

    def __init__(self, region, name, shape, element):
        self.region, self.name, self.shape, self.element = region, name, tuple(shape), element

    @property
    def type(self):
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.element + ">"

    def __getitem__(self, indices):
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise IndexError(f"a table of shape {self.shape} takes {len(self.shape)} indices, got {len(indices)}")
        names = []
        for index in indices:
            if isinstance(index, Scalar):
                if index.kind != _INDEX:
                    raise TypeError(f"a table index must be a position or an int, got a {index.kind} value")
                names.append(index.name)
            elif isinstance(index, numbers.Integral) and not isinstance(index, bool):
                names.append(self.region.constant(index, _INDEX).name)
            else:
                raise TypeError(f"a table index must be a position or an int, got {type(index).__name__}")
        value = self.region.emit(f"tensor.extract {self.name}[{', '.join(names)}] : {self.type}", self.element)
        if self.element in ("f16", "bf16"):
            return self.region.emit(f"arith.extf {value.name} : {self.element} to f32", _F32)
        if self.element in ("i32", "i64"):
            return self.region.emit(f"arith.index_cast {value.name} : {self.element} to index", _INDEX)
        return Scalar(self.region, value.name, _I1 if self.element == "i1" else _F32)


def _coerce(lhs, rhs):
    """Both operands as Scalars of one region; a Python number takes the other's kind (a float makes f32)."""
    region = lhs.region if isinstance(lhs, Scalar) else rhs.region

    def scalar(value, like):
        if isinstance(value, Scalar):
            return value
        if isinstance(value, bool):
            return region.constant(value, _I1)
        if isinstance(value, numbers.Integral):
            return region.constant(value, _F32 if like.kind == _F32 else _INDEX)
        if isinstance(value, numbers.Real):
            return region.constant(value, _F32)
        raise TypeError(f"a score_mod or mask_mod value combines with numbers and traced values, got "
                        f"{type(value).__name__}")

    return scalar(lhs, rhs), scalar(rhs, lhs)


def _to_f32(value):
    """A position as f32, through i32 (positions fit; a GPU converts 32-bit integers at full rate, 64-bit ones
    slowly)."""
    if value.kind == _F32:
        return value
    narrow = value.region.emit(f"arith.index_cast {value.name} : index to i32", "i32")
    return value.region.emit(f"arith.sitofp {narrow.name} : i32 to f32", _F32)


def where(condition, a, b):
    """``a`` where ``condition`` holds, else ``b`` (a traced select)."""
    if not isinstance(condition, Scalar) or condition.kind != _I1:
        raise TypeError("kiln.where takes a visibility (a comparison) as its condition")
    if not isinstance(a, Scalar) and not isinstance(b, Scalar):
        both_ints = all(isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in (a, b))
        a = condition.region.constant(a, _INDEX if both_ints else _F32)
    a, b = _coerce(a, b)
    if a.kind != b.kind and _I1 in (a.kind, b.kind):
        raise TypeError(f"kiln.where chooses between two visibilities or two numbers, got {a.kind} and {b.kind}")
    if a.kind != b.kind:
        a, b = _to_f32(a), _to_f32(b)
    return condition.region.emit(f"arith.select {condition.name}, {a.name}, {b.name} : {a.kind}", a.kind)


def unary(name, x):
    """math.<name> of a traced f32 value (kiln.tanh, kiln.exp inside a score_mod)."""
    return x.region.emit(f"math.{name} {_to_f32(x).name} : f32", _F32)


#: The attribute promise_nondecreasing sets on a mask_mod: the tables it promises.
_NONDECREASING = "kiln_nondecreasing_tables"


def promise_nondecreasing(mask_mod, *tables):
    """Promises that each of ``tables``, 1-D integer tables with at least one entry per query that ``mask_mod``
    reads, never decreases: a bound ``kv_idx >= t[q_idx]`` or ``kv_idx <= t[q_idx]`` then limits each query tile's
    keys (the key tiles outside are skipped, as for linear bounds; packed sequences and document spans are such
    tables), and so does ``t[q_idx + c] == t[kv_idx]`` where t has an entry for every key (document ids: each
    query tile searches t for its documents' first and last keys). Tables readable on the host (numpy arrays, CPU
    tensors) are checked here, a ValueError naming the first decrease; a CUDA tensor or a traced one is taken at
    its word, and a table that decreases then gives wrong results. Returns ``mask_mod``."""
    if not isinstance(mask_mod, types.FunctionType):
        raise TypeError(f"promise_nondecreasing takes the mask_mod function first, got {type(mask_mod).__name__}")
    for position, table in enumerate(tables):
        host = table if isinstance(table, np.ndarray) else None
        if host is None and hasattr(table, "device") and getattr(table.device, "type", None) == "cpu":
            host = table.numpy()
        if host is None:
            continue
        if host.ndim != 1 or host.dtype.kind not in "iu":
            raise ValueError(f"promise_nondecreasing: table {position} must be a 1-D integer array, got "
                             f"{host.dtype} of shape {host.shape}")
        falls = np.flatnonzero(np.diff(host) < 0)
        if falls.size:
            at = int(falls[0])
            raise ValueError(f"promise_nondecreasing: table {position} decreases at entry {at + 1} "
                             f"({host[at]} then {host[at + 1]})")
    setattr(mask_mod, _NONDECREASING, tuple(tables))
    return mask_mod


def nondecreasing_positions(mask_mod, found):
    """The positions in ``found`` (the mod operands, as captured() orders them) of the tables ``mask_mod``
    promises are nondecreasing."""
    promised = getattr(mask_mod, _NONDECREASING, ()) if mask_mod is not None else ()
    return tuple(i for i, value in enumerate(found) if any(value is table for table in promised))


def captured(functions, kinds):
    """The values of ``kinds`` the functions read from their closures and globals, each once, in a fixed order."""
    seen, found = set(), []
    for fn in functions:
        if fn is None:
            continue
        for value in free_values(fn).values():
            if isinstance(value, kinds) and id(value) not in seen:
                seen.add(id(value))
                found.append(value)
    return found


def free_values(fn):
    """The closure variables and the globals ``fn`` names, by name."""
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"score_mod and mask_mod must be Python functions (def or lambda), got "
                        f"{type(fn).__name__}")
    values = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # a cell not yet assigned
            pass
    for name in fn.__code__.co_names:
        if name in fn.__globals__ and name not in values:
            values[name] = fn.__globals__[name]
    return values


def rebind(fn, replace):
    """``fn`` with the closure variables and globals whose value ``replace`` maps (by id) replaced."""
    closure = None
    if fn.__closure__:
        closure = tuple(types.CellType(replace.get(id(cell.cell_contents), cell.cell_contents))
                        if _assigned(cell) else cell for cell in fn.__closure__)
    namespace = fn.__globals__
    swapped = {name: replace[id(namespace[name])] for name in fn.__code__.co_names
               if name in namespace and id(namespace[name]) in replace}
    if swapped:
        namespace = dict(namespace, **swapped)
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, closure)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def _assigned(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def table_kinds(tensor_type):
    """The kinds of value a mod function may read as a table: traced tensors, numpy arrays, torch tensors."""
    kinds = [tensor_type, np.ndarray]
    torch = sys.modules.get("torch")
    if torch is not None:
        kinds.append(torch.Tensor)
    return tuple(kinds)


def trace_region(fn, kind, prefix, pairs):
    """The text of a score_mod (``kind`` "score") or mask_mod ("mask") region: ``^bb0(...)`` and its body. ``pairs``
    holds each value the mods read (closure or global) with the traced tensor passed for it, the mod operands in
    order: their block arguments follow the positions."""
    region = Region(prefix)
    leading = [("s", _F32)] if kind == "score" else []
    leading += [("b", _INDEX), ("h", _INDEX), ("q", _INDEX), ("kv", _INDEX)]
    arguments = [Scalar(region, f"%{prefix}_{name}", kind_) for name, kind_ in leading]
    tables = [Table(region, f"%{prefix}_t{i}", t.shape, t.element) for i, (_, t) in enumerate(pairs)]
    result = rebind(fn, {id(value): table for (value, _), table in zip(pairs, tables)})(*arguments)
    want = _F32 if kind == "score" else _I1
    what = "score_mod must return the new score (a number or a traced value)" if kind == "score" else \
        "mask_mod must return a visibility (a comparison, or a combination of them with & | ~)"
    if isinstance(result, bool) and kind == "mask":
        result = region.constant(result, _I1)
    elif isinstance(result, numbers.Real) and not isinstance(result, bool) and kind == "score":
        result = region.constant(result, _F32)
    if not isinstance(result, Scalar):
        raise TypeError(f"{what}, got {type(result).__name__}")
    if kind == "score" and result.kind == _INDEX:
        result = _to_f32(result)
    if result.kind != want:
        raise TypeError(f"{what}, got a {result.kind} value")
    block_args = [f"{a.name}: {a.kind}" for a in arguments] + [f"{t.name}: {t.type}" for t in tables]
    body = "".join(f"  {line}\n" for line in region.lines)
    return f"{{\n^bb0({', '.join(block_args)}):\n{body}  kiln.yield {result.name} : {want}\n}}"
