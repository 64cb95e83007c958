"""The one table of the main window's panes.

Each row says what the pane is (key, class), how it is named (title) and explained (help), and
where its dock goes. The main window builds the panes and docks from it, the View menu lists it,
the F1 help page describes it and the saved layout names its docks after the keys. Adding a pane
is its file under ``panes/``, one row here and its test.

The panes are built in table order, which is also the View menu's and the help page's order; the
docks are placed in ``Dock.order``, because where a dock ends up depends on which splits came first.
"""
from __future__ import annotations

from dataclasses import dataclass

from irviz.ui.panes.base import Pane
from irviz.ui.panes.diff import DiffPane
from irviz.ui.panes.fx import FxPane
from irviz.ui.panes.pipeline import PipelinePane
from irviz.ui.panes.relax import RelaxPane
from irviz.ui.panes.build_run import RunPane
from irviz.ui.panes.tir import TirPane


@dataclass(frozen=True)
class Dock:
    """Where a pane's dock goes in the default layout: the `order`-th dock placed, split off the
    dock of pane `of` to its "right" or "below" it (`of` None: the first dock, alone)."""
    order: int
    side: str | None = None
    of: str | None = None


@dataclass(frozen=True)
class PaneRow:
    key: str             # the window's attribute (window.fx), the dock's name (dock_fx)
    cls: type[Pane]
    title: str           # the dock's title and the View menu entry
    help: str            # the pane's paragraph on the F1 help page
    dock: Dock


PANES: list[PaneRow] = [
    PaneRow("fx", FxPane, "FX graph",
            "The torch.fx graph captured by torch.export (after run_decompositions, so it is the "
            "graph that was imported). Graph view grouped by nn.Module path (click a group's title "
            "to fold it, double-click a folded box to open it) or a table like print_tabular: name, "
            "op, target, args, shape, module.",
            Dock(1, "right", "pipeline")),
    PaneRow("relax", RelaxPane, "Relax",
            "The Relax function at the current step: Graph (its dataflow graph), Code (its TVMScript) "
            "or Split (both). Nodes the step added are marked as added, nodes whose call changed as "
            "changed. After Build & Run, nodes are coloured in blues by the time their kernels took; "
            "after Compare intermediates, in yellow to red by their error against PyTorch. The "
            "legend in the corner says which, and a node's tooltip gives its value. The Query "
            "box takes a chain of ops or functions (conv2d -> add -> relu, linear0 -> env.relu, "
            "fused_* globs): matches are highlighted, and ◀ ▶ step through them.",
            Dock(3, "right", "fx")),
    PaneRow("tir", TirPane, "TensorIR",
            "Every prim_func at the current step with its signature and loop nest; the selected "
            "one's TVMScript below, and in the Code tab what it becomes on the session's target "
            "(the Pipeline pane's), or on another picked in the tab (host, x86-avx2, aarch64, cuda, "
            "… or a TVM target as JSON; Use the session's goes back): its assembly or LLVM IR, or "
            "its GPU source with grid and block, with instruction, vector-width, FMA and call "
            "counts. Code for another step, pipeline or target is greyed until the new code comes.",
            Dock(4, "right", "relax")),
    PaneRow("pipeline", PipelinePane, "Pipeline",
            "Applied steps (pass, time in ms, whether it changed the module or only its attributes) "
            "and the passes still planned. Choose a named pipeline or compose your own: Add ▾ a "
            "pass, Remove it, move it with ↑ ↓, edit its parameters, Load passes from a file; Copy "
            "pipeline as text gives the line `irviz check --pipeline` takes, Paste pipeline reads "
            "one back. ◀ Back, Step ▶ and Run to end ▶▶ move the cursor. A click on a step shows it "
            "in the Diff pane; a double-click jumps to it. Tick 'Hide passes that changed nothing' "
            "to see only the passes that mattered. Find first bad pass builds the steps and finds "
            "the first whose numbers differ from PyTorch, or that fails; Write repro folder writes "
            "before.py, after.py, inputs, expected outputs and repro.py for the bad step (or the "
            "cursor's). Count code compiles every step's kernels for the target beside it and fills "
            "the Vec and FMA columns; a fall against the step before is marked.",
            Dock(0)),
    PaneRow("diff", DiffPane, "Diff",
            "What a step changed, per function: Side by side or Unified, with the changed "
            "characters marked; ▲ Prev hunk and ▼ Next hunk move between changes. With Follow cursor "
            "ticked it shows the cursor's step; untick it to pick any two steps. Choose Kernel code "
            "instead of IR to compare one kernel's assembly, LLVM IR or GPU source between the two "
            "steps, or between two targets of one step (x86-avx2 → x86-avx512).",
            Dock(2, "below", "fx")),
    PaneRow("run", RunPane, "Build and Run",
            "Build & Run compiles the current step, runs it and compares its outputs with PyTorch "
            "(max error, pass/fail), with TVM and PyTorch latency; Sizes… sets symbolic sizes. Tabs: "
            "Kernels (the time of every kernel, its GFLOP/s, bytes moved and % of roof, the CPU "
            "decision behind it, and what its code does: instructions, vector instructions and width, "
            "FMAs, calls out); Peer (Compare with torch.compile compiles the model with Inductor and "
            "puts its kernels beside TVM's per group of FX nodes, the groups that differ most first; a "
            "row selects its FX nodes and shows the Inductor kernel's C++ code; Freezing compiles with "
            "Inductor's freezing=True, the weights constants as for inference); Roofline (each kernel "
            "against this CPU's measured peak and memory bandwidth, log-log, dots sized by time); "
            "Latency per step "
            "(Time every step builds each step, Show error switches the chart from latency to "
            "error); Intermediates (Compare intermediates checks every FX node against the binding "
            "it became, First divergence selects the earliest that differs); Memory (Plan memory of "
            "this step shows the storage StaticPlanBlockMemory shares between tensors, and by a symbolic "
            "size at a few of its values); Estimate (the latency without running: each distinct "
            "kernel timed alone at its shapes, times its calls; what Run does for a model opened "
            "structure only; Estimate latency starts it); Generate (for a model opened for "
            "generation: generates greedily with the prefill and decode programs and compares the "
            "tokens with transformers' generate; after a mismatch Bisect this step finds the pass "
            "that broke that step, on torch's inputs for it). A result "
            "for another model, pipeline or step is greyed and says so.",
            Dock(5, "right", "diff")),
]


def rows() -> list[PaneRow]:
    """The table as it is now (tests append a row to ``PANES``), checked: unique keys, and every
    dock split off a pane placed before it."""
    keys = [r.key for r in PANES]
    if len(set(keys)) != len(keys):
        raise ValueError(f"pane keys must be unique: {keys}")
    placed: set[str] = set()
    for r in sorted(PANES, key=lambda r: r.dock.order):
        if r.dock.of is not None and r.dock.of not in placed:
            raise ValueError(f"pane {r.key!r} docks beside {r.dock.of!r}, which is not placed before it")
        placed.add(r.key)
    return list(PANES)
