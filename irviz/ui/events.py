"""One catalogue of cross-pane events (Compiler Explorer's event-map, in Qt signals).

Panes never call each other. A pane that the user clicks in calls one of the ``select_*``
methods here; the hub emits the plain "what was selected" signal and, using the provenance of the
current step (set by the main window from the engine's ``provenance`` reply), one ``linked``
signal carrying the matching FX nodes, Relax bindings and TensorIR functions. Every pane listens
to ``linked`` and highlights its share.

Signals (all payloads are plain Python):

- ``fxNodeSelected(str)``         an FX node name
- ``relaxBindingSelected(str)``   a Relax binding var name (a node id of the Relax graph)
- ``tirFunctionSelected(str)``    a prim_func global name
- ``stepSelected(int)``           a step index (the diff pane shows it vs the previous step)
- ``linked(object)``              a :class:`Selection` with every linked id
- ``heatChanged(dict)``           binding var -> milliseconds, from the run pane
- ``errorHeatChanged(dict)``      {"fx": {node: t}, "relax": {var: t}}: intermediates' error, t in [0, 1]
- ``divergingMarked(dict)``       bindings whose values diverge at one step (backend.diverging),
                                  from a bisect: the diff of that step marks them; {} clears
- ``bisectFound(object)``         {"result": bisect reply, "stamp": ResultStamp of the pipeline it
                                  checked}: a newer verdict that older ones must not contradict
- ``cleared()``                   selection cleared
- ``sessionReset()``              a model was (re)opened: drop everything cached for the old one
"""
from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal


@dataclass
class Selection:
    source: str  # "fx" | "relax" | "tir" | "fx_nodes" (several FX nodes, key: their names joined by newlines)
    key: str  # what the user picked
    fx: list[str] = field(default_factory=list)
    relax: list[str] = field(default_factory=list)
    tir: list[str] = field(default_factory=list)


class Provenance:
    """fx node -> relax vars and relax var -> callee, with both reverse maps."""

    def __init__(self, data: dict | None = None):
        data = data or {}
        self.fx_to_relax: dict[str, list[str]] = {
            k: list(v) for k, v in (data.get("fx_to_relax") or {}).items()
        }
        self.relax_to_callee: dict[str, str] = {
            k: v for k, v in (data.get("relax_to_callee") or {}).items() if v
        }
        self.relax_to_fx: dict[str, list[str]] = {}
        for fx, vars_ in self.fx_to_relax.items():
            for var in vars_:
                self.relax_to_fx.setdefault(var, []).append(fx)
        self.callee_to_relax: dict[str, list[str]] = {}
        for var, callee in self.relax_to_callee.items():
            self.callee_to_relax.setdefault(callee, []).append(var)

    def from_fx(self, name: str) -> Selection:
        relax = list(dict.fromkeys(self.fx_to_relax.get(name, [])))
        tir = _unique(self.relax_to_callee[v] for v in relax if v in self.relax_to_callee)
        return Selection("fx", name, [name], relax, tir)

    def from_relax(self, var: str) -> Selection:
        fx = list(self.relax_to_fx.get(var, []))
        tir = [self.relax_to_callee[var]] if var in self.relax_to_callee else []
        return Selection("relax", var, fx, [var], tir)

    def from_tir(self, name: str) -> Selection:
        relax = list(self.callee_to_relax.get(name, []))
        fx = _unique(f for v in relax for f in self.relax_to_fx.get(v, []))
        return Selection("tir", name, fx, relax, [name])

    def from_fx_nodes(self, names: list[str]) -> Selection:
        """Several FX nodes as one selection (a row that stands for a group of them)."""
        parts = [self.from_fx(n) for n in names]
        return Selection("fx_nodes", "\n".join(names), list(names), _unique(v for p in parts for v in p.relax),
                         _unique(t for p in parts for t in p.tir))


def _unique(items) -> list:
    return list(dict.fromkeys(items))


class EventHub(QObject):
    fxNodeSelected = Signal(str)
    relaxBindingSelected = Signal(str)
    tirFunctionSelected = Signal(str)
    stepSelected = Signal(int)
    linked = Signal(object)
    heatChanged = Signal(dict)
    # {"fx": {node: t}, "relax": {var: t}}, t in [0, 1] on the error overlay's log scale
    errorHeatChanged = Signal(dict)
    divergingMarked = Signal(dict)
    bisectFound = Signal(object)
    cleared = Signal()
    sessionReset = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.provenance = Provenance()
        self.selection: Selection | None = None

    def set_provenance(self, data: dict | None) -> None:
        self.provenance = Provenance(data)
        if self.selection is not None:  # re-link the current selection at the new step
            self._relink(self.selection.source, self.selection.key)

    def select_fx(self, name: str) -> None:
        self.fxNodeSelected.emit(name)
        self._relink("fx", name)

    def select_fx_nodes(self, names: list[str]) -> None:
        """Several FX nodes at once, linked together (their Relax bindings and TensorIR functions)."""
        names = list(dict.fromkeys(names))
        if names:
            self.fxNodeSelected.emit(names[0])
            self._relink("fx_nodes", "\n".join(names))

    def select_relax(self, var: str) -> None:
        self.relaxBindingSelected.emit(var)
        self._relink("relax", var)

    def select_tir(self, name: str) -> None:
        self.tirFunctionSelected.emit(name)
        self._relink("tir", name)

    def select_step(self, index: int) -> None:
        self.stepSelected.emit(index)

    def set_heat(self, heat: dict) -> None:
        self.heatChanged.emit(dict(heat))

    def set_error_heat(self, fx: dict, relax: dict) -> None:
        self.errorHeatChanged.emit({"fx": dict(fx), "relax": dict(relax)})

    def mark_diverging(self, marks: dict | None) -> None:
        self.divergingMarked.emit(dict(marks or {}))

    def clear(self) -> None:
        self.selection = None
        self.cleared.emit()

    def _relink(self, source: str, key: str) -> None:
        sel = {"fx": self.provenance.from_fx, "relax": self.provenance.from_relax,
               "tir": self.provenance.from_tir,
               "fx_nodes": lambda k: self.provenance.from_fx_nodes(k.split("\n"))}[source](key)
        self.selection = sel
        self.linked.emit(sel)
