"""Compile the captured program with torch.compile(backend="inductor") on the CPU and keep what
Inductor wrote: its output code and its provenance (kernel -> post-grad nodes -> pre-grad nodes).

The route is Inductor's own debug trace: with ``trace.enabled`` and ``provenance_tracking_level``
1 it writes, per compiled graph, ``output_code.py`` and
``inductor_provenance_tracking_node_mappings.json`` ("cppCodeToPost", "postToPre") into
``trace.debug_dir``. The in-memory provenance tables are reset around each compile, so the files
are the one place they survive. The FX graph cache is off for this compile: a cache hit skips code
generation, and with it the provenance.

What is compiled is the decomposed ExportedProgram irviz shows (``ep.module()``), so the graph
Dynamo hands Inductor holds the same ATen ops in the same order as the FX graph (names.py checks it
op by op). The backend is Inductor's ``compile_fx``, what ``backend="inductor"`` calls, wrapped only to
keep the graph it is given.

With ``freezing`` (Inductor's ``freezing=True``, what a user compiling for inference sets) the
weights become constants: subgraphs of weights alone are folded at compile time, batch norms are
folded into the convolutions before them, and convolution and linear weights are prepacked for
mkldnn, so the weight-layout copies Inductor otherwise runs before each convolution are gone.
"""
from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from irviz.core.frontend.capture import _target_str

__all__ = ["InductorBuild", "PeerError", "compile_inductor", "compile_options"]


class PeerError(Exception):
    """Inductor could not compile or run the model; the message says why."""


@dataclass
class CompiledGraph:
    gm: torch.fx.GraphModule                  # the graph Dynamo gave Inductor, as its passes left it
    ops: list[tuple[str, str]] = field(default_factory=list)  # (name, target) of its ops as given
    output_code: str = ""
    provenance: dict = field(default_factory=dict)  # the mappings JSON


@dataclass
class InductorBuild:
    fn: object                                # the torch.compile'd module
    inputs: tuple
    graphs: list[CompiledGraph]
    seconds: float
    threads: int
    options: dict = field(default_factory=dict)  # torch.compile's arguments and Inductor's config set

    def __call__(self):
        with torch.no_grad():
            return self.fn(*self.inputs)


_TRACE = {
    "trace.enabled": True, "trace.provenance_tracking_level": 1,
    "trace.fx_graph": False, "trace.fx_graph_transformed": False, "trace.ir_pre_fusion": False,
    "trace.ir_post_fusion": False, "trace.output_code": True,
    # a cache hit generates no code, so no provenance: compile afresh
    "fx_graph_cache": False,
    # each C++ kernel opens a RecordFunction the profiler sees (a few ns when nothing records)
    "cpp.enable_kernel_profile": True,
}
# the settings above that change what is compiled or timed (not where the trace goes)
_REPORTED = ("fx_graph_cache", "cpp.enable_kernel_profile", "trace.provenance_tracking_level")


def compile_options(freezing: bool) -> dict:
    """torch.compile's arguments and the Inductor config irviz sets, as the report gives them."""
    return {"backend": "inductor", "dynamic": False, "mode": None,
            "inductor_config": {"freezing": bool(freezing), **{k: _TRACE[k] for k in _REPORTED}}}


def _program_module(captured):
    ep = getattr(captured, "exported", None)
    if ep is not None:
        return ep.module()
    module = getattr(captured, "fx_module", None)
    return module if module is not None else captured.loaded.module


def compile_inductor(captured, threads: int, freezing: bool = False) -> InductorBuild:
    """torch.compile(captured program, backend=inductor) on `threads` torch threads, called once on
    the example inputs so it compiles (with Inductor's `freezing` set as given); PeerError says why
    when it cannot."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx

    loaded = captured.loaded
    if getattr(loaded, "structure_only", False):
        raise PeerError("no weights to run with: torch.compile needs a model it can run")
    module, inputs = _program_module(captured), tuple(loaded.example_inputs)
    graphs: list[CompiledGraph] = []

    def backend(gm, example_inputs):
        # Inductor's pre-grad passes rewrite gm in place: keep its ops as Dynamo gave them
        ops = [(n.name, _target_str(n)) for n in gm.graph.nodes if n.op == "call_function"]
        graphs.append(CompiledGraph(gm=gm, ops=ops))
        return compile_fx(gm, example_inputs)

    debug_dir = Path(tempfile.mkdtemp(prefix="irviz-inductor-"))
    before = torch.get_num_threads()
    # Inductor warns where each debug trace goes; the folder is ours and removed below
    trace_log = logging.getLogger("torch._inductor.debug")
    level = trace_log.level
    trace_log.setLevel(logging.ERROR)
    t0 = time.perf_counter()
    try:
        # Inductor's C++ kernels take their OpenMP thread count when compiled
        torch.set_num_threads(max(1, threads))
        torch._dynamo.reset()
        with inductor_config.patch({**_TRACE, "freezing": bool(freezing), "trace.debug_dir": str(debug_dir)}):
            fn = torch.compile(module, backend=backend, dynamic=False)
            with torch.no_grad():
                fn(*inputs)
        seconds = time.perf_counter() - t0
        _read_traces(debug_dir, graphs)
    except PeerError:
        raise
    except Exception as exc:  # Inductor's failures come as many types; the reason is the message
        raise PeerError(f"torch.compile (inductor) failed: {type(exc).__name__}: "
                        f"{_first_line(exc)}") from exc
    finally:
        torch.set_num_threads(before)
        trace_log.setLevel(level)
        shutil.rmtree(debug_dir, ignore_errors=True)
    if not graphs:
        raise PeerError("torch.compile made no graph of the model (nothing for Inductor to compile)")
    return InductorBuild(fn=fn, inputs=inputs, graphs=graphs, seconds=seconds, threads=max(1, threads),
                         options=compile_options(freezing))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:400] if text else ""


def _read_traces(debug_dir: Path, graphs: list[CompiledGraph]) -> None:
    """Each compiled graph's output code and provenance, in the order Inductor compiled them
    (one trace folder each, numbered by Inductor)."""
    folders = sorted((p.parent for p in debug_dir.rglob("output_code.py")), key=_folder_order)
    if len(folders) != len(graphs):
        raise PeerError(f"Inductor wrote {len(folders)} output code files for {len(graphs)} graphs: "
                        "cannot tell which code is which graph's")
    for g, folder in zip(graphs, folders):
        g.output_code = (folder / "output_code.py").read_text()
        prov = folder / "inductor_provenance_tracking_node_mappings.json"
        g.provenance = json.loads(prov.read_text()) if prov.exists() else {}


def _folder_order(folder: Path):
    """model__3_inference_7.12 -> (3, 7, 12): Inductor's own counters, in compile order."""
    import re

    return tuple(int(x) for x in re.findall(r"\d+", folder.name)) or (folder.stat().st_mtime,)
