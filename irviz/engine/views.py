"""The views the GUI asks for, computed from a Workspace and cached per step.

Results are protocol dicts (irviz/protocol.py, plain Python like this module). Steps are
immutable snapshots, so a view of a step is computed once; a pass applied again makes a
new Step object, and its views are computed afresh.

The core modules are imported inside the methods that use them: the engine makes its StepViews
before it tells the window it is ready, and importing TVM (which loads torch) takes seconds; the
engine loads them in the background meanwhile.
"""
from __future__ import annotations

from irviz.core.errors import RequestError

FX_FOLD_THRESHOLD = 400


class StepViews:
    def __init__(self, workspace, progress):
        self._ws = workspace
        self._progress = progress
        self._by_step: dict[int, tuple[object, dict]] = {}   # step index -> (Step, {key: result})
        self._fx_graph = None                                # (key, result)

    def _step(self, index):
        return self._ws.step_at(index)

    def _cached(self, step, key, compute):
        """Per-step cache, checked against the step object (a re-applied pass is a new step)."""
        entry = self._by_step.get(step.index)
        if entry is None or entry[0] is not step:
            entry = (step, {})
            self._by_step[step.index] = entry
        if key not in entry[1]:
            entry[1][key] = compute()
        return entry[1][key]

    def prune(self) -> None:
        steps = self._ws.session.steps
        for i in list(self._by_step):
            if i >= len(steps) or self._by_step[i][0] is not steps[i]:
                del self._by_step[i]

    def func_names(self, step):
        def compute():
            from irviz.core.tvm_compat import PrimFunc, relax

            relax_names, tir_names = [], []
            for gv, func in step.mod.functions.items():
                if isinstance(func, PrimFunc):
                    tir_names.append(gv.name_hint)
                elif isinstance(func, relax.Function):
                    relax_names.append(gv.name_hint)
            relax_names.sort(key=lambda n: (n != "main", n))
            return relax_names, sorted(tir_names)

        return self._cached(step, "func_names", compute)

    def run_functions(self, step):
        """The Relax functions of a step that a build can run (frontend.inputs.entry_functions)."""
        def compute():
            from irviz.core.frontend.inputs import entry_functions

            return entry_functions(step.mod)

        return self._cached(step, "run_functions", compute)

    def ir_size(self, step):
        """{bindings, prim_funcs, tir_lines} of a step (views.ir_size); None if it cannot be
        counted, so the state never fails over a number shown for information."""
        def compute():
            from irviz.core.views.ir_size import ir_size

            try:
                return ir_size(step.mod)
            except Exception:
                return None

        return self._cached(step, "ir_size", compute)

    def fx_graph(self, fold_depth="auto", folded=(), bookkeeping=False):
        """FX graph grouped by module path; folded to <= 400 nodes by default (fold_depth="auto");
        asserts and copies of lifted constants left out unless ``bookkeeping``."""
        captured = self._ws.captured
        if captured is None:
            self._ws.need_session()
            if self._ws.ir_file is not None or self._ws.importer == "tvmscript":
                raise RequestError(f"There is no FX graph for an IR file: {self._ws.model_name} was "
                                   "opened as Relax IR (an IRModule), not captured from PyTorch")
            raise RequestError("This session has no FX graph")
        # the failed node is marked in the layout: a new import attempt lays it out again
        key = (captured, self._ws.import_error, str(fold_depth), tuple(sorted(folded or ())),
               bool(bookkeeping))
        if self._fx_graph is None or any(a is not b for a, b in zip(self._fx_graph[0][:2], key[:2])) \
                or self._fx_graph[0][2:] != key[2:]:
            from irviz.core.views import graph as graph_mod
            from irviz.core.views import layout

            g = graph_mod.fx_digraph(captured.graph)
            total = g.number_of_nodes()
            hidden: list = []
            if not bookkeeping:
                from irviz.core.views.bookkeeping import without_bookkeeping

                failed = getattr(self._ws.import_error, "node", None)
                g, hidden = without_bookkeeping(g, "fx", keep=[failed] if failed else ())
            depth = fold_depth
            if depth == "auto":
                depth = layout.choose_fold_depth(g, "module_path", FX_FOLD_THRESHOLD) if not folded else None
            self._progress(f"Laying out {g.number_of_nodes()} FX nodes", 0.1)
            result = layout.layout_graph(g, group_attr="module_path", fold_depth=depth,
                                         folded=tuple(folded or ()))
            result["fold_depth"] = depth
            result["total_nodes"] = total
            result["hidden_bookkeeping"] = hidden
            result["dim_names"] = self._dim_names()
            self._mark_failed(result)
            self._fx_graph = (key, result)
        return self._fx_graph[1]

    def _dim_names(self) -> dict:
        try:
            from irviz.core.frontend.importer import dim_names

            return dict(dim_names(self._ws.captured))
        except Exception:  # labels are a nicety
            return {}

    def _mark_failed(self, result: dict) -> None:
        """The node the import failed at: `failed: true`, kind "failed" (its folded box too)."""
        exc = self._ws.import_error
        node = getattr(exc, "node", None) if exc is not None else None
        result["failed_node"] = None
        result["import_error"] = None
        if exc is None:
            return
        from irviz.protocol.commands import import_error_fields

        err = import_error_fields(exc, self._ws.loaded)
        result["import_error"] = err
        if node is None:
            return
        node = str(node)
        for n in result.get("nodes", ()):
            if n.get("id") == node or node in (n.get("members") or ()):
                n["failed"] = True
                if n.get("kind") != "group":   # a folded box stays a group: it still unfolds
                    n["fx_kind"] = n.get("kind")
                    n["kind"] = "failed"
                n["error"] = err["message"]
                result["failed_node"] = n["id"]

    def relax_graph(self, step=None, func="main", expand_fused=True, bookkeeping=False):
        """Dataflow of one Relax function; fused calls expanded and grouped by fused function;
        aliases and scalar constants left out unless ``bookkeeping``."""
        st = self._step(step)

        def compute():
            from irviz.core.views import graph as graph_mod
            from irviz.core.views import layout

            names = self.func_names(st)[0]
            if func == graph_mod.ALL_FUNCTIONS:
                g = graph_mod.module_relax_digraph(st.mod, expand_fused=bool(expand_fused))
                self._progress(f"Laying out {g.number_of_nodes()} Relax nodes", 0.1)
                return layout.layout_graph(g, group_attr="group")
            if func not in names:
                raise RequestError(f"No Relax function {func!r} at step {st.index} "
                                   f"(has: {', '.join(names) or 'none'})")
            g = graph_mod.relax_digraph(st.mod, func, expand_fused=bool(expand_fused))
            hidden: list = []
            if not bookkeeping:
                from irviz.core.views.bookkeeping import without_bookkeeping

                g, hidden = without_bookkeeping(g, "relax")
            self._progress(f"Laying out {g.number_of_nodes()} Relax nodes", 0.1)
            result = layout.layout_graph(g, group_attr="group")
            result["hidden_bookkeeping"] = hidden
            return result

        return self._cached(st, ("relax_graph", func, bool(expand_fused), bool(bookkeeping)), compute)

    def tir_functions(self, step=None):
        st = self._step(step)

        def compute():
            from irviz.core.views import graph as graph_mod

            return [dict(d) for d in graph_mod.tir_functions(st.mod)]

        return self._cached(st, "tir_functions", compute)

    def function_text(self, step=None, name="main"):
        st = self._step(step)

        def compute():
            from irviz.core.views import module_diff as diff_mod
            from irviz.core.views.graph import ALL_FUNCTIONS, module_relax_digraph

            if name == ALL_FUNCTIONS:   # every function the all-functions graph shows
                names = list(dict.fromkeys(d["function"] for _, d in
                                           module_relax_digraph(st.mod).nodes(data=True)))
                return {"name": name, "text": "\n\n".join(diff_mod.function_text(st.mod, n) for n in names)}
            if name not in {gv.name_hint for gv in st.mod.get_global_vars()}:
                raise RequestError(f"No function {name!r} at step {st.index}")
            return {"name": name, "text": diff_mod.function_text(st.mod, name)}

        return self._cached(st, ("function_text", name), compute)

    def module_text(self, step=None):
        st = self._step(step)
        return self._cached(st, "module_text", lambda: {"text": st.mod.script()})

    def diff(self, a=None, b=None):
        s = self._ws.need_session()
        sa = self._step(a if a is not None else max(0, s.cursor - 1))
        sb = self._step(b if b is not None else s.cursor)

        def compute():
            from irviz.core.views import module_diff as diff_mod

            return {"unified": diff_mod.unified_diff(sa.mod, sb.mod),
                    "functions": [fd.to_dict() for fd in diff_mod.side_by_side(sa.mod, sb.mod)]}

        # kept with the later step: dropping the earlier one always drops the later one too
        later, other = (sb, sa) if sb.index >= sa.index else (sa, sb)
        return self._cached(later, ("diff", sa.index, sb.index, other.index), compute)

    def provenance(self, step=None):
        st = self._step(step)

        def compute():
            from irviz.core.views.provenance import relax_to_callee

            return {"fx_to_relax": {k: list(v) for k, v in (st.provenance or {}).items()},
                    "relax_to_callee": relax_to_callee(st)}

        return self._cached(st, "provenance", compute)
