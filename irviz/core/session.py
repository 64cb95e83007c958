"""A compilation session: the imported module, then one snapshot per applied pass.

    s = Session(imported, captured)          # steps[0] is "import", cursor 0
    s.set_pipeline(passes.get_pipeline("zero"))
    s.step_forward(); s.step_back(); s.jump(3); s.run_to_end()

Model of the session
--------------------
``steps`` are the snapshots recorded so far (``steps[0]`` is the import).  ``cursor`` is the step
shown.  ``pipeline`` is the list of *planned* passes that come after ``steps[-1]`` (not applied
yet).  So the whole pipeline is ``[s.pass_name for s in steps[1:]] + pipeline``.

* ``step_forward()``: if the cursor is behind ``steps[-1]`` it just moves to the next recorded
  snapshot; otherwise it applies ``pipeline[0]`` (``passes.apply_pass``), records a Step and moves
  there.  Returns the new current Step, or None (nothing left, or the pass failed).
* ``set_pipeline(invocations)`` replaces everything after the cursor ("replace the rest of the
  pipeline"): recorded steps after the cursor are dropped, except a leading run of them that is
  exactly the same passes with the same params as the start of ``invocations`` (those snapshots are
  still valid and are kept, so re-sending the same pipeline costs nothing).
* A failing pass leaves the session where it was (the last good step), sets ``error`` to a
  PassError, keeps the failed pass at the head of ``pipeline`` (fix it or change the pipeline) and
  notifies listeners with "error".  A later successful move clears ``error``.
* Every step keeps its own IRModule.  Passes return new modules that share unchanged functions
  with their input, so this costs little; modules are never copied (copy/deepcopy segfault).

Listeners: ``subscribe(callback)``; ``callback(event, payload)`` with events
"stepped" {"cursor", "step", "applied": bool}, "error" {"error", "pass", "cursor"},
"pipeline_changed" {"planned", "dropped", "kept"}.  A listener that raises is logged and ignored.

Provenance (fx node name -> binding var names of "main") is carried from step to step by
``carry_provenance`` (see there).
"""
from __future__ import annotations

import logging
import time
import traceback
import weakref
from collections import deque
from dataclasses import dataclass, field

from irviz.core import diff as diff_mod
from irviz.core.errors import IrvizError, PassError
from irviz.core.tvm_compat import relax, var_name

log = logging.getLogger(__name__)

__all__ = ["Step", "Session", "carry_provenance", "relax_to_callee"]


@dataclass
class Step:
    index: int
    pass_name: str
    params: dict
    seconds: float
    changed: bool
    changes: diff_mod.FunctionChanges
    mod: object  # tvm.IRModule
    provenance: dict[str, list[str]] = field(default_factory=dict)

    def __repr__(self) -> str:  # never print the module
        return (f"Step({self.index}, {self.pass_name!r}, params={self.params}, "
                f"seconds={self.seconds:.4f}, changed={self.changed})")


def _as_invocation(item):
    from irviz.core import passes

    if isinstance(item, passes.PassInvocation):
        return passes.PassInvocation(item.name, dict(item.params or {}))
    if isinstance(item, str):
        return passes.PassInvocation(item, {})
    if isinstance(item, dict):
        return passes.PassInvocation(item["name"], dict(item.get("params") or {}))
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return passes.PassInvocation(item[0], dict(item[1] or {}))
    raise TypeError(f"not a pass invocation: {item!r}")


