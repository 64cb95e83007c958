"""`irviz export MODEL --out DIR`: the pass trace written out: a TVMScript file per step, the
parameters, diffs, steps.json and report.html (with the last step built and run unless --no-build;
--latency times every step; --target writes each kernel's code for that target too). A model
nothing captures whole is written one folder per graph of its graph breaks."""
from __future__ import annotations

import argparse

from irviz.cli.common import Failure, add_model_arguments, add_peer_freezing_argument, add_target_argument, \
    open_workspace, peer_arguments_ok

EXPORT_HELP = "write step scripts, parameters, diffs, steps.json, report.html"


def add_export_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--no-build", action="store_true", help="skip build+run in the report")
    p.add_argument("--latency", action="store_true",
                   help="build and time every step; report.html gets a latency-per-step chart")
    p.add_argument("--repeats", type=int, default=10, help="timed runs per step for --latency")
    p.add_argument("--peer", choices=["inductor"], default=None,
                   help="also compile with torch.compile (inductor, CPU): its kernels' code in peer/ and "
                        "the FX nodes side by side with TVM's in report.html")
    add_peer_freezing_argument(p)
    add_target_argument(p)


def run_export(args) -> int:
    if not peer_arguments_ok(args):
        return 2
    failure = Failure(args.verbose)
    graph_breaks = not getattr(args, "no_weights", False) and getattr(args, "capture", None) in (None, "export")
    if graph_breaks:  # nothing captures the whole model: each graph of its graph breaks, one folder each
        failure.held.add("capture")
    ws = open_workspace(args, failure, print)
    failure.held.clear()
    if ws is None and failure.stage == "capture" and graph_breaks:
        from irviz.cli.graph_breaks import export_graph_breaks

        return export_graph_breaks(args, failure)
    if ws is None:
        return 1
    if failure.stage is None and not args.no_build:
        try:
            not_run = ws.not_run_reason()
            if ws.structure_only:
                ws.build_step()
                print("run      structure only: no weights to run with (built, not run)")
            elif not_run is not None:
                ws.build_step()
                print(f"run      built for {ws.target_name}; no such device here, not run ({not_run})")
            else:
                ws.build_run(func=args.func)
        except Exception as exc:  # the trace is still worth exporting; the report says why
            failure.record("build", exc)
    if args.latency and ws.structure_only:
        print("latency  structure only: no weights to run with (no latency per step)")
    elif args.latency:
        ws.progress = lambda text, fraction=None, **_: print(text) if fraction < 1 else None
        trace = ws.latency_trace(repeats=args.repeats)
        ws.progress = lambda *_, **__: None
        for e in trace:
            what = (f"tvm {e['tvm_ms']:.3f} ms  torch {e['torch_ms']:.3f} ms"
                    if e["ok"] and e.get("torch_ms") is not None else
                    f"tvm {e['tvm_ms']:.3f} ms" if e["ok"] else f"not built: {e['error']}")
            print(f"  {e['step']:2d} {e['pass']:28} {what}")
    try:
        out = ws.export(args.out)
    except Exception as exc:
        failure.record("export", exc)
        return 1
    if args.target:
        from irviz.core.export.kernel_files import write_kernel_code

        try:
            code = write_kernel_code(out, ws.session, args.target)
        except Exception as exc:
            failure.record("export", exc)
            return 1
        bad = [n for n, k in code["kernels"].items() if k["error"]]
        print(f"wrote {len(code['kernels']) - len(bad)} kernels' code for {args.target} in {out}/{code['dir']}"
              + (f"; not compiled: {', '.join(bad)}" if bad else ""))
    if getattr(args, "peer", None) and not _write_peer(ws, out, args):
        return 1
    print(f"wrote {out}")
    return 0 if failure.stage is None else 1


def _write_peer(ws, out, args) -> bool:
    """peer/ and report.html's peer section; a model Inductor cannot compile is written with the
    reason (and is no failure of the export)."""
    from irviz.core.export.peer_files import write_peer
    from irviz.core.peer.peer_report import inductor_peer_for, peer_lines

    report = inductor_peer_for(ws, repeats=args.repeats, freezing=bool(args.peer_freezing))
    for line in peer_lines(report):
        print(line)
    try:
        write_peer(out, report)
    except Exception as exc:
        print(f"FAILED at export: {exc}")
        return False
    return True
