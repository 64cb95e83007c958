"""The fake engine the ui tests share: a QObject with the bridge's signals that answers every
command from canned, protocol-shaped dicts (built with irviz.protocol.commands's make_state, so a change
to the state schema breaks these tests too). Fast, no engine process; end-to-end tests with the
real engine are in test_main_window.py."""
from __future__ import annotations

import json

from PySide6.QtCore import QObject, QTimer, Signal

from irviz.protocol.commands import COMMANDS, STATE_CMDS, STATE_KEYS, invocation, make_state, step_entry

def _node(id_, label, kind="op", x=0, y=0, **attrs):
    return dict(id=id_, label=label, sublabel=attrs.pop("sublabel", ""), kind=kind, x=x, y=y, w=120, h=32,
                **attrs)


FX_GRAPH = {
    "nodes": [
        _node("x", "x", "input", 0, 0, name="x", op="placeholder", target="x", shapes=[[1, 16]],
              module_path="", args=[]),
        _node("linear", "linear", "op", 0, 60, name="linear", op="call_function", target="aten.linear.default",
              args=["x"], arg_repr="(x, p_fc1_weight, p_fc1_bias)", shapes=[[1, 32]], module_path="fc1",
              module_type="Linear"),
        _node("relu", "relu", "op", 0, 120, name="relu", op="call_function", target="aten.relu.default",
              args=["linear"], arg_repr="(linear,)", shapes=[[1, 32]], module_path="act", module_type="ReLU"),
        _node("output", "output", "output", 0, 180, name="output", op="output", target="output", args=["relu"]),
    ],
    "edges": [{"src": "x", "dst": "linear", "label": "1×16", "points": [[60, 32], [60, 60]]},
              {"src": "linear", "dst": "relu", "label": "1×32", "points": [[60, 92], [60, 120]]},
              {"src": "relu", "dst": "output", "label": "", "points": [[60, 152], [60, 180]]}],
    "groups": [], "width": 200, "height": 240,
}


def relax_graph(step):
    if step == 0:
        nodes = [_node("x", "x", "param"), _node("lv", "matmul", "op", callee=None),
                 _node("lv1", "add", "op", callee=None), _node("lv2", "relu", "op", callee=None),
                 _node("gv", "output", "output")]
    else:
        nodes = [_node("x", "x", "param"), _node("lv", "call_tir", "call_tir", callee="matmul"),
                 _node("lv1", "call_tir", "call_tir", callee="add"),
                 _node("lv2", "call_tir", "call_tir", callee="relu"), _node("gv", "output", "output")]
    edges = [{"src": a, "dst": b, "label": "", "points": []}
             for a, b in (("x", "lv"), ("lv", "lv1"), ("lv1", "lv2"), ("lv2", "gv"))]
    return {"nodes": nodes, "edges": edges, "groups": [], "width": 200, "height": 300}


TEXT0 = '''@R.function
def main(x: R.Tensor((1, 16), dtype="float32")):
    with R.dataflow():
        lv = R.matmul(x, w)
        lv1 = R.add(lv, b)
        lv2 = R.nn.relu(lv1)
        gv = lv2
        R.output(gv)
    return gv'''
TEXT1 = TEXT0.replace("R.matmul(x, w)", "R.call_tir(cls.matmul, (x, w), out_ty=R.Tensor((1, 32)))") \
             .replace("R.add(lv, b)", "R.call_tir(cls.add, (lv, b), out_ty=R.Tensor((1, 32)))") \
             .replace("R.nn.relu(lv1)", "R.call_tir(cls.relu, (lv1,), out_ty=R.Tensor((1, 32)))")
TIR = [{"name": n, "signature": '(A: T.Buffer((1, 32), "float32"), B: T.Buffer((1, 32), "float32"))',
        "loops": ["i0 1 serial", "i1 32 serial"], "blocks": [n]} for n in ("add", "matmul", "relu")]


def diff_rows():
    rows = []
    a, b = TEXT0.split("\n"), TEXT1.split("\n")
    for i, (l, r) in enumerate(zip(a, b)):
        tag = "equal" if l == r else "replace"
        rows.append([i + 1, l, i + 1, r, tag, [[8, 14]] if tag != "equal" else [], [[8, 18]] if tag != "equal" else []])
    return rows


