"""Graph layout + drawing benchmark.

    python benchmarks/graph_layout.py [--shots] [--models sample:resnet18,sample:hf_gpt2]

Prints layout time (irviz.core.views.layout.layout_graph) and scene build / first draw time
(irviz.ui.widgets.graph_view.GraphView, rendered once offscreen into a QImage) for a synthetic
layered random DAG of 10,000 nodes (~13.7k edges) and one of 1,000 nodes, and the ratios.
With --models it also lays out and draws real graphs: each model's FX graph and its Relax main
after FuseOps. With --shots it also saves screenshots to /tmp/gv_*.png.
"""
from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import networkx as nx

from irviz.core.views.layout import layout_graph

OPS = ["conv2d", "relu", "add", "matmul", "batch_norm", "softmax", "reshape", "permute_dims",
       "layer_norm", "gelu", "mul", "max_pool2d", "mean", "concat"]


def synthetic_dag(n: int = 10_000, seed: int = 0, extra: float = 0.515) -> nx.DiGraph:
    """Layered random DAG shaped like a deep net: layers of 1-4 nodes, each op fed by one node
    of the layer above plus (probability ``extra``) a skip edge from up to 4 layers above;
    ~15 % of the nodes are weights feeding an op of the next layer.  ~1.37 edges per node (13.7k for 10k nodes, like the NOTES graph)."""
    rng = random.Random(seed)
    G = nx.DiGraph()
    layers: list[list[str]] = []
    i = 0
    while i < n:
        width = min(n - i, rng.choice([1, 1, 1, 2, 2, 3, 4]))
        layers.append([f"n{j}" for j in range(i, i + width)])
        i += width
    ops: list[list[str]] = []
    for li, lay in enumerate(layers):
        ops.append([])
        for k, name in enumerate(lay):
            j = int(name[1:])
            is_param = k > 0 and li + 1 < len(layers) and rng.random() < 0.3
            c = rng.choice([64, 128, 256, 512])
            G.add_node(name, label=f"weight{j}" if is_param else rng.choice(OPS),
                       kind="param" if is_param else "op", shape=(1, c, 28, 28),
                       dtype="float32", module_path=f"block{j // 60}.layer{(j // 12) % 5}")
            if is_param:
                G.add_edge(name, rng.choice(layers[li + 1]))
            else:
                ops[li].append(name)
                if li:
                    G.add_edge(rng.choice(ops[li - 1]), name)
                    if rng.random() < extra:
                        src = rng.choice(ops[rng.randrange(max(0, li - 4), li)])
                        G.add_edge(src, name)
    return G


def convnet_dag() -> nx.DiGraph:
    """A ~60-node ResNet-like FX graph with module paths, shapes and weights."""
    G = nx.DiGraph()

    def add(name, label, kind, shape, module="", inputs=()):
        G.add_node(name, label=label, kind=kind, shape=shape, dtype="float32", module_path=module)
        for i in inputs:
            G.add_edge(i, name, shape=G.nodes[i]["shape"])
        return name

    x = add("x", "x", "input", (1, 3, 224, 224))
    w = add("conv1_weight", "conv1.weight", "parameter", (64, 3, 7, 7), "conv1")
    h = add("conv2d", "conv2d", "op", (1, 64, 112, 112), "conv1", [x, w])
    h = add("batch_norm", "batch_norm", "op", (1, 64, 112, 112), "bn1", [h])
    h = add("relu", "relu", "op", (1, 64, 112, 112), "relu", [h])
    h = add("max_pool2d", "max_pool2d", "op", (1, 64, 56, 56), "maxpool", [h])
    c = 64
    k = 0
    for li, (layer, ch) in enumerate([("layer1", 64), ("layer2", 128), ("layer3", 256)]):
        for b in range(2):
            m = f"{layer}.{b}"
            s = 56 >> li
            inp = h
            w1 = add(f"{m}.conv1.weight", f"{m}.conv1.weight", "parameter", (ch, c, 3, 3), f"{m}.conv1")
            h = add(f"conv2d_{k}", "conv2d", "op", (1, ch, s, s), f"{m}.conv1", [h, w1])
            k += 1
            h = add(f"batch_norm_{k}", "batch_norm", "op", (1, ch, s, s), f"{m}.bn1", [h])
            h = add(f"relu_{k}", "relu", "op", (1, ch, s, s), f"{m}.relu", [h])
            w2 = add(f"{m}.conv2.weight", f"{m}.conv2.weight", "parameter", (ch, ch, 3, 3), f"{m}.conv2")
            h = add(f"conv2d_{k}", "conv2d", "op", (1, ch, s, s), f"{m}.conv2", [h, w2])
            k += 1
            h = add(f"batch_norm_{k}", "batch_norm", "op", (1, ch, s, s), f"{m}.bn2", [h])
            if c != ch:
                wd = add(f"{m}.downsample.0.weight", f"{m}.downsample.0.weight", "parameter",
                         (ch, c, 1, 1), f"{m}.downsample.0")
                inp = add(f"conv2d_{k}", "conv2d", "op", (1, ch, s, s), f"{m}.downsample.0", [inp, wd])
                k += 1
                inp = add(f"batch_norm_{k}", "batch_norm", "op", (1, ch, s, s), f"{m}.downsample.1", [inp])
            h = add(f"add_{k}", "add", "op", (1, ch, s, s), m, [h, inp])
            h = add(f"relu_{k}_out", "relu", "op", (1, ch, s, s), f"{m}.relu", [h])
            c = ch
    h = add("mean", "adaptive_avg_pool2d", "op", (1, c, 1, 1), "avgpool", [h])
    h = add("flatten", "flatten", "op", (1, c), "", [h])
    wf = add("fc.weight", "fc.weight", "parameter", (1000, c), "fc")
    bf = add("fc.bias", "fc.bias", "parameter", (1000,), "fc")
    h = add("linear", "linear", "op", (1, 1000), "fc", [h, wf, bf])
    add("output", "output", "output", (1, 1000), "", [h])
    return G


