"""`irviz check`: load → capture → import → every pass → build → run → compare with torch, one
verdict (and with --json the figures: times, kernels, roofline, memory, decisions)."""
from __future__ import annotations

import argparse
import time

from irviz.cli.common import Failure, add_model_arguments, add_peer_freezing_argument, add_target_argument, \
    finite, log_for, open_workspace, peer_arguments_ok, with_json_stdout, write_json

# irviz.core modules that load torch or TVM are imported inside the functions (see common).

CHECK_HELP = "load, import, run a pipeline pass by pass, build, run, compare"

# `irviz check --target T` built for T but this machine has no such device (an aarch64 CPU, a GPU):
# nothing failed, and nothing ran either
EXIT_NOT_RUN = 3


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    p.add_argument("--json", metavar="PATH", help="write a JSON summary to PATH ('-' = stdout)")
    p.add_argument("--repeats", type=int, default=10, help="timed runs for the medians")
    p.add_argument("--intermediates", action="store_true",
                   help="compare every FX node with its Relax binding at the last step; print the "
                        "first divergence and the worst nodes")
    p.add_argument("--atol", type=float, default=None,
                   help="with --intermediates: one absolute tolerance for every node (default: per dtype)")
    p.add_argument("--rtol", type=float, default=None,
                   help="with --intermediates: one relative tolerance for every node (default: per dtype)")
    p.add_argument("--estimate", action=argparse.BooleanOptionalAction, default=None,
                   help="estimate the latency without running: each distinct kernel timed alone on "
                        "random inputs of its shapes (cached per CPU), times its calls; default: on "
                        "for a model without weights, off otherwise")
    p.add_argument("--peer", choices=["inductor"], default=None,
                   help="also compile the model with torch.compile (inductor, CPU): its kernels, the FX "
                        "nodes each computes and their times beside TVM's, per FX node")
    add_peer_freezing_argument(p)
    add_target_argument(p, help_more=f"; built for T, and run only where T's device is here (exit "
                                     f"{EXIT_NOT_RUN} when it is not: built, not run)")


def run_check(args) -> int:
    if not peer_arguments_ok(args):
        return 2
    return with_json_stdout(args, lambda out: _check(args, out))


def _check_alt_sizes(ws, args, failure: Failure, summary: dict, log) -> None:
    """A model file with get_alt_inputs(): run the same model on those sizes and compare with
    torch. Adds summary["alt_sizes"] = [{shapes, max_abs_error, allclose}]; a mismatch fails
    `compare`."""
    alt = ws.loaded.alt_inputs if ws.loaded is not None else None
    if alt is None:
        return
    summary["alt_sizes"] = []
    try:
        _, res = ws.build_run(repeats=max(1, min(args.repeats, 3)), inputs=alt)
    except Exception as exc:
        failure.record(ws.stage, exc)
        return
    shapes = [list(t.shape) for t in alt if hasattr(t, "shape")]
    summary["alt_sizes"].append({"shapes": shapes, "max_abs_error": finite(res.max_abs_error),
                                 "allclose": res.allclose})
    log(f"run      other sizes {shapes}: max abs error {res.max_abs_error:.3g}"
        f"{'' if res.allclose else '  DIFFERS'}")
    if not res.allclose:
        failure.mismatch(f"outputs differ from PyTorch on the other input sizes {shapes}: "
                         f"max abs error {res.max_abs_error:.3g}")


def _cpu_fields() -> dict:
    from irviz.core.target import cpu_info  # lazy: loads TVM, which `irviz MODEL` must not

    return cpu_info().as_dict()


def _timing_fields(res) -> dict:
    """How each figure was taken: median, min, quartiles, runs, load average, threads."""
    out = {"tvm": dict(res.tvm_timing or {}, threads=res.threads)}
    if res.torch_timing:
        out["torch"] = dict(res.torch_timing, threads=res.torch_threads)
    return out