# two pipelines compared: B skipped FoldConstant
COMPARE_RESULT = {
    "pipelines": [
        {"pipeline": "zero", "steps": ["import", "LegalizeOps", "AnnotateTIROpPattern", "FoldConstant",
                                       "FuseOps", "FuseTIR"], "tvm_ms": 0.2, "max_abs_error": 2e-7,
         "kernels": 2, "build_seconds": 0.3, "error": None},
        {"pipeline": "LegalizeOps,AnnotateTIROpPattern,FuseOps,FuseTIR",
         "steps": ["import", "LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR"], "tvm_ms": 0.3,
         "max_abs_error": 2e-7, "kernels": 4, "build_seconds": 0.5, "error": None},
    ],
    "aligned": [[0, 0], [1, 1], [2, 2], [3, None], [4, 3], [5, 4]],
}


def compare_diff(args):
    return {"a": args["a"], "b": args["b"], "pass_a": "x", "pass_b": "y", "unified": "",
            "functions": [], "graph": {"functions": {"only_a": [], "only_b": ["transpose"],
                                                    "changed": ["main"], "same": 2},
                                       "nodes": {}}}


# a "graph_breaks" spec opens as a model nothing captured whole, cut at its graph breaks
GRAPHS = [{"graph": 1, "ops": 3, "inputs": ["8×4 float32"]}, {"graph": 2, "ops": 4, "inputs": ["8×6 float32"]},
          {"graph": 3, "ops": 3, "inputs": ["8×6 float32"]}]


