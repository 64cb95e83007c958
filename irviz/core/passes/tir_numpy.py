"""Run a small TensorIR function with numpy, bit for bit as its LLVM build would, or say it cannot.

FoldConstant builds every PrimFunc it folds with LLVM and JIT-compiles it: about 0.1 s each here,
whatever the function's size. After LegalizeOps, a model's constant masks and index tensors
(Longformer's sliding windows: `full`, `reshape`, `add`, `flip`, `where`, ...) are hundreds of
distinct one-block functions over a few hundred elements, so the step took half a minute.

The functions handled are what TOPI emits for injective ops: loop nests over spatial blocks whose
value is integer or float arithmetic, comparisons, casts, selects and loads. Each store is done
for the whole loop nest at once. Everything that could round or behave differently from the
compiled code is refused (`Unsupported`) and left to LLVM: reductions (their order), calls such
as exp or sqrt (libm against numpy), NaN reaching a comparison, min/max or cast, integer division
of negative numbers or by zero, out-of-range float-to-int casts, out-of-bounds loads, a store that
writes an element twice or leaves part of the output unwritten.
"""
from __future__ import annotations

import numpy as np
from tvm import s_tir, tirx

# past this many points in one loop nest, LLVM's build is no longer the larger cost
MAX_POINTS = 1 << 22


class Unsupported(Exception):
    """The function holds something this evaluator does not reproduce exactly."""


def _np_dtype(dtype) -> np.dtype:
    name = str(dtype)
    if name == "bool":
        return np.dtype(bool)
    try:
        out = np.dtype(name)
    except TypeError:
        raise Unsupported(f"dtype {name}") from None
    if out.kind not in "biuf":
        raise Unsupported(f"dtype {name}")
    return out


def _dtype_of(expr):
    ty = expr.ty
    return getattr(ty, "dtype", ty)


def _const_int(expr) -> int:
    if not isinstance(expr, tirx.IntImm):
        raise Unsupported("a symbolic loop bound or shape")
    return int(expr.value)


def _has_nan(*arrays) -> bool:
    return any(a.dtype.kind == "f" and bool(np.isnan(a).any()) for a in arrays)