def kernel_fields(res, log=None) -> dict:
    """The run's kernels for the JSON, each with whether its figure can be trusted, and whether
    they add up to no more than the run; `log` gets a line for each figure not to be trusted."""
    out = {"kernels": [{"name": k.name, "calls": k.calls, "ms": round(k.ms, 5), "binding": k.binding,
                        "reliable": k.reliable, "reason": k.reason,
                        "alone_ms": None if k.alone_ms is None else round(k.alone_ms, 5)}
                       for k in res.kernels],
           "kernels_reliable": res.kernels_reliable, "kernels_reason": res.kernels_reason}
    if log is not None:
        if not res.kernels_reliable:  # the reason gives the sum and the run's time
            log(f"kernels  unreliable: {res.kernels_reason}")
        elif res.kernels:
            log(f"kernels  {len(res.kernels)} kernels add up to {sum(k.ms for k in res.kernels):.3f} ms "
                f"per run (the run: {res.tvm_ms:.3f} ms)")
        for k in res.kernels:
            if not k.reliable:
                log(f"kernel   {k.name}: unreliable: {k.reason}")
    return out


def _memory_fields(built, func: str, mod=None, ws=None, log=None):
    """StaticPlanBlockMemory's figures for the module the build lowered, with the activations'
    dtypes and the weights `mod` (the built step) holds besides its inputs (None if unreadable).
    Symbolic sizes: the plan at the example inputs' (or --dim) values, and `by_length`, the
    figures at a few values of one of them (Workspace.memory)."""
    from irviz.core.backend.memory import memory_plan, weights_of

    try:
        plan = memory_plan(built.lowered, func)
        out = plan.summary()
        out["activation_dtypes"] = sorted({t.dtype for t in plan.tensors if t.token is not None})
    except Exception:  # symbolic sizes leave the build nothing to lay out
        try:
            m = ws.memory(func=func)
        except Exception:  # the figures are extra; a check does not fail over them
            return None
        out = {k: m[k] for k in ("tokens", "planned_bytes", "tensor_bytes", "peak_bytes")}
        out["activation_dtypes"] = sorted({t["dtype"] for t in m["tensors"] if t["token"] is not None})
        out.update(dims=m["dims"], by_length=m["by_length"])
        if log is not None:
            log_by_length(out, log)
    try:
        w = weights_of(mod if mod is not None else built.mod, func)
        out.update(weights_bytes=w["bytes"], weights=w["count"], weights_dtypes=w["dtypes"])
    except Exception:
        pass
    return out


def _roofline_fields(built, res, log):
    """Per kernel: FLOPs and bytes from the TIR against the measured peak and bandwidth."""
    from irviz.core.backend.roofline import roofline_for

    try:
        r = roofline_for(built, res)
    except Exception:  # the figures are extra; a check does not fail over them
        return None
    if r is not None:
        t = r["total"]
        model = (f"; kernels {t['gflops']:.3g} GFLOP/s = {t['pct_of_peak']:.3g}% of peak"
                 if t["gflops"] is not None else
                 f"; kernels' GFLOP/s unknown: {t['unknown_reason']}" if t.get("unknown_reason") else "")
        log(f"roofline  peak {r['peak_gflops']:.0f} GFLOP/s, memory {r['bandwidth_gbs']:.1f} GB/s "
            f"({r['threads']} threads, measured){model}")
    return r


def log_by_length(m: dict, log) -> None:
    """One line per value of the symbolic size the memory is given as a function of."""
    from irviz.core.frontend.structure_only import format_bytes as size

    by = m.get("by_length") or {}
    if by.get("error"):
        log(f"memory   not planned by size: {by['error']}")
    fixed = "".join(f", {k}={v}" for k, v in (by.get("fixed") or {}).items())
    for r in by.get("rows") or ():
        what = (f"planned {size(r['planned_bytes'])}, peak {size(r['peak_bytes'])}"
                if "planned_bytes" in r else f"not planned: {r.get('error')}")
        log(f"memory   {by['dim']}={r['value']}{fixed}: activations {what}")