class FakeBridge(QObject):
    replied = Signal(int, str, object)
    failed = Signal(int, str, dict)
    progress = Signal(int, str, float)
    busyChanged = Signal(bool)
    engineRestarted = Signal(str)
    stateChanged = Signal(dict)

    PASSES = ["LegalizeOps", "AnnotateTIROpPattern", "FoldConstant", "FuseOps", "FuseTIR"]

    def __init__(self):
        super().__init__()
        self._id = 0
        self.busy = False
        self.sent: list[tuple[str, dict]] = []
        self.model = None
        self.cursor = 0
        self.applied: list[dict] = []
        self.planned: list[dict] = []
        self.fail_next: dict | None = None
        self.target: str | None = None  # chosen with set_target; None: the host
        self.graph: int | None = None  # a "graph_breaks" spec: the graph open, of GRAPHS

    def request(self, cmd, supersede=None, **args):
        assert cmd in COMMANDS, f"the panes sent {cmd!r}, which is not a protocol command"
        # as the engine would get them: through JSON (the bridge's request line), then its router's
        # check of names and types (a BadRequest here is one the real engine would answer)
        COMMANDS[cmd].check_args(json.loads(json.dumps(args)))
        self._id += 1
        rid = self._id
        self.sent.append((cmd, args))
        QTimer.singleShot(0, lambda: self._answer(rid, cmd, args))
        return rid

    def cancel(self):
        return False

    def restart(self, reason=""):
        self.engineRestarted.emit(reason)

    def shutdown(self):
        pass

    def state(self):
        # built with the engine's own schema: a change to protocol.py breaks these tests too
        steps = [step_entry(0, "import", {}, 0.1, True,
                            size={"bindings": 3, "prim_funcs": 0, "tir_lines": 0})]
        for i, inv in enumerate(self.applied):
            changed = inv["name"] == "LegalizeOps"
            steps.append(step_entry(i + 1, inv["name"], inv.get("params", {}), 0.01, changed,
                                    added=["add", "matmul", "relu"] if changed else [],
                                    changed_funcs=["main"] if changed else [],
                                    size={"bindings": 3, "prim_funcs": 3, "tir_lines": 40 + i}))
        model = f"{self.model} graph {self.graph} of {len(GRAPHS)}" if self.graph else self.model
        return make_state(model=model, spec=f"sample:{self.model}" if self.model else None,
                          importer="exported_program", cursor=self.cursor, steps=steps,
                          planned=[invocation(p["name"], p.get("params")) for p in self.planned],
                          relax_functions=["main"],
                          tir_functions=[t["name"] for t in TIR] if self.cursor > 0 else [],
                          target=self.target, **self._graph_fields())

    def _graph_fields(self) -> dict:
        if not self.graph:
            return {}
        note = ("captured with graph breaks as separate subgraphs (3 graphs; nothing captured the "
                "whole model: torch.export (non-strict): data-dependent guard zuf1 < zuf0 at m.py:17)")
        return {"capture_fallback": "graph breaks", "capture_notes": [note],
                "graph_breaks": {"graph": self.graph, "count": len(GRAPHS), "note": note,
                                 "graphs": [dict(g, name=f"{self.model} graph {g['graph']} of {len(GRAPHS)}")
                                            for g in GRAPHS]}}

    def _answer(self, rid, cmd, args):
        if self.fail_next is not None and cmd == self.fail_next.get("cmd"):
            err = dict(self.fail_next["error"])
            self.fail_next = None
            self.failed.emit(rid, cmd, err)
            return
        result = self._compute(cmd, args)
        if isinstance(result, NotRun):
            self.failed.emit(rid, cmd, {"stage": "run", "message": str(result), "hint": "build only",
                                        "not_run": self.target})
            return
        if isinstance(result, Exception):
            self.failed.emit(rid, cmd, {"stage": "request", "message": str(result), "hint": None})
            return
        self.replied.emit(rid, cmd, result)
        if cmd in STATE_CMDS:
            assert set(result) == STATE_KEYS
            self.stateChanged.emit(result)

    def _set_target(self, text):
        return _fake_set_target(self, text)

    def _compute(self, cmd, a):
        if cmd == "open":
            if "missing" in a["spec"]:
                return Exception("No such file")
            self.model = a["spec"].split(":")[-1]
            self.graph = 1 if "graph_breaks" in a["spec"] else None
            self.cursor, self.applied = 0, []
            self.planned = [{"name": n, "params": {}} for n in self.PASSES]
            return self.state()
        if cmd == "choose_graph":
            self.graph, self.cursor = int(a["graph"]), 0
            self.planned, self.applied = self.applied + self.planned, []
            return self.state()
        if cmd == "step":
            if self.cursor < len(self.applied):
                self.cursor += 1
            elif self.planned:
                self.applied.append(self.planned.pop(0))
                self.cursor += 1
            return self.state()
        if cmd == "back":
            self.cursor = max(0, self.cursor - 1)
            return self.state()
        if cmd == "jump":
            self.cursor = int(a["index"])
            return self.state()
        if cmd == "run_to_end":
            self.applied += self.planned
            self.planned = []
            self.cursor = len(self.applied)
            return self.state()
        if cmd == "set_pipeline":
            self.applied = self.applied[:self.cursor]
            self.planned = [dict(p) for p in a.get("passes") or []] if "passes" in a else \
                [{"name": n, "params": {}} for n in self.PASSES]
            return self.state()
        if cmd == "state":
            return self.state()
        if cmd == "list_targets":
            return FAKE_TARGETS
        if cmd == "set_target":
            return self._set_target(a.get("target"))
        if cmd == "fx_graph":
            return FX_GRAPH
        if cmd == "relax_graph":
            return relax_graph(a.get("step", 0))
        if cmd == "function_text":
            if a["name"] == "main":
                return {"name": "main", "text": TEXT0 if a.get("step") == 0 else TEXT1}
            return {"name": a["name"], "text": f"@T.prim_func\ndef {a['name']}(A, B):\n    for i0, i1 in T.grid(1, 32):\n        B[i0, i1] = A[i0, i1]"}
        if cmd == "tir_functions":
            return TIR if a.get("step", 0) > 0 else []
        if cmd == "diff":
            if a["b"] == 0 or a["a"] == a["b"]:
                return {"unified": "", "functions": []}
            return {"unified": "--- a\n+++ b\n@@ main @@\n-        lv = R.matmul(x, w)\n+        lv = R.call_tir(cls.matmul)",
                    "functions": [{"name": "main", "status": "changed", "rows": diff_rows()},
                                  {"name": "matmul", "status": "added",
                                   "rows": [[None, None, 1, "@T.prim_func", "insert", [], []]]}]}
        if cmd == "provenance":
            if a.get("step", 0) == 0:
                return {"fx_to_relax": {"linear": ["lv", "lv1"], "relu": ["lv2"]}, "relax_to_callee": {}}
            return {"fx_to_relax": {"linear": ["lv", "lv1"], "relu": ["lv2"]},
                    "relax_to_callee": {"lv": "matmul", "lv1": "add", "lv2": "relu"}}
        if cmd == "build_run" and self.target == "aarch64":
            return NotRun("built for aarch64; no such device here, not run (this machine is x86_64, "
                          "the target aarch64)")
        if cmd == "build_run" and self.graph:  # compared with torch on that graph alone
            return dict(self._compute("build_run_whole", a),
                        reference_name=f"PyTorch on graph {self.graph} of {len(GRAPHS)} (its own captured inputs)")
        if cmd in ("build_run", "build_run_whole"):
            return {"ok": True, "max_abs_error": 1e-7, "max_rel_error": 2e-7, "allclose": True,
                    "tvm_ms": 0.5, "torch_ms": 0.25, "threads": 1, "build_seconds": 0.8,
                    "kernels": [{"name": "matmul", "calls": 1, "ms": 0.3, "binding": "lv"},
                                {"name": "add", "calls": 1, "ms": 0.05, "binding": "lv1"},
                                {"name": "relu", "calls": 1, "ms": 0.05, "binding": "lv2"}]}
        if cmd == "latency_trace":
            # step 2 gives wrong numbers, step 3 does not build
            trace = [{"step": i, "pass": st["pass"], "ok": i != 3, "tvm_ms": None if i == 3 else 1.0 + i,
                      "torch_ms": 0.5, "max_abs_error": None if i == 3 else (0.25 if i == 2 else 1e-7 * i),
                      "allclose": None if i == 3 else i != 2, "error": "no kernel" if i == 3 else None,
                      "build_seconds": 0.1, "threads": 1, "cached": False}
                     for i, st in enumerate(self.state()["steps"])]
            return {"trace": trace, "torch_ms": 0.5, "threads": 1, "reference": True, "planned": 0}
        if cmd == "memory":
            step = int(a.get("step", self.cursor))
            return {"func": "main", "bindings": 4, "tokens": 1, "planned_bytes": 128,
                    "tensor_bytes": 256, "peak_bytes": 128, "step": step, "planned_by_step": False,
                    "token_list": [{"name": "storage", "bytes": 128, "binding": 0,
                                    "tensors": ["alloc", "alloc1"]}],
                    "tensors": [{"name": "alloc", "aliases": ["lv"], "token": "storage", "offset": 0,
                                 "shape": [1, 32], "dtype": "float32", "bytes": 128, "start": 0, "end": 1},
                                {"name": "alloc1", "aliases": ["lv2"], "token": "storage", "offset": 0,
                                 "shape": [1, 32], "dtype": "float32", "bytes": 128, "start": 2, "end": 3}]}
        if cmd == "intermediates":
            step = int(a.get("step", self.cursor))
            nodes = [{"order": i, "fx_node": n, "relax_var": v, "max_abs": 1e-7, "max_rel": 1e-7,
                      "status": "ok", "reason": None} for i, (n, v) in enumerate((("linear", "lv1"),
                                                                                  ("relu", "lv2")))]
            return {"step": step, "pass": self.state()["steps"][step]["pass"], "nodes": nodes,
                    "first_divergence": None, "atol": None, "rtol": None, "seconds": {"torch": 0.1}}
        if cmd == "bisect":
            # the engine applies the planned passes first; step 2 is the first bad one
            self.applied += self.planned
            self.planned = []
            names = [st["pass"] for st in self.state()["steps"]]
            checked = [{"index": i, "pass": names[i], "ok": i < 2, "stage": None if i < 2 else "compare",
                        "reason": None if i < 2 else "outputs differ", "max_abs_error": 0.0 if i < 2 else 0.5}
                       for i in (0, 1, 2, len(names) - 1)]
            return {"first_bad": {"index": 2, "pass": names[2], "stage": "compare", "max_abs_error": 0.5,
                                  "reason": "outputs differ"},
                    "steps_checked": checked, "reference": "PyTorch", "candidates": [1, 2, 3, 4, 5],
                    "seconds": 1.0, "diverging": None}
        if cmd == "write_repro":
            return {"path": a["out_dir"], "files": ["README.txt", "repro.py"]}
        if cmd == "export":
            return {"path": a["out_dir"], "files": ["step_00_import.py", "steps.json"]}
        if cmd == "list_samples":
            return [{"name": "mlp", "description": "two linear layers"},
                    {"name": "resnet18", "description": "torchvision ResNet-18"}]
        if cmd == "list_passes":
            return [{"name": n, "description": n, "category": "tvm", "params": []} for n in self.PASSES] + [
                {"name": "FuseOpsByPattern", "description": "d", "category": "course",
                 "params": [{"name": "patterns", "kind": "json", "default": [], "help": "", "choices": None},
                            {"name": "bind_constants", "kind": "bool", "default": True, "help": "", "choices": None}]}]
        if cmd == "compare":
            return COMPARE_RESULT
        if cmd == "compare_diff":
            return compare_diff(a)
        if cmd == "kernel_code":
            return fake_kernel_code(a)
        if cmd == "kernel_code_diff":
            return fake_kernel_code_diff(a)
        if cmd == "list_pipelines":
            return [{"name": "zero", "description": "TVM zero pipeline",
                     "passes": [{"name": n, "params": {}} for n in self.PASSES]}]
        return Exception(f"the fake engine does not answer {cmd}")


