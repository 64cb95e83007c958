"""`irviz code`: what each kernel of a step becomes on a target: a table of counts, or one kernel's
assembly, LLVM IR or GPU source."""
from __future__ import annotations

import argparse
import json
import sys

from irviz.cli.common import Failure, add_model_arguments, add_target_argument, open_workspace, write_json
from irviz.core.views.counts_text import counts_comment, parts_text, widths_compact

# irviz.core modules that load TVM are imported inside the functions (see common).

CODE_HELP = "what each kernel of a step becomes on a target: counts, assembly, LLVM IR or GPU source"


def add_code_arguments(p: argparse.ArgumentParser) -> None:
    add_model_arguments(p)
    add_target_argument(p, help_more="; default: host, or cuda for the gpu pipeline")
    p.add_argument("--step", type=int, default=None, metavar="N",
                   help="the step whose kernels to compile (default: the last)")
    p.add_argument("--kernel", metavar="NAME", help="print this kernel's code (default: a table of all)")
    p.add_argument("--format", metavar="FMT", default=None,
                   help="with --kernel: asm (default) or ll for a CPU target; a GPU target has its "
                        "source only")
    p.add_argument("--diff-target", metavar="T2",
                   help="with --kernel: a unified diff of its code on --target against T2 (e.g. "
                        "--target x86-avx2 --diff-target x86-avx512), counts of both above")
    p.add_argument("--json", metavar="PATH", help="write every kernel's counts as JSON ('-' = stdout)")


def _table(code) -> list[str]:
    lines = [f"target   {code.target_name}  {json.dumps(code.target)}  ({code.seconds:.2f} s)"]
    if code.gpu:
        lines.append(f"{'kernel':40} {'grid':>14} {'block':>12} {'shared B':>9} {'lines':>6}")
        for k in code.kernels.values():
            if k.error:
                lines.append(f"{k.name:40} not compiled: {k.error.splitlines()[0]}")
                continue
            for i, launch in enumerate(k.launch or [{"grid": "?", "block": "?"}]):
                grid = "x".join(map(str, launch["grid"])) if isinstance(launch["grid"], list) else "?"
                block = "x".join(map(str, launch["block"])) if isinstance(launch["block"], list) else "?"
                name = k.name if i == 0 else f"  {launch.get('function', '')}"
                lines.append(f"{name[:40]:40} {grid:>14} {block:>12} "
                             f"{k.counts['shared_bytes'] if i == 0 else '':>9} {k.counts['lines'] if i == 0 else '':>6}")
        return lines
    lines.append(f"{'kernel':40} {'instr':>6} {'vector':>6} {'widths (bits:n)':>18} {'fma':>5} "
                 f"{'vfma':>5} {'loops':>5} {'calls':>5}  calls out")
    rows = [(k.name, k.counts, k.error, k.parts) for k in code.kernels.values()]
    for name, c, err, parts in [*rows, ("total", code.totals(), None, {})]:
        if err:
            lines.append(f"{name:40} not compiled: {err.splitlines()[0]}")
            continue
        callees = ", ".join(f"{f}×{n}" for f, n in list(c.get("callees", {}).items())[:4])
        lines.append(f"{name[:40]:40} {c.get('instructions', 0):6} {c.get('vector', 0):6} "
                     f"{widths_compact(c.get('vector_bits', {})):>18} {c.get('fma', 0):5} {c.get('vector_fma', 0):5} "
                     f"{c.get('loops', 0):5} {c.get('calls', 0):5}  {callees}")
        if parts:
            lines.append(f"  {parts_text(parts)}")
    return lines


def _counts_line(code, k) -> str:
    return counts_comment(code.gpu, k.name, k.counts, k.launch, k.parts)


def run_code(args) -> int:
    failure = Failure(args.verbose)
    log = (lambda msg: print(msg, file=sys.stderr))
    ws = open_workspace(args, failure, log)
    if ws is None or ws.session is None or failure.stage is not None:
        return 1
    from irviz.core.backend.kernel_code import kernel_code

    # none given: the host, or the GPU the gpu pipeline's passes scheduled for
    args.target = args.target or ws.target_name or "host"
    steps = ws.session.steps
    index = len(steps) - 1 if args.step is None else args.step
    if not 0 <= index < len(steps):
        print(f"irviz: no step {index}: the pipeline has steps 0..{len(steps) - 1}", file=sys.stderr)
        return 2
    try:
        # one kernel alone compiles in a fraction of the step's time
        code = kernel_code(steps[index].mod, args.target, only=None if args.json else args.kernel)
    except Exception as exc:
        failure.record("build", exc)
        return 1
    if args.json:
        write_json(args.json, {"step": index, "pass": steps[index].pass_name, **code.as_dict()})
        if args.json == "-":
            return 0
    if args.kernel is None:
        print(f"step     {index} ({steps[index].pass_name})")
        print("\n".join(_table(code)))
        return 0 if all(k.error is None for k in code.kernels.values()) else 1
    k = code.kernels.get(args.kernel)
    if k is None:
        print(f"irviz: no kernel {args.kernel!r} at step {index}; kernels: {', '.join(code.kernels)}",
              file=sys.stderr)
        return 2
    if k.error:
        print(f"irviz: {k.error}", file=sys.stderr)
        return 1
    fmt = args.format or code.formats()[0]
    if fmt not in k.code:
        print(f"irviz: no {fmt!r} code for target {code.target_name}; formats: {', '.join(k.code)}",
              file=sys.stderr)
        return 2
    if args.diff_target:
        return _print_diff(code, k, fmt, steps, index, args)
    print(f"# {k.name} on {code.target_name} {json.dumps(code.target)}, step {index} "
          f"({steps[index].pass_name})\n# {_counts_line(code, k)}")
    print(k.code[fmt])
    return 0


def _print_diff(code, k, fmt: str, steps, index: int, args) -> int:
    """The kernel's code on --target against --diff-target: both counts, then a unified diff."""
    import difflib

    from irviz.core.backend.kernel_code import kernel_code

    try:
        other = kernel_code(steps[index].mod, args.diff_target, only=k.name)
    except Exception as exc:
        Failure(args.verbose).record("build", exc)
        return 1
    k2 = other.kernels[k.name]
    if k2.error or fmt not in k2.code:
        print(f"irviz: {k2.error or f'no {fmt!r} code for {other.target_name}'}", file=sys.stderr)
        return 1
    print(f"# {k.name}, step {index} ({steps[index].pass_name})\n"
          f"# --- {code.target_name}: {_counts_line(code, k)}\n"
          f"# +++ {other.target_name}: {_counts_line(other, k2)}")
    sys.stdout.writelines(difflib.unified_diff(
        k.code[fmt].splitlines(keepends=True), k2.code[fmt].splitlines(keepends=True),
        fromfile=f"{k.name} {code.target_name}", tofile=f"{k.name} {other.target_name}", n=2))
    return 0