class _Eval:
    def __init__(self, buffers: dict):
        self.buffers = buffers  # buffer Var -> numpy array
        self.written: dict = {}  # output buffer Var -> bool array of the elements stored

    # ---- statements -----------------------------------------------------------------------------

    def run(self, stmt, env: dict, shape: tuple) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            if env:
                raise Unsupported("a sequence inside a loop")
            for s in stmt.seq:
                self.run(s, env, shape)
        elif isinstance(stmt, s_tir.SBlockRealize):
            self._realize(stmt, env, shape)
        elif isinstance(stmt, tirx.For):
            lo, extent = _const_int(stmt.min), _const_int(stmt.extent)
            step = getattr(stmt, "step", None)
            if step is not None and _const_int(step) != 1:
                raise Unsupported("a loop step")
            new_shape = shape + (extent,)
            if int(np.prod(new_shape, dtype=np.int64)) > MAX_POINTS:
                raise Unsupported("a large loop nest")
            inner = {k: v[..., None] for k, v in env.items()}
            inner[stmt.loop_var] = np.arange(lo, lo + extent, dtype=_np_dtype(_dtype_of(stmt.loop_var)))
            self.run(stmt.body, inner, new_shape)
        elif isinstance(stmt, tirx.BufferStore):
            self._store(stmt, env, shape, None)
        else:
            raise Unsupported(type(stmt).__name__)

    def _realize(self, realize, env, shape):
        block = realize.block
        if block.init is not None or len(block.match_buffers):
            raise Unsupported("a reduction block")
        for buf in block.alloc_buffers:
            ty = buf.ty
            self.buffers[buf] = np.zeros([_const_int(d) for d in ty.shape], _np_dtype(ty.dtype))
        inner = dict(env)
        for iv, value in zip(block.iter_vars, realize.iter_values):
            if int(iv.iter_type) != 0:
                raise Unsupported("a reduction axis")
            inner[iv.var] = self.expr(value, env, None)
        mask = self.expr(realize.predicate, env, None)
        mask = None if mask.ndim == 0 and bool(mask) else np.broadcast_to(mask, shape)
        if isinstance(block.body, tirx.BufferStore):
            self._store(block.body, inner, shape, mask)
        elif shape == () and mask is None:  # the root block
            self.run(block.body, inner, shape)
        else:
            raise Unsupported("a block body other than one store")

    def _indices(self, buf, indices, env, mask, shape=None):
        data = self.buffers.get(buf)
        if data is None:
            raise Unsupported("a buffer the function does not take")
        if len(indices) != data.ndim:
            raise Unsupported("an index count other than the buffer's rank")
        arrays = [self.expr(ix, env, mask) for ix in indices]
        extra = ([np.empty(shape, bool)] if shape is not None else []) + ([mask] if mask is not None else [])
        arrays = np.broadcast_arrays(*arrays, *extra)[:len(indices)] if arrays else []
        out = []
        for dim, a in zip(data.shape, arrays):
            inside = (a >= 0) & (a < dim)
            ok = inside if mask is None else inside | ~mask
            if not bool(np.all(ok)):
                raise Unsupported("an index out of bounds")
            out.append(np.where(inside, a, 0).astype(np.int64))
        return data, tuple(out)

    def _store(self, store, env, shape, mask):
        data, idx = self._indices(store.buffer, store.indices, env, mask, shape)
        value = np.broadcast_to(self.expr(store.value, env, mask), shape)
        if value.dtype != data.dtype:
            raise Unsupported("a store of another dtype")
        if mask is not None:
            idx = tuple(i[mask] for i in idx)
            value = value[mask]
        flat = np.ravel_multi_index(idx, data.shape) if data.ndim else np.zeros(np.shape(value), np.int64)
        # a count per element, not np.unique: its hash set took 0.7 s per weight transpose of
        # BERT-base (2.4M elements), 80 s for the model's constant weights
        if np.size(flat) and int(np.bincount(np.ravel(flat), minlength=max(data.size, 1)).max()) > 1:
            raise Unsupported("a store that writes an element twice")
        data[idx] = value
        if store.buffer in self.written:
            self.written[store.buffer][idx] = True

    # ---- expressions ----------------------------------------------------------------------------

    def expr(self, e, env, mask) -> np.ndarray:
        with np.errstate(all="ignore"):
            out = self._expr(e, env, mask)
        want = _np_dtype(_dtype_of(e))
        if out.dtype != want:
            raise Unsupported(f"numpy gave {out.dtype} for {want}")
        return out

    def _expr(self, e, env, mask):
        T = tirx
        if isinstance(e, T.IntImm):
            return np.asarray(int(e.value), dtype=_np_dtype(_dtype_of(e)))
        if isinstance(e, T.FloatImm):
            return np.asarray(float(e.value), dtype=_np_dtype(_dtype_of(e)))
        if isinstance(e, T.Var):
            if e not in env:
                raise Unsupported(f"a free variable {e}")
            return env[e]
        if type(e).__name__ in ("TensorLoad", "BufferLoad"):
            buf = e.source if hasattr(e, "source") else e.buffer
            data, idx = self._indices(buf, e.indices, env, mask)
            return data[idx] if idx else np.asarray(data[()])
        if isinstance(e, T.Cast):
            return self._cast(self.expr(e.value, env, mask), _np_dtype(_dtype_of(e)))
        if isinstance(e, (T.Add, T.Sub, T.Mul)):
            a, b = self.expr(e.a, env, mask), self.expr(e.b, env, mask)
            op = {T.Add: np.add, T.Sub: np.subtract, T.Mul: np.multiply}[type(e)]
            return np.asarray(op(a, b))
        if isinstance(e, (T.Div, T.Mod, T.FloorDiv, T.FloorMod)):
            return self._divide(e, self.expr(e.a, env, mask), self.expr(e.b, env, mask), mask)
        if isinstance(e, (T.Min, T.Max)):
            a, b = self.expr(e.a, env, mask), self.expr(e.b, env, mask)
            if _has_nan(a, b):
                raise Unsupported("NaN in min/max")
            # the LLVM code is select(a < b, a, b) / select(a > b, a, b): keeps the sign of zero so
            return np.asarray(np.where(a < b, a, b) if isinstance(e, T.Min) else np.where(a > b, a, b))
        cmp = {T.EQ: np.equal, T.NE: np.not_equal, T.LT: np.less, T.LE: np.less_equal,
               T.GT: np.greater, T.GE: np.greater_equal}
        if type(e) in cmp:
            a, b = self.expr(e.a, env, mask), self.expr(e.b, env, mask)
            if _has_nan(a, b):
                raise Unsupported("NaN in a comparison")
            return np.asarray(cmp[type(e)](a, b))
        if isinstance(e, (T.And, T.Or)):
            a, b = self.expr(e.a, env, mask), self.expr(e.b, env, mask)
            return np.asarray(np.logical_and(a, b) if isinstance(e, T.And) else np.logical_or(a, b))
        if isinstance(e, T.Not):
            return np.asarray(np.logical_not(self.expr(e.a, env, mask)))
        bitwise = {T.BitwiseAnd: np.bitwise_and, T.BitwiseOr: np.bitwise_or, T.BitwiseXor: np.bitwise_xor}
        if type(e) in bitwise:
            return np.asarray(bitwise[type(e)](self.expr(e.a, env, mask), self.expr(e.b, env, mask)))
        if isinstance(e, T.BitwiseNot):
            return np.asarray(np.invert(self.expr(e.a, env, mask)))
        if isinstance(e, T.Select):
            c = self.expr(e.condition, env, mask)
            return np.asarray(np.where(c, self.expr(e.true_value, env, mask),
                                       self.expr(e.false_value, env, mask)))
        if isinstance(e, T.Let):
            inner = dict(env)
            inner[e.var] = self.expr(e.value, env, mask)
            return self.expr(e.body, inner, mask)
        if type(e).__name__ == "Call":
            return self._call(e, env, mask)
        raise Unsupported(type(e).__name__)

    def _call(self, e, env, mask):
        name = getattr(e.op, "name", "")
        if name in ("prim.if_then_else", "tirx.if_then_else"):
            # unlike Select, only the branch taken is evaluated: a pad's guarded load reads
            # out of bounds where the condition is false
            c = self.expr(e.args[0], env, mask)
            live = c if mask is None else c & mask
            t = self.expr(e.args[1], env, live)
            f = self.expr(e.args[2], env, ~c if mask is None else ~c & mask)
            return np.asarray(np.where(c, t, f))
        if name in ("prim.likely", "tirx.likely"):
            return self.expr(e.args[0], env, mask)
        raise Unsupported(f"a call of {name}")

    @staticmethod
    def _cast(a, to):
        if a.dtype == to:
            return a
        if a.dtype.kind == "f":
            if _has_nan(a):
                raise Unsupported("NaN in a cast")
            if to.kind in "iu":
                info = np.iinfo(to)
                if a.size and (np.trunc(a).min() < info.min or np.trunc(a).max() > info.max):
                    raise Unsupported("a float cast out of its integer's range")
        return np.asarray(a.astype(to))

    @staticmethod
    def _divide(e, a, b, mask):
        T = tirx
        if a.dtype.kind == "f":
            if isinstance(e, T.Div):
                return np.asarray(np.true_divide(a, b))
            raise Unsupported("float floordiv/mod")
        live = b if mask is None else np.where(np.broadcast_to(mask, np.broadcast_shapes(b.shape, mask.shape)), b, 1)
        if bool(np.any(live == 0)):
            raise Unsupported("an integer division by zero")
        b = np.where(b == 0, 1, b).astype(b.dtype)
        if isinstance(e, (T.Div, T.Mod)) and (bool(np.any(a < 0)) or bool(np.any(b < 0))):
            raise Unsupported("a truncating division of a negative number")
        if isinstance(e, (T.Div, T.FloorDiv)):
            return np.asarray(np.floor_divide(a, b))
        return np.asarray(np.mod(a, b))