def _build_only(ws, args, failure: Failure, summary: dict, log, not_run: str | None = None) -> None:
    """Build, no run, and no failure: a model without weights (`not_run` None), or a target whose
    device is not here (`not_run` says why: a cross-compiled CPU, a GPU). The build's memory too."""
    if not_run is None:
        log("run      structure only: no weights to run with (built, not run; the estimate below "
            "times its kernels instead)" if args.estimate is not False else
            "run      structure only: no weights to run with (built, not run)")
    try:
        st = ws.step_at()
        built = ws.build_step(st)
    except Exception as exc:
        failure.record(ws.stage, exc)
        return
    summary.update(build_seconds=round(built.seconds, 4),
                   verdict="structure only" if not_run is None else "built, not run")
    if not_run is not None:
        summary["not_run_reason"] = not_run
        log(f"run      built for {ws.target_name}; no such device here, not run ({not_run})")
    summary["memory"] = m = _memory_fields(built, args.func, st.mod, ws, log)
    if m:
        from irviz.core.frontend.structure_only import format_bytes as size

        log(f"memory   weights {size(m.get('weights_bytes', 0))} "
            f"{'/'.join(m.get('weights_dtypes') or {})}, activations planned "
            f"{size(m['planned_bytes'])}, peak {size(m['peak_bytes'])} "
            f"{'/'.join(m['activation_dtypes'])}")


def _estimate(ws, args, summary: dict, log) -> None:
    """summary["estimated_ms"] and summary["estimate"] (per-kernel rows); a failure is logged and
    kept in summary["estimate"]["error"], never the check's."""
    if not (args.estimate or (args.estimate is None and summary["structure_only"])):
        return
    if summary["structure_only"] and args.estimate is None:
        log("estimate timing each distinct kernel alone (kept per CPU; --no-estimate leaves it out)")
    shown, last = ws.progress, [time.monotonic()]

    def progress(text, fraction=None, **_):  # a slow estimate says where it is every few seconds
        if text.startswith("Timing") and time.monotonic() - last[0] >= 5:
            last[0] = time.monotonic()
            log(f"estimate {text}")

    ws.progress = progress
    try:
        est = ws.estimate(func=args.func)
    except Exception as exc:  # the estimate is extra; the check stands without it
        from irviz.core.tuning.measuring import first_line

        summary["estimate"] = {"error": first_line(exc)}
        log(f"estimate could not estimate: {first_line(exc)}")
        return
    finally:
        ws.progress = shown
    summary["estimated_ms"] = round(est["estimated_ms"], 4)
    summary["estimate"] = est
    for line in estimate_lines(est):
        log(line)


def estimate_lines(est: dict, most: int = 8) -> list[str]:
    """The estimate as check prints it: the total, where the sizes came from, the largest kernels."""
    dims = ", ".join(f"{k}={v} ({est['dims_source'].get(k)})" for k, v in est["dims"].items())
    step = f" (kernels of step {est['from_step']} {est['from_pass']})" \
        if est.get("from_step") not in (None, est.get("step")) else ""
    out = [f"estimate {est['estimated_ms']:.3f} ms from {len(est['kernels'])} distinct kernels "
           f"({est['measured']} timed, {est['cached']} from the cache, "
           f"{est.get('extrapolated', 0)} extrapolated, {est['seconds']:.1f} s)"
           f"{step}" + (f" at {dims}" if dims else "")]
    if est.get("vm_entry_ms") is not None:
        out.append(f"  VM: {1e3 * est['vm_entry_ms']:.2f} µs into main, {est.get('vm_other_instructions', 0):.0f} "
                   f"instructions besides kernel calls {1e3 * est.get('vm_other_ms', 0):.2f} µs")
    out.append(f"  {'kernel':36} {'calls':>5} {'ms each':>10} {'total ms':>10} {'share':>6}")
    for r in est["kernels"][:most]:
        how = f"  extrapolated from its {r.get('extrapolated_from', 'FLOPs')}" if r.get("extrapolated") else ""
        out.append(f"  {r['name'][:36]:36} {r['calls']:5d} {r['ms']:10.4f} {r['total_ms']:10.3f} "
                   f"{100 * r['share']:5.1f}%{how}"
                   + ("  timed writing over an operand (memory)" if r.get("in_place") else ""))
    if len(est["kernels"]) > most:
        out.append(f"  ... {len(est['kernels']) - most} more")
    for m in est["not_estimated"]:
        out.append(f"  not estimated: {m['name']} ({m['calls']} calls): {m['why']}")
    folded = est.get("folded") or []
    if folded:
        out.append(f"  left out: {sum(f['calls'] for f in folded)} calls of {len(folded)} kernels on the "
                   f"weights alone (e.g. {folded[0]['name']}): a build with the weights folds them")
    out.extend(f"  note: {n}" for n in est["notes"])
    return out