class Session:
    def __init__(self, imported, captured=None, target=None):
        self.imported = imported
        self.captured = captured
        self._target = target
        mod = imported.mod
        self.steps: list[Step] = [Step(
            index=0, pass_name="import", params={"importer": getattr(imported, "importer", "")},
            seconds=float(getattr(imported, "seconds", 0.0) or 0.0), changed=True,
            changes=diff_mod.FunctionChanges(added=diff_mod.function_names(mod)), mod=mod,
            provenance={k: list(v) for k, v in (getattr(imported, "provenance", None) or {}).items()},
        )]
        self.cursor = 0
        self.pipeline: list = []
        self.error: IrvizError | None = None
        self._listeners: list = []
        # the hash/bindings caches keep functions (and their weights) alive: drop them with us
        weakref.finalize(self, _clear_caches)

    # -- info ----------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        loaded = getattr(self.captured, "loaded", None)
        return getattr(loaded, "name", None) or "module"

    @property
    def target(self):
        if self._target is None:
            from irviz.core.tvm_compat import host_target

            self._target = host_target()
        return self._target

    @property
    def current(self) -> Step:
        return self.steps[self.cursor]

    def module(self, i: int | None = None):
        return self.steps[self.cursor if i is None else i].mod

    def pipeline_remaining(self) -> int:
        """How many step_forward() calls can still move: recorded steps ahead + planned passes."""
        return (len(self.steps) - 1 - self.cursor) + len(self.pipeline)

    def full_pipeline(self) -> list:
        """Applied passes (steps[1:]) followed by the planned ones, as PassInvocations."""
        from irviz.core import passes

        return [passes.PassInvocation(s.pass_name, dict(s.params)) for s in self.steps[1:]] + list(self.pipeline)

    def diff(self, i: int, j: int):
        """(unified diff text, list[FunctionDiff]) from step i to step j."""
        a, b = self.steps[i].mod, self.steps[j].mod
        return diff_mod.unified_diff(a, b), diff_mod.side_by_side(a, b)

    def relax_to_callee(self, i: int | None = None, func: str = "main") -> dict[str, str]:
        return relax_to_callee(self.steps[self.cursor if i is None else i], func)

    # -- listeners -----------------------------------------------------------------------------

    def subscribe(self, callback):
        """callback(event: str, payload: dict). Returns a function that unsubscribes."""
        self._listeners.append(callback)

        def unsubscribe():
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def _emit(self, event: str, payload: dict):
        for cb in list(self._listeners):
            try:
                cb(event, payload)
            except Exception:  # noqa: BLE001 - a broken listener must not break the session
                log.exception("session listener failed on %s", event)

    # -- pipeline ------------------------------------------------------------------------------

    def set_pipeline(self, invocations) -> None:
        """Replace the passes after the cursor (see the module docstring)."""
        invs = [_as_invocation(x) for x in (invocations or [])]
        ahead = self.steps[self.cursor + 1:]
        kept = 0
        while (kept < len(ahead) and kept < len(invs) and ahead[kept].pass_name == invs[kept].name
               and ahead[kept].params == invs[kept].params):
            kept += 1
        dropped = len(ahead) - kept
        del self.steps[self.cursor + 1 + kept:]
        self.pipeline = invs[kept:]
        self.error = None
        self._emit("pipeline_changed", {"planned": list(self.pipeline), "dropped": dropped, "kept": kept})

    # -- moving --------------------------------------------------------------------------------

    def _moved(self, applied: bool) -> Step:
        self.error = None
        st = self.steps[self.cursor]
        self._emit("stepped", {"cursor": self.cursor, "step": st, "applied": applied})
        return st

    def _apply_next(self) -> Step | None:
        from irviz.core import passes

        inv = self.pipeline[0]
        prev = self.steps[-1]
        t0 = time.perf_counter()
        try:
            new_mod = passes.apply_pass(inv, prev.mod, self.target)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a PassError
            seconds = time.perf_counter() - t0
            if isinstance(exc, IrvizError):
                err = exc
            else:
                err = PassError(f"{inv.name} failed: {type(exc).__name__}: {exc}",
                                hint="step back, or change the pipeline",
                                detail="".join(traceback.format_exception(exc)))
            self.error = err
            self._emit("error", {"error": err, "pass": inv.name, "cursor": self.cursor,
                                 "seconds": seconds})
            return None
        seconds = time.perf_counter() - t0
        changes = diff_mod.compare_modules(prev.mod, new_mod)
        try:
            prov = carry_provenance(prev.mod, new_mod, prev.provenance)
        except Exception:  # noqa: BLE001 - provenance is a nicety, never fail a step for it
            log.exception("provenance after %s", inv.name)
            prov = {k: [] for k in prev.provenance}
        step = Step(index=len(self.steps), pass_name=inv.name, params=dict(inv.params or {}),
                    seconds=seconds, changed=changes.changed_any, changes=changes, mod=new_mod,
                    provenance=prov)
        self.steps.append(step)
        self.pipeline.pop(0)
        self.cursor = step.index
        return self._moved(applied=True)

    def step_forward(self) -> Step | None:
        if self.cursor < len(self.steps) - 1:
            self.cursor += 1
            return self._moved(applied=False)
        if not self.pipeline:
            return None
        return self._apply_next()

    def step_back(self) -> Step | None:
        if self.cursor == 0:
            return None
        self.cursor -= 1
        return self._moved(applied=False)

    def jump(self, i: int) -> Step | None:
        """Go to step i (negative counts from the end of the recorded steps).  An index past the
        recorded steps applies planned passes up to it; None if one fails (error is set)."""
        if i < 0:
            i += len(self.steps)
        last = len(self.steps) - 1 + len(self.pipeline)
        if not 0 <= i <= last:
            raise IndexError(f"no step {i}: steps 0..{len(self.steps) - 1}, "
                             f"{len(self.pipeline)} more planned")
        if i < len(self.steps):
            self.cursor = i
            return self._moved(applied=False)
        self.cursor = len(self.steps) - 1
        while len(self.steps) - 1 < i:
            if self._apply_next() is None:
                return None
        return self.current

    def run_to_end(self) -> Step | None:
        """Apply every planned pass; the cursor ends on the last step.  None if a pass fails."""
        if self.cursor < len(self.steps) - 1:
            self.cursor = len(self.steps) - 1
            self._moved(applied=False)
        while self.pipeline:
            if self._apply_next() is None:
                return None
        return self.current