FAKE_TARGETS = [
    {"name": "host", "description": "this machine", "target": {"kind": "llvm", "mcpu": "znver3"}, "unavailable": None},
    {"name": "x86-avx2", "description": "AVX2", "target": {"kind": "llvm", "mcpu": "haswell"}, "unavailable": None},
    {"name": "aarch64", "description": "Arm", "target": {"kind": "llvm", "mtriple": "aarch64-linux-gnu"},
     "unavailable": None},
    {"name": "cuda", "description": "NVIDIA", "target": {"kind": "cuda", "arch": "sm_80"}, "unavailable": None},
    {"name": "metal", "description": "Apple", "target": {"kind": "metal"},
     "unavailable": "Metal code generation crashes TVM 0.27 outside macOS"},
]


class NotRun(Exception):
    """Built for a target whose device is not here (the engine's RunError with `not_run`)."""


def _fake_set_target(bridge, text):
    """As the engine: a name from the catalogue or a JSON object; anything else is refused."""
    text = (text or "host").strip()
    if text.startswith("{"):
        try:
            json.loads(text)
        except ValueError as e:
            return Exception(f"target {text!r} is not valid JSON: {e}")
    elif text not in [t["name"] for t in FAKE_TARGETS if not t["unavailable"]]:
        return Exception(f"unknown target {text!r}")
    bridge.target = None if text == "host" else text
    return bridge.state()