def _target_fields(ws) -> dict:
    target = ws.builds_for
    return {"target": target.shown, "target_dict": target.as_dict()}


def _decisions(ws, log) -> list[dict]:
    """The measured CPU decisions of the pipeline (each once), logged as the kernel table shows them."""
    from irviz.core.views.decisions import describe_decision, describe_tile, pipeline_decisions, provisional_summary

    out = pipeline_decisions(ws.session.steps[1:])
    for d in out:
        if d["kind"] in ("library_or_tir", "whole_model"):
            log(f"decide   {d['workload']}: {describe_decision(d)}")
        elif d.get("choice"):
            log(f"tile     {d['kernel']}: {describe_tile(d)}")
    summary = provisional_summary(out)
    if summary:
        log(f"decide   {summary}")
    return out


def _check(args, out) -> int:
    quiet = args.json == "-"
    log = log_for(args)
    failure = Failure(args.verbose)
    summary = {"ok": False, "failed_stage": None, "error": None, "model": args.model,
               "pipeline": args.pipeline, "importer": args.importer, "steps": [],
               "max_abs_error": None, "max_rel_error": None, "allclose": None,
               "tvm_ms": None, "torch_ms": None, "reliable": None, "reason": None,
               "threads": None, "build_seconds": None, "reference": None, "func": args.func, "verdict": None,
               "not_comparable": None, "estimated_ms": None, "kernels": [], "kernels_reliable": None,
               "kernels_reason": None}
    graph_breaks = not getattr(args, "no_weights", False) and getattr(args, "capture", None) in (None, "export")
    if graph_breaks:  # "capture failed" is said only if the graph-break fallback fails too
        failure.held.add("capture")
    ws = open_workspace(args, failure, log)
    failure.held.clear()
    if ws is None and failure.stage == "capture" and graph_breaks:
        from irviz.cli.graph_breaks import check_graph_breaks

        check_graph_breaks(args, failure, summary, log)
        failure.report()
    elif ws is None and failure.stage == "capture":
        failure.report()
    summary["structure_only"] = bool(ws is not None and ws.structure_only)
    summary.update(ran=False, not_run_reason=None)
    not_run = ws.not_run_reason() if ws is not None and failure.stage is None else None
    if summary["structure_only"] and failure.stage is None:
        _build_only(ws, args, failure, summary, log)
    elif not_run is not None:
        _build_only(ws, args, failure, summary, log, not_run)
    elif ws is not None and failure.stage is None:
        try:
            built, res = ws.build_run(repeats=args.repeats, func=args.func)
        except Exception as exc:
            failure.record(ws.stage, exc)
        else:
            summary.update(build_seconds=round(built.seconds, 4), ran=True,
                           max_abs_error=finite(res.max_abs_error),
                           max_rel_error=finite(res.max_rel_error), allclose=res.allclose,
                           tvm_ms=round(res.tvm_ms, 4), torch_ms=finite(round(res.torch_ms, 4)),
                           reliable=res.reliable, reason=res.reason,
                           threads=res.threads, timing=_timing_fields(res), func=res.func)
            summary["memory"] = _memory_fields(built, res.func, ws.step_at().mod, ws, log)
            # "torch" rather than "PyTorch": the JSON's values are short identifiers
            summary["reference"] = {"PyTorch": "torch", None: "none"}.get(ws.reference_name, ws.reference_name)
            if res.allclose is None:
                log(f"run      tvm {res.tvm_ms:.3f} ms  ({res.threads} threads)  "
                    "no reference to compare with")
            else:
                torch_part = f"torch {res.torch_ms:.3f} ms  " if finite(res.torch_ms) is not None else ""
                log(f"run      tvm {res.tvm_ms:.3f} ms  {torch_part}"
                    f"({res.threads} threads)  max abs error {res.max_abs_error:.3g} "
                    f"against {ws.reference_name}")
            if not res.reliable:
                log(f"timing   unreliable: {res.reason}")
            summary.update(kernel_fields(res, log))
            _kernel_fx_nodes(ws, summary)
            summary["roofline"] = _roofline_fields(built, res, log)
            # "ran" would read like a result: with nothing to compare with, the numbers are unjudged
            summary.update(verdict="not judged" if res.verdict == "ran" else res.verdict,
                           not_comparable=res.not_comparable)
            if res.allclose is False and res.not_comparable:
                # differs by nature (random op, order-dependent writes): not a compiler bug, no pass
                failure.mismatch(f"not comparable: {res.not_comparable} (outputs differ from "
                                 f"{ws.reference_name}: max abs error {res.max_abs_error:.3g})")
            elif res.allclose is False:
                failure.mismatch(f"outputs differ from {ws.reference_name}: max abs error {res.max_abs_error:.3g}, "
                                 f"max rel error {res.max_rel_error:.3g}")
            else:
                _check_alt_sizes(ws, args, failure, summary, log)
    if ws is not None and ws.session is not None and summary.get("build_seconds") is not None:
        _estimate(ws, args, summary, log)
    if getattr(args, "intermediates", False) and summary["structure_only"]:
        log("nodes    structure only: no weights to run with (intermediates not compared)")
    elif getattr(args, "intermediates", False) and summary["not_run_reason"]:
        log("nodes    not run here: intermediates not compared")
    elif getattr(args, "intermediates", False) and ws is not None and ws.session is not None:
        _check_intermediates(ws, args, failure, summary, log)
    if getattr(args, "peer", None) and ws is not None and ws.captured is not None:
        _peer(ws, args, summary, log)
    elif getattr(args, "peer", None):
        summary["peer"] = {"compiler": args.peer, "freezing": args.peer_freezing,
                           "error": "no PyTorch model captured to compile"}
        log(f"peer     {args.peer}: not compiled: no PyTorch model captured to compile")
    if ws is not None and ws.session is not None:
        from irviz.core.passes import pipeline_text

        summary["pipeline_text"] = pipeline_text(ws.session.full_pipeline())
        summary["params_file"] = ws.params_file
    if ws is not None:
        summary["importer"] = ws.importer
        summary["capture"] = ws.capture
        summary["capture_notes"] = list(getattr(ws.captured, "notes", ()))  # a fallback's, if any
    if ws is not None and ws.session is not None:
        # the learner's schedule primitives first ("origin": "schedule", with their line), then the passes
        summary["steps"] = [{"pass": s.pass_name, "changed": s.changed, "changed_what": s.changed_what,
                             "notes": list(s.notes), "seconds": round(s.seconds, 6), "origin": s.origin,
                             **({"params": dict(s.params)} if s.origin == "schedule" else {})}
                            for s in ws.session.steps[1:]]
        summary["decisions"] = _decisions(ws, log)
        summary["decisions_provisional"] = sum(1 for d in summary["decisions"] if d.get("provisional"))
    if ws is not None:
        summary["stage_seconds"] = {k: round(v, 4) for k, v in ws.stage_seconds.items()}
    summary["cpu"] = _cpu_fields()
    if ws is not None:  # the target was resolved before anything loaded
        summary.update(_target_fields(ws))
    summary.update(failed_stage=failure.stage, error=failure.error, ok=failure.stage is None)
    write_json(args.json, summary, out)
    if not quiet:
        if summary["ok"] and summary["structure_only"]:
            print("OK (structure only: built, not run: no weights to run with)")
        elif summary["ok"] and summary["not_run_reason"]:
            print(f"built for {summary['target']}; no such device here, not run")
        elif summary["ok"] and summary.get("verdict") == "not judged":
            # exit 0 (nothing failed), but an "OK" here would vouch for numbers nobody checked
            print("ran, not judged: no reference to compare with")
        else:
            print("OK" if summary["ok"] else f"NOT COMPARABLE: {summary['not_comparable']}"
                  if summary.get("verdict") == "not comparable" and failure.stage == "compare"
                  else f"FAILED at {summary['failed_stage']}")
    if not summary["ok"]:
        return 1
    return EXIT_NOT_RUN if summary["not_run_reason"] else 0