# -------------------------------------------------------------------------------------------------
# provenance


def _func(mod, name="main"):
    for gv, f in mod.functions.items():
        if gv.name_hint == name:
            return f if isinstance(f, relax.Function) else None
    return None


def _clear_caches() -> None:
    _BINDINGS.clear()
    diff_mod.clear_caches()


def _relax_funcs(mod) -> dict:
    return {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, relax.Function)}


_BINDINGS: dict[int, tuple[object, list]] = {}  # function handle -> (function, bindings)


def _bindings(func) -> list:
    """Bindings of a Relax function's body, cached (reading TVM arrays item by item is slow)."""
    key = func.__chandle__()
    hit = _BINDINGS.get(key)
    if hit is not None:
        return hit[1]
    body = getattr(func, "body", None)
    out = [] if not isinstance(body, relax.SeqExpr) else [
        b for blk in list(body.blocks) for b in list(blk.bindings)]
    if len(_BINDINGS) > 512:
        _BINDINGS.clear()
    _BINDINGS[key] = (func, out)  # keeps func alive so the handle is not reused
    return out


def _h(obj) -> int:
    return obj.__chandle__()


def _used_vars(expr) -> list:
    out = []

    def visit(e):
        if isinstance(e, relax.Var):
            out.append(e)

    relax.analysis.post_order_visit(expr, visit)
    return out


def _signature(value):
    """(op name, callee name) of a binding value, to match a binding with its fused copy."""
    if isinstance(value, relax.Call):
        op = value.op
        opname = op.name_hint if isinstance(op, relax.GlobalVar) else getattr(op, "name", type(op).__name__)
        callee = None
        if value.args and isinstance(value.args[0], relax.GlobalVar):
            callee = value.args[0].name_hint
        return (str(opname), callee)
    return (type(value).__name__, None)


def carry_provenance(old_mod, new_mod, provenance: dict[str, list[str]]) -> dict[str, list[str]]:
    """Map provenance (fx node -> binding var names of old "main") onto new "main".

    Works on Var *identity*, not names (FuseOps re-uses names such as ``lv1`` for new vars):

    1. A binding var (or parameter) of old main that is still the same object in new main keeps
       its name there.
    2. Fusion: for a new binding that calls a Relax function of the new module (FuseOps,
       MatmulAddFuse, ...), the fused function's body still holds the *original* binding vars
       (same objects) of the group it replaced; they map to that new call binding.  The group's
       output binding becomes a fresh var inside the fused function; it is found as the old var
       that is not matched yet and consumes a member of the group (or, for a one-op group,
       consumes one of the call's inputs and has the same op as the fused body).
    3. Anything else that disappeared (folded by FoldConstant, aliases removed by FuseTIR, ...)
       maps to the nearest surviving binding downstream of it in the old graph (the binding that
       now contains its computation), else the nearest one upstream, else nothing.

    Keys are kept (a node whose bindings are all gone maps to []).
    """
    old_main, new_main = _func(old_mod), _func(new_mod)
    if new_main is None:
        return {k: [] for k in provenance}
    new_b = _bindings(new_main)
    new_names = {_h(b.var): var_name(b.var) for b in new_b}
    for p in new_main.params:
        new_names[_h(p)] = var_name(p)
    if old_main is None:
        present = set(new_names.values())
        return {k: [n for n in v if n in present] for k, v in provenance.items()}
    if old_main.same_as(new_main):
        return {k: list(v) for k, v in provenance.items()}

    old_b = _bindings(old_main)
    old_vars = [b.var for b in old_b]
    old_by_name: dict[str, object] = {}
    for v in list(old_main.params) + old_vars:
        old_by_name.setdefault(var_name(v), v)
    old_index = {_h(v): i for i, v in enumerate(old_vars)}
    deps: dict[int, list[int]] = {}
    users: dict[int, list[int]] = {}
    for b in old_b:
        hv = _h(b.var)
        ds = [_h(u) for u in _used_vars(b.value)]
        deps[hv] = ds
        for d in ds:
            users.setdefault(d, []).append(hv)

    mapping: dict[int, list[str]] = {}
    # 1. identity
    for v in list(old_main.params) + old_vars:
        hv = _h(v)
        if hv in new_names:
            mapping[hv] = [new_names[hv]]

    # 2. fusion groups
    groups = []  # (call var name, member handles, output signature, input old-handles)
    new_funcs = _relax_funcs(new_mod)
    for b in new_b:
        value = b.value
        if not (isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar)):
            continue
        callee = new_funcs.get(value.op.name_hint)
        if callee is None:
            continue
        inner = _bindings(callee)
        name = var_name(b.var)
        members = set()
        for ib in inner:
            hv = _h(ib.var)
            if hv in old_index and hv not in mapping:
                mapping[hv] = [name]
                members.add(hv)
        out_sig = _signature(inner[-1].value) if inner else None
        inputs = {_h(u) for u in _used_vars(value)}
        groups.append([name, members, out_sig, inputs, False])
    if groups:
        new_to_old: dict[str, set[int]] = {}
        for hv, names in mapping.items():
            for n in names:
                new_to_old.setdefault(n, set()).add(hv)
        old_value = {_h(b.var): b.value for b in old_b}
        progress = True
        while progress:
            progress = False
            for v in old_vars:
                hv = _h(v)
                if hv in mapping:
                    continue
                ds = set(deps.get(hv, ()))
                pick = None
                for g in groups:
                    if ds & g[1]:
                        pick = g
                        break
                if pick is None:
                    for g in groups:
                        if g[4] or g[1]:
                            continue
                        ins = set()
                        for hin in g[3]:
                            ins |= new_to_old.get(new_names.get(hin, ""), set())
                        if ds & ins and _signature(old_value[hv]) == g[2]:
                            pick = g
                            break
                if pick is not None:
                    mapping[hv] = [pick[0]]
                    pick[1].add(hv)
                    pick[4] = True
                    new_to_old.setdefault(pick[0], set()).add(hv)
                    progress = True

    # 3. nearest surviving binding downstream, else upstream
    def nearest(start: int, edges: dict) -> list[str] | None:
        seen, queue = {start}, deque(edges.get(start, ()))
        while queue:
            x = queue.popleft()
            if x in seen:
                continue
            seen.add(x)
            if x in mapping:
                return mapping[x]
            queue.extend(edges.get(x, ()))
        return None

    fallback: dict[int, list[str]] = {}
    for v in old_vars:
        hv = _h(v)
        if hv not in mapping:
            found = nearest(hv, users)
            if found is None:
                found = nearest(hv, deps)
            fallback[hv] = found or []
    mapping.update(fallback)

    out: dict[str, list[str]] = {}
    for fx_name, names in provenance.items():
        result: list[str] = []
        for n in names:
            v = old_by_name.get(n)
            for m in (mapping.get(_h(v), []) if v is not None else []):
                if m not in result:
                    result.append(m)
        out[fx_name] = result
    return out