def run_prim_func(func, args: list[np.ndarray]) -> np.ndarray:
    """The output of the destination-passing `func` (inputs then one output) on `args`, computed
    with numpy; raises Unsupported when that would not match its compiled code exactly."""
    params = list(func.params)
    if len(params) != len(args) + 1:
        raise Unsupported("parameters besides the inputs and one output")
    buffers = {}
    for p, a in zip(params, args):
        ty = p.ty
        if not isinstance(ty, tirx.BufferType):
            raise Unsupported("a scalar parameter")
        if tuple(_const_int(d) for d in ty.shape) != a.shape or _np_dtype(ty.dtype) != a.dtype:
            raise Unsupported("an argument whose shape or dtype differs from the parameter's")
        buffers[p] = a
    out_p = params[-1]
    if not isinstance(out_p.ty, tirx.BufferType):
        raise Unsupported("a scalar output")
    out_shape = tuple(_const_int(d) for d in out_p.ty.shape)
    out = np.zeros(out_shape, _np_dtype(out_p.ty.dtype))
    buffers[out_p] = out
    ev = _Eval(buffers)
    ev.written[out_p] = np.zeros(out_shape, bool)
    ev.run(func.body, {}, ())
    if not bool(ev.written[out_p].all()):
        raise Unsupported("an output not written everywhere")
    return out