def _check_intermediates(ws, args, failure: Failure, summary: dict, log) -> None:
    """--intermediates: summary["intermediates"] (one entry per compared FX node) and
    summary["first_divergence"]; a divergence fails `compare` (when nothing failed before)."""
    try:
        res = ws.compare_intermediates(rtol=args.rtol, atol=args.atol)
    except Exception as exc:
        if failure.stage is None:
            failure.record(ws.stage or "run", exc)
        return
    summary["intermediates"] = [
        {"fx_node": n.fx_node, "relax_var": n.relax_var, "max_abs": finite(n.max_abs),
         "max_rel": finite(n.max_rel), "status": n.status, "reason": n.reason,
         "kernel": n.kernel, "compared_as": n.compared_as}
        for n in res.nodes]
    summary["first_divergence"] = res.first_divergence
    matched = [n for n in res.nodes if n.status != "unmatched"]
    log(f"nodes    {len(matched)} of {len(res.nodes)} FX nodes compared at step {res.step} "
        f"({res.pass_name}), {sum(res.seconds.values()):.2f} s")
    if res.first_divergence is None:
        log("nodes    every compared node is within tolerance")
    else:
        n = next(x for x in res.nodes if x.fx_node == res.first_divergence)
        log(f"first divergence: {n.fx_node} (relax {n.relax_var}): {n.reason}")
    log(f"  {'fx node':32} {'relax var':12} {'max abs':>10} {'max rel':>10}  status")
    for n in res.worst(10):
        log(f"  {n.fx_node[:32]:32} {str(n.relax_var)[:12]:12} {n.max_abs:10.3g} {n.max_rel:10.3g}  {n.status}")
    if res.first_divergence is not None and failure.stage is None:
        failure.mismatch(f"intermediates diverge from torch first at {res.first_divergence}")