def _time(fn, repeat=1):
    """Best of ``repeat`` runs: (wall seconds, CPU seconds of this process, result).  CPU time
    is printed too because the machine is shared: wall time includes waiting for a core."""
    best, best_cpu = float("inf"), float("inf")
    out = None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    return best, best_cpu, out


def _models_arg() -> list[str]:
    """--models sample:resnet18,sample:hf_gpt2 (real graphs; needs torch + TVM in this process)."""
    for i, a in enumerate(sys.argv):
        if a == "--models" and i + 1 < len(sys.argv):
            return [m for m in sys.argv[i + 1].split(",") if m]
    return []


def _model_graphs(spec: str):
    """The model's FX graph and its Relax main after the zero pipeline (fused groups expanded)."""
    from irviz.core.views import graph as graph_mod
    from irviz.core.frontend.capture import capture
    from irviz.core.frontend.importer import import_model
    from irviz.core.frontend.model_file import load_model
    from irviz.core.passes import get_pipeline
    from irviz.core.session import Session

    captured = capture(load_model(spec))
    session = Session(import_model(captured), captured)
    session.set_pipeline(get_pipeline("zero")[:4])  # up to FuseOps: fused groups still visible
    session.run_to_end()
    yield "FX", graph_mod.fx_digraph(captured.graph), "module_path"
    yield "Relax (after FuseOps)", graph_mod.relax_digraph(session.module(), expand_fused=True), "group"


def main() -> None:
    shots = "--shots" in sys.argv
    from PySide6.QtWidgets import QApplication

    from irviz.ui.widgets.graph_view import GraphView

    app = QApplication.instance() or QApplication([])
    rows = {}
    for n in (1_000, 10_000):
        G = synthetic_dag(n)
        t_lay, c_lay, graph = _time(lambda: layout_graph(G, group_attr="module_path"),
                                    repeat=3 if n <= 1000 else 2)
        view = GraphView()
        view.resize(1200, 900)
        view.show()
        t_build, c_build, _ = _time(lambda: view.set_graph(graph), repeat=2)
        # real paints of the viewport (paintEvent, offscreen); the first one after set_graph
        # also builds Qt's BSP index, so it is reported separately
        def draw(setup):
            setup()
            return _time(lambda: view.view.viewport().grab())[0]
        t_first = draw(view.reset_view)
        t_def = min(draw(view.reset_view) for _ in range(3))
        t_fit = min(draw(view.fit_to_view) for _ in range(3))
        rows[n] = (G.number_of_edges(), c_lay, c_build, t_def, t_fit)
        print(f"{n:>6} nodes {G.number_of_edges():>6} edges | layout {c_lay*1e3:7.0f} ms cpu "
              f"({t_lay*1e3:.0f} wall) | scene build {c_build*1e3:6.0f} ms cpu ({t_build*1e3:.0f} wall)"
              f" | paint: first {t_first*1e3:5.0f} ms, default view {t_def*1e3:5.1f} ms, "
              f"fit-to-view {t_fit*1e3:5.1f} ms", flush=True)
        if shots:
            view.reset_view()
            app.processEvents()
            view.grab().save(f"/tmp/gv_{n}_default.png")
            view.fit_to_view()
            app.processEvents()
            view.grab().save(f"/tmp/gv_{n}_fit.png")
        view.close()
        view.deleteLater()
        app.processEvents()
    for spec in _models_arg():
        for what, G, group in _model_graphs(spec):
            t_lay, c_lay, graph = _time(lambda: layout_graph(G, group_attr=group), repeat=3)
            view = GraphView()
            view.resize(1200, 900)
            view.show()
            t_build, c_build, _ = _time(lambda: view.set_graph(graph), repeat=2)
            view.reset_view()
            t_paint = min(_time(lambda: view.view.viewport().grab())[0] for _ in range(3))
            print(f"{spec} {what}: {G.number_of_nodes()} nodes {G.number_of_edges()} edges | layout "
                  f"{c_lay*1e3:6.0f} ms cpu | scene build {c_build*1e3:5.0f} ms cpu | paint {t_paint*1e3:5.1f} ms",
                  flush=True)
            view.close()
            view.deleteLater()
            app.processEvents()
    a, b = rows[1_000], rows[10_000]
    print(f"ratio 10k/1k (10x nodes): layout {b[1]/a[1]:.1f}x  scene build {b[2]/a[2]:.1f}x  "
          f"paint default view {b[3]/max(a[3], 1e-9):.1f}x  paint fit {b[4]/max(a[4], 1e-9):.1f}x")
    if shots:
        G = convnet_dag()
        graph = layout_graph(G, group_attr="module_path")
        view = GraphView()
        view.resize(900, 1000)
        view.show()
        view.set_graph(graph)
        app.processEvents()
        view.grab().save("/tmp/gv_convnet.png")
        view.find("conv2d")
        view.highlight(["relu", "max_pool2d"], "linked")
        app.processEvents()
        view.grab().save("/tmp/gv_convnet_find.png")
        print("screenshots: /tmp/gv_*.png")


if __name__ == "__main__":
    main()