FAKE_ASM = ("{k}_compute_:\n.LBB0_1:\n  vmovups (%rax), %{r}mm1\n  vfmadd231ps (%rcx), %{r}mm2, %{r}mm1\n"
            "  callq expf@PLT\n  jne .LBB0_1\n  retq\n")


def fake_kernel_code(a: dict) -> dict:
    """kernel_code as the engine shapes it: x86 code whose vector registers follow the target (zmm
    for avx512, else ymm) and whose FMA count grows with the step, so totals change per step."""
    reg = "z" if "512" in str(a.get("target")) else "y"
    step_no = int(a.get("step") or 0)
    counts = {"instructions": 5 + step_no, "vector": 2, "vector_bits": {"512" if reg == "z" else "256": 2},
              "fma": step_no, "vector_fma": step_no, "calls": 1, "callees": {"expf": 1}}
    kernels = {k: {"name": k, "symbols": [f"{k}_compute_"], "error": None, "launch": [], "counts": dict(counts)}
               for k in ("add", "matmul", "relu")}
    k = a.get("kernel")
    totals = {"instructions": 3 * counts["instructions"], "vector": 6,
              "vector_bits": {"512" if reg == "z" else "256": 6}, "fma": 3 * step_no,
              "vector_fma": 3 * step_no, "calls": 3}
    return {"target_name": a.get("target"), "target": {"kind": "llvm"}, "kind": "llvm", "seconds": 0.1,
            "totals": totals, "kernels": kernels, "step": a.get("step"), "formats": ["asm", "ll"],
            "kernel": k, "lexers": {"asm": "gas", "ll": "llvm"},
            "code": {"asm": FAKE_ASM.format(k=k, r=reg), "ll": f"define void @{k}_compute_() {{\n}}\n"}
            if k else None}


def fake_kernel_code_diff(a: dict) -> dict:
    """kernel_code_diff as the engine shapes it, from fake_kernel_code's assembly of each side."""
    sides = []
    for step_no, target in ((a.get("a"), a.get("target_a")), (a.get("b"), a.get("target_b"))):
        code = fake_kernel_code({"step": step_no, "target": target, "kernel": a["kernel"]})
        sides.append((code["code"]["asm"].splitlines(), {"step": step_no, "target_name": target,
                                                          "kind": "llvm", "error": None,
                                                          "counts": code["kernels"][a["kernel"]]["counts"]}))
    (la, sa), (lb, sb) = sides
    rows = [[i + 1, x, i + 1, y, "equal" if x == y else "replace", [], []] for i, (x, y) in enumerate(zip(la, lb))]
    return {"unified": "", "functions": [{"name": a["kernel"], "status": "changed", "rows": rows,
                                          "hunk_starts": [0]}],
            "format": "asm", "language": "gas", "kernel": a["kernel"], "a": sa, "b": sb}


def open_mlp(qtbot, win):
    win.open_spec("sample:mlp")
    qtbot.waitUntil(lambda: win.all_filled(), timeout=5000)


def step(qtbot, win, n=1):
    for _ in range(n):
        before = win.state["cursor"]
        win.act_step.trigger()
        qtbot.waitUntil(lambda: win.state["cursor"] == before + 1, timeout=5000)  # noqa: B023 - waited on in this iteration
    qtbot.waitUntil(lambda: win.all_filled(), timeout=5000)