def _kernel_fx_nodes(ws, summary: dict) -> None:
    """Each TVM kernel's FX nodes (provenance at the step that ran); None where unknown."""
    fx = {}
    if ws.captured is not None and ws.session is not None:
        try:
            from irviz.core.peer import kernel_fx_nodes

            fx = kernel_fx_nodes(ws.step_at(), ws.captured.graph)
        except Exception:  # the mapping is extra; a kernel without it says None
            fx = None
    for k in summary["kernels"]:
        k["fx_nodes"] = None if fx is None else list(fx.get(k["name"], ()))


def _peer(ws, args, summary: dict, log) -> None:
    """summary["peer"]: torch.compile (inductor) beside TVM; its failure is kept in
    summary["peer"]["error"] and never fails the check."""
    from irviz.core.peer.peer_report import inductor_peer, peer_lines

    threads = summary.get("threads")
    if not threads:
        from irviz.core.backend.run import tvm_threads

        threads = tvm_threads()
    freezing = bool(args.peer_freezing)
    log(f"peer     compiling with torch.compile (inductor{', freezing' if freezing else ''}) on {threads} threads")
    from irviz.core.peer.side_by_side import kernel_fx_calls

    try:  # which binding calls each kernel for which nodes: one function called for two layers
        calls = kernel_fx_calls(ws.step_at(), ws.captured.graph) if summary.get("kernels") else {}
    except Exception:  # the mapping is extra, as the kernels' fx_nodes are
        calls = {}
    try:
        report = inductor_peer(ws.captured, threads=threads, repeats=args.repeats, freezing=freezing,
                               tvm_calls=calls, tvm_kernels=summary.get("kernels") or [],
                               tvm_fx={k["name"]: k.get("fx_nodes") or [] for k in summary.get("kernels") or []})
    except Exception as exc:  # the peer is extra; the check stands without it
        report = {"compiler": "inductor", "freezing": freezing, "error": f"{type(exc).__name__}: {exc}"[:500]}
    report.pop("tvm_kernels", None)  # summary["kernels"] already holds them
    summary["peer"] = report
    for line in peer_lines(report):
        log(line)