def relax_to_callee(step_or_mod, func: str = "main") -> dict[str, str]:
    """Binding var name -> global function it calls, for the bindings of ``func``:
    ``R.call_tir(f, ...)`` / ``call_tir_inplace`` -> f, ``R.call_dps_packed("ext", ...)`` -> "ext",
    a direct call of a module function (a fused Relax function, or a PrimFunc after
    CallTIRRewrite) -> its name, ``R.call_packed("ext", ...)`` -> "ext".

    After CallTIRRewrite the kernels are called destination-passing style (``add_one(x, alloc)``,
    result unused): a freshly allocated tensor maps to the first call that receives it (the kernel
    that writes it), and a plain alias of a mapped var (``a = alloc``) maps like it.  Bindings that
    call nothing global are left out."""
    mod = getattr(step_or_mod, "mod", step_or_mod)
    f = _func(mod, func)
    out: dict[str, str] = {}
    if f is None:
        return out
    by_handle: dict[int, str] = {}
    fresh: set[int] = set()  # vars bound by alloc_tensor, not yet passed to a call
    for b in _bindings(f):
        value = b.value
        name = var_name(b.var)
        if isinstance(value, relax.Var):
            callee = by_handle.get(_h(value))
            if callee is not None:
                out[name] = callee
                by_handle[_h(b.var)] = callee
            continue
        if not isinstance(value, relax.Call):
            continue
        op = value.op
        opname = getattr(op, "name", "") if not isinstance(op, (relax.GlobalVar, relax.ExternFunc)) else ""
        if isinstance(opname, str) and opname.endswith("alloc_tensor"):
            fresh.add(_h(b.var))
            continue
        callee = None
        if isinstance(op, relax.GlobalVar):
            callee = op.name_hint
        elif isinstance(op, relax.ExternFunc):
            callee = str(op.global_symbol)
        elif value.args and isinstance(value.args[0], relax.GlobalVar):
            callee = value.args[0].name_hint
        elif value.args and isinstance(value.args[0], relax.ExternFunc):
            callee = str(value.args[0].global_symbol)
        if callee is None:
            continue
        out[name] = callee
        by_handle[_h(b.var)] = callee
        for arg in value.args:
            if isinstance(arg, relax.Var) and _h(arg) in fresh:
                fresh.discard(_h(arg))
                out[var_name(arg)] = callee
                by_handle[_h(arg)] = callee
    return out
