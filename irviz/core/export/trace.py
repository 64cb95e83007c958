"""Write a session's pass trace to a folder, and load an exported step back.

    out/
      step_00_import.py        TVMScript of the module + a loader (plain Python, see the header)
      step_00_import.params    its tensor constants (tvm.runtime.save_param_dict, print order)
      step_03_CallTIRRewrite.txt   a step TVM's parser cannot read back: text only, says so
      diffs/step_01.diff       unified diff against the previous step (changed functions only)
      steps.json               model, importer, and per step: pass, params, seconds, changed,
                               added/removed/changed functions, files, loadable
      report.html              one self-contained page: the trace, diffs, build/run results

Round trip: ``mod.script()`` prints tensor constants as ``metadata["ir.GenericConst"][k]`` and
omits them; the parser accepts them back through ``extra_vars`` in the same order (shared
NOTES.md, examples/16).  A step is written as ``.py`` only when it is known to load: its pass (and
every pass before it) is a built-in known to round-trip, or the text was parsed back with the
constants and found structurally equal to the step's module (see ``export_trace(verify=...)``).
Otherwise it is written as ``.txt`` with a NOT LOADABLE header and ``"loadable": false``.  Never ``tvm.ir.save_json`` / ``script(show_meta=True)``
(both segfault in TVM 0.27).
"""
from __future__ import annotations

import ast
import datetime as _dt
import html
import json
import os
import re
import time
from pathlib import Path

from irviz.core.views import diff as diff_mod
from irviz.core.errors import ExportError

__all__ = ["export_trace", "load_exported", "html_report", "module_script",
           "tensor_constants_in_print_order", "parse_script"]

_STEP_FILE_RE = re.compile(r"^step_\d{2,}_.*\.(py|params|txt)$")
_DIFF_FILE_RE = re.compile(r"^step_\d{2,}\.diff$")
_CLASS_DEF_RE = re.compile(r"^    def ([A-Za-z_]\w*)\(", re.M)
MAX_REPORT_ROWS_PER_STEP = 1500


# -------------------------------------------------------------------------------------------------
# script + constants


def _function_print_order(mod, text: str) -> list[str]:
    names = {gv.name_hint for gv in mod.get_global_vars()}
    order = [n for n in _CLASS_DEF_RE.findall(text) if n in names]
    seen = set(order)
    return order + sorted(n for n in names if n not in seen)


def tensor_constants_in_print_order(mod, text: str | None = None) -> list:
    """The GenericConsts holding tensors, in the order ``mod.script()`` numbers them."""
    from irviz.core.tvm_compat import GenericConst, RuntimeTensor, relax

    if text is None:
        text = mod.script()
    order: list = []
    seen: set[int] = set()

    def visit(e):
        # 0-d tensors print inline as R.const(v, dtype), not as metadata entries
        if (isinstance(e, GenericConst) and isinstance(e.value, RuntimeTensor)
                and len(e.value.shape) > 0):
            h = e.__chandle__()
            if h not in seen:
                seen.add(h)
                order.append(e)

    funcs = {gv.name_hint: f for gv, f in mod.functions.items()}
    for name in _function_print_order(mod, text):
        f = funcs[name]
        if isinstance(f, relax.Function):
            relax.analysis.post_order_visit(f, visit)
    return order


_META_REF_RE = re.compile(r'metadata\["ir\.GenericConst"\]\[(\d+)\]')


def metadata_count(text: str) -> int:
    """1 + the largest metadata["ir.GenericConst"][k] index in a printed script (0 if none)."""
    return max((int(k) + 1 for k in _META_REF_RE.findall(text)), default=0)


def module_script(mod) -> tuple[str, list]:
    """(``mod.script()``, tensor constants in print order)."""
    text = mod.script()
    return text, tensor_constants_in_print_order(mod, text)


def parse_script(text: str, consts) -> object:
    """TVMScript text + constants (GenericConst or tensors, print order) -> IRModule."""
    from tvm.script import from_source

    from irviz.core.tvm_compat import GenericConst, I, R, T, relax

    table = [c if isinstance(c, GenericConst) else relax.const(c) for c in consts]
    return from_source(text, extra_vars={"metadata": {"ir.GenericConst": table},
                                         "I": I, "R": R, "T": T})


def _params_bytes(consts) -> bytes:
    import tvm

    return bytes(tvm.runtime.save_param_dict({f"c{k:04d}": c.value for k, c in enumerate(consts)}))


def _write_params(path: Path, consts, written: dict) -> None:
    """Write the constants; when an earlier step of this export had the very same constant
    objects, hard-link its file instead (ResNet-18: 45 MB per step otherwise)."""
    key = tuple(c.__chandle__() for c in consts)
    prev = written.get(key)
    if prev is not None:
        try:
            os.link(prev, path)
            return
        except OSError:
            pass
    path.write_bytes(_params_bytes(consts))
    written[key] = path


def _load_params(path) -> list:
    import tvm

    from irviz.core.tvm_compat import relax

    with open(path, "rb") as f:
        table = tvm.runtime.load_param_dict(f.read())
    return [relax.const(table[k]) for k in sorted(table)]


def _roundtrip_ok(mod, text, consts) -> tuple[bool, str]:
    from irviz.core.tvm_compat import structural_equal

    try:
        back = parse_script(text, [c.value for c in consts])
    except Exception as exc:  # noqa: BLE001 - the parser's complaint becomes the note
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
        first = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else type(exc).__name__)
        where = next((ln for ln in lines if ln.startswith("-->")), "")
        return False, f"TVM's parser rejects the printed script: {first[:200]} {where}".rstrip()
    if not structural_equal(back, mod):
        return False, "the printed script parses but is not structurally equal to the module"
    return True, ""


# -------------------------------------------------------------------------------------------------
# .py step files


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "pass"


def _string_literal(text: str) -> str:
    if "'''" not in text and not text.endswith("\\"):
        return "r'''\n" + text + "'''"
    return repr(text)


_LOADER = '''

def load(params_path=None):
    """Parse SCRIPT with the tensor constants from the sibling .params file -> tvm.IRModule."""
    import os

    import tvm
    from tvm import relax
    from tvm.script import from_source
    from tvm.script import ir as I
    from tvm.script import relax as R
    from tvm.script import tirx as T

    if params_path is None:
        params_path = os.path.splitext(os.path.abspath(__file__))[0] + ".params"
    with open(params_path, "rb") as f:
        table = tvm.runtime.load_param_dict(f.read())
    consts = [relax.const(table[k]) for k in sorted(table)]  # keys c0000, c0001, ...: print order
    return from_source(SCRIPT, extra_vars={"metadata": {"ir.GenericConst": consts},
                                           "I": I, "R": R, "T": T})


if __name__ == "__main__":
    mod = load()
    print(f"{__file__}: IRModule with {len(mod.functions)} functions: "
          + ", ".join(sorted(gv.name_hint for gv in mod.get_global_vars())))
'''


def _header_lines(session, step, stem: str, loadable: bool, note: str, text: str = "") -> list[str]:
    applied = [s.pass_name for s in session.steps[1:step.index + 1]]
    what = "the imported module" if step.index == 0 else f"the IRModule after pass {step.pass_name}"
    lines = [
        f"# irviz export: step {step.index:02d} of model {session.name!r}: {what}",
        f"# importer: {getattr(session.imported, 'importer', '?')}; "
        f"pass params: {json.dumps(_jsonable(step.params))}",
        f"# passes so far: {', '.join(applied) if applied else '(none)'}",
        "#",
    ]
    if loadable:
        lines += [
            "# SCRIPT below is the module's TVMScript (mod.script()).  Its tensor constants, printed as",
            f'# metadata["ir.GenericConst"][k], are in the sibling file {stem}.params',
            "# (tvm.runtime.save_param_dict; keys c0000, c0001, ... in print order).",
            "#",
            "# Load it (the .params file must stay next to this file):",
            f"#     python {stem}.py                       # parses it and prints a summary",
            f'#     mod = runpy.run_path("{stem}.py")["load"]()',
            f'#     mod = irviz.core.export.trace.load_exported("{stem}.py")',
            "# Do not call mod.script(show_meta=True) or tvm.ir.save_json(mod): TVM 0.27 segfaults.",
        ]
    else:
        lines += [
            "# NOT LOADABLE: this is TVMScript for reading only.",
            f"# {note}",
        ]
        if "alloc_tensor" in text:
            lines += ["# (TVM 0.27 prints alloc_tensor(..., ty_args=...) after CallTIRRewrite /",
                      "# StaticPlanBlockMemory / RewriteCUDAGraph, which its own parser rejects.)"]
        lines.append('# Tensor constants are omitted (printed as metadata["ir.GenericConst"][k]).')
    return lines


# -------------------------------------------------------------------------------------------------
# export


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        if isinstance(obj, float) and obj != obj:
            return None
        return obj
    return str(obj)


def _pass_roundtrip_flag(name: str) -> bool:
    if name == "import":
        return True
    try:
        from irviz.core import passes

        return bool(getattr(passes.get_pass(name), "roundtrip_ok", True))
    except Exception:  # noqa: BLE001 - unknown (e.g. unregistered user) pass: verify decides
        return True


def _trusted(name: str) -> bool:
    """Built-in TVM passes that round-trip (measured on ResNet-18 for zero and default_build)."""
    if name == "import":
        return True
    try:
        from irviz.core import passes

        spec = passes.get_pass(name)
    except Exception:  # noqa: BLE001
        return False
    return spec.category in ("tvm", "build") and bool(getattr(spec, "roundtrip_ok", True))


def _normalize_results(session, run_result=None, run_results=None) -> dict[int, object]:
    out: dict[int, object] = {}
    for rr in (run_results, run_result):
        if rr is None:
            continue
        if isinstance(rr, dict):
            out.update({int(k): v for k, v in rr.items() if v is not None})
        elif isinstance(rr, (list, tuple)):
            out.update({i: v for i, v in enumerate(rr) if v is not None})
        else:
            out.setdefault(session.cursor, rr)
    return out


def export_trace(session, out_dir, steps=None, run_result=None, run_results=None,
                 verify="auto", latency=None) -> Path:
    """Write the trace (see the module docstring) to ``out_dir``; returns its Path.

    steps: indices to export (default all).  run_result: a build.RunResult for the cursor step, or
    run_results {step index: RunResult}; shown in report.html and steps.json.
    verify: True parses every step file back and compares it with the step's module (slow: the
    TVMScript parser takes seconds per step on ResNet-18); "auto" (default) does that only where
    it is not known: a step after a pass that is not a built-in TVM/build pass known to round-trip
    (user, course, library, schedule passes), or after a step that did not round-trip.  A built-in
    round-tripping pass applied to a module that round-trips is trusted, as measured on ResNet-18
    for zero and default_build (shared NOTES.md).  False trusts PassSpec.roundtrip_ok alone.  A step whose pass has
    roundtrip_ok=False is never written as .py.
    latency: a trace from ``irviz.core.backend.latency.latency_trace`` (one entry per step): report.html
    shows it as a chart and a table, steps.json keeps it under "latency".
    """
    out = Path(out_dir)
    n = len(session.steps)
    indices = list(range(n)) if steps is None else sorted({(int(i) + n) % n if int(i) < 0 else int(i)
                                                          for i in steps})
    bad = [i for i in indices if not 0 <= i < n]
    if bad:
        raise ExportError(f"no step {bad[0]} to export: the session has steps 0..{n - 1}")
    results = _normalize_results(session, run_result, run_results)
    try:
        (out / "diffs").mkdir(parents=True, exist_ok=True)
        for p in out.iterdir():  # stale files of an earlier export into the same folder
            if p.is_file() and _STEP_FILE_RE.match(p.name):
                p.unlink()
        for p in (out / "diffs").iterdir():
            if p.is_file() and _DIFF_FILE_RE.match(p.name):
                p.unlink()
    except OSError as exc:
        raise ExportError(f"cannot write to {out}: {exc}", hint="choose a folder you can write to") from exc

    records = []
    files: dict[int, dict] = {}
    written_params: dict = {}  # constant handles -> a .params file already holding exactly them
    # True while the module at this step is known to round-trip: the import, then built-in passes
    # known to keep that (NOTES.md), or a step that was parsed back and found equal
    trusted_so_far = True
    for i in range(n):
        step = session.steps[i]
        flag_ok = _pass_roundtrip_flag(step.pass_name)
        trusted_so_far = trusted_so_far and _trusted(step.pass_name)
        if i not in indices:
            continue
        stem = f"step_{i:02d}_{_safe(step.pass_name)}"
        t0 = time.perf_counter()
        text, consts = module_script(step.mod)
        count_ok = metadata_count(text) == len(consts)
        check = verify is True or (verify == "auto" and not (trusted_so_far and count_ok))
        verified = False
        if not flag_ok:
            loadable, note = False, (f"{step.pass_name} is marked as not round-tripping "
                                     "(PassSpec.roundtrip_ok=False).")
        elif check:
            loadable, note = _roundtrip_ok(step.mod, text, consts)
            verified = loadable
            # a module that round-trips stays so under the built-in passes that keep it so
            trusted_so_far = loadable
        elif (trusted_so_far or verify is False) and count_ok:
            loadable, note = True, ""
        else:
            loadable, note = False, ("not verified" if count_ok else
                                     "the constants found do not match the script's metadata table")
        rec_files = {}
        try:
            if loadable:
                body = "\n".join(_header_lines(session, step, stem, True, note))
                body += "\n\nSCRIPT = " + _string_literal(text) + "\n" + _LOADER
                (out / f"{stem}.py").write_text(body, encoding="utf-8")
                _write_params(out / f"{stem}.params", consts, written_params)
                rec_files = {"file": f"{stem}.py", "params_file": f"{stem}.params"}
            else:
                body = "\n".join(_header_lines(session, step, stem, False, note, text)) + "\n\n" + text
                (out / f"{stem}.txt").write_text(body, encoding="utf-8")
                rec_files = {"file": f"{stem}.txt", "params_file": None}
            if i > 0:
                udiff = diff_mod.unified_diff(session.steps[i - 1].mod, step.mod)
                (out / "diffs" / f"step_{i:02d}.diff").write_text(udiff, encoding="utf-8")
                rec_files["diff_file"] = f"diffs/step_{i:02d}.diff"
            else:
                rec_files["diff_file"] = None
        except OSError as exc:
            raise ExportError(f"cannot write {stem} in {out}: {exc}") from exc
        ch = step.changes
        rec = {
            "index": i, "pass": step.pass_name, "params": _jsonable(step.params),
            "seconds": round(float(step.seconds), 6), "changed": bool(step.changed),
            "added": list(ch.added), "removed": list(ch.removed), "changed_funcs": list(ch.changed),
            **rec_files, "loadable": bool(loadable), "verified": verified, "constants": len(consts),
            "note": note or None, "export_seconds": round(time.perf_counter() - t0, 4),
        }
        if i in results:
            rec["run"] = _run_dict(results[i])
        records.append(rec)
        files[i] = rec

    summary = {
        "irviz_export": 1,
        "model": session.name,
        "spec": getattr(getattr(session.captured, "loaded", None), "spec", None),
        "importer": getattr(session.imported, "importer", None),
        "target": str(session._target) if getattr(session, "_target", None) is not None else None,
        "created": _dt.datetime.now().isoformat(timespec="seconds"),
        "cursor": session.cursor,
        "planned": [{"name": inv.name, "params": _jsonable(inv.params)} for inv in session.pipeline],
        "error": session.error.user_message() if getattr(session, "error", None) is not None else None,
        "steps": records,
    }
    if latency:
        summary["latency"] = [{k: _jsonable(v) for k, v in e.items() if k != "error_detail"}
                              for e in latency]
    try:
        (out / "steps.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        (out / "report.html").write_text(
            html_report(session, results, files=files, steps=indices, latency=latency),
            encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write to {out}: {exc}") from exc
    return out


def is_exported_step(path) -> bool:
    """True for a step file written by export_trace (its first line says so)."""
    p = Path(path)
    if p.suffix != ".py" or not p.is_file():
        return False
    with open(p, encoding="utf-8", errors="replace") as f:
        return f.readline().startswith("# irviz export: step")


def load_exported(path):
    """An exported ``step_NN_<pass>.py`` (+ its sibling ``.params``) -> tvm.IRModule.

    Reads SCRIPT without running the file's code.  ExportError for a ``.txt`` (not loadable) step."""
    p = Path(path)
    try:
        src = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot read {p}: {exc}") from exc
    if p.suffix != ".py" or "# NOT LOADABLE" in src[:4000]:
        raise ExportError(f"{p.name} is not a loadable step file",
                          hint="TVM cannot parse the script printed after this pass; "
                               "only step_NN_*.py files with a .params next to them load")
    script = None
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SCRIPT"
                                                for t in node.targets):
            script = ast.literal_eval(node.value)
    if not isinstance(script, str):
        raise ExportError(f"{p.name} has no SCRIPT = '''...''' (not an irviz step file)")
    params = p.with_suffix(".params")
    if not params.exists():
        raise ExportError(f"{params.name} is missing next to {p.name}",
                          hint="keep the .params file beside the .py file")
    try:
        return parse_script(script, _load_params(params))
    except Exception as exc:  # noqa: BLE001
        raise ExportError(f"TVM could not parse {p.name}: {exc}") from exc


# -------------------------------------------------------------------------------------------------
# report.html

_CSS = """
body{font:14px/1.4 -apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px} h3{font-size:14px;margin:12px 0 4px}
.meta{color:#59636e;margin-bottom:16px}
table{border-collapse:collapse;margin:8px 0}
th,td{border:1px solid #d1d9e0;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa} td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.nochange td{color:#818b98}
.yes{color:#1a7f37;font-weight:600} .no{color:#818b98} .bad{color:#cf222e;font-weight:600}
details{margin:6px 0} summary{cursor:pointer}
details.step>summary{font-weight:600;font-size:15px;padding:4px 0}
.diff{font:12px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;border:1px solid #d1d9e0;
      border-radius:4px;overflow-x:auto;margin:4px 0 10px;white-space:pre}
.diff div{padding:0 8px} .diff .ln{display:inline-block;width:4.5em;color:#818b98;user-select:none}
.diff .add{background:#dafbe1} .diff .del{background:#ffebe9} .diff .hunk{background:#ddf4ff;color:#59636e}
.diff .add mark{background:#aceebb} .diff .del mark{background:#ffcecb}
.diff mark{color:inherit;border-radius:2px}
.diff .k{color:#cf222e} .diff .s{color:#0a3069} .diff .m{color:#0550ae} .diff .c{color:#6e7781}
.diff .d{color:#8250df} .diff .b{color:#8250df} .diff .f{color:#6639ba;font-weight:600}
.tag{font-size:12px;padding:0 5px;border-radius:8px;margin-left:4px}
.t-added{background:#dafbe1} .t-removed{background:#ffebe9} .t-changed{background:#fff8c5}
.note{color:#9a6700} .err{color:#cf222e;white-space:pre-wrap}
button{margin-right:6px}
.chart svg{max-width:100%;height:auto}
"""

_JS = """
function setAll(open){document.querySelectorAll('details').forEach(function(d){d.open=open;});}
"""


def _e(s) -> str:
    return html.escape(str(s), quote=True)


_HL_RE = re.compile(r"""
    (?P<c>\#.*$)
  | (?P<s>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<d>@[\w.]+)
  | (?P<kdef>\bdef\b)(?P<ws>\s+)(?P<f>\w+)
  | (?P<k>\b(?:with|for|in|return|if|elif|else|while|class|lambda|and|or|not|is|as|pass|
               True|False|None)\b)
  | (?P<m>\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)
""", re.X)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(css class, text) pieces of one line of TVMScript: comments, strings, decorators, keywords,
    function names, numbers.  A regex, not pygments: ~20x faster on ResNet-18's diffs."""
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _HL_RE.finditer(text):
        if m.start() > pos:
            out.append(("", text[pos:m.start()]))
        if m.group("kdef") is not None:
            out += [("k", m.group("kdef")), ("", m.group("ws")), ("f", m.group("f"))]
        else:
            kind = m.lastgroup
            out.append((kind, m.group(kind)))
        pos = m.end()
    if pos < len(text):
        out.append(("", text[pos:]))
    return out


def _marked(text: str, ranges) -> str:
    """One code line as HTML: syntax colours, and <mark> around the changed character ranges."""
    marks = [(max(0, s), min(e, len(text))) for s, e in (ranges or []) if e > s]
    segs: list[list] = []  # [marked, css class, text], neighbours merged
    pos = 0
    for cls, piece in _tokens(text):
        start, end = pos, pos + len(piece)
        pos = end
        cuts = {start, end}
        for s, e in marks:
            if start < s < end:
                cuts.add(s)
            if start < e < end:
                cuts.add(e)
        bounds = sorted(cuts)
        for a, b in zip(bounds, bounds[1:]):
            marked = any(s <= a and b <= e for s, e in marks)
            if segs and segs[-1][0] == marked and segs[-1][1] == cls:
                segs[-1][2] += text[a:b]
            else:
                segs.append([marked, cls, text[a:b]])
    out = []
    open_mark = False
    for marked, cls, frag in segs:
        if marked != open_mark:
            out.append("<mark>" if marked else "</mark>")
            open_mark = marked
        out.append(f'<span class="{cls}">{_e(frag)}</span>' if cls else _e(frag))
    if open_mark:
        out.append("</mark>")
    return "".join(out)


def _ln(n) -> str:
    return f'<span class="ln">{n if n is not None else ""}</span>'


def _render_rows(fd) -> tuple[str, int]:
    """Unified-style HTML lines from side-by-side rows (pairs shown as - then +)."""
    parts = []
    starts = set(fd.hunk_starts)
    for k, (lno, ltext, rno, rtext, tag, lr, rr) in enumerate(fd.rows):
        if k in starts:
            parts.append(f'<div class="hunk">@@ -{lno or 0} +{rno or 0} @@</div>')
        if tag == "equal":
            parts.append(f"<div>{_ln(rno)}  {_marked(rtext, [])}</div>")
        else:
            if lno is not None:
                mark = lr if tag == "replace" else []
                parts.append(f'<div class="del">{_ln(lno)}- {_marked(ltext, mark)}</div>')
            if rno is not None:
                mark = rr if tag == "replace" else []
                parts.append(f'<div class="add">{_ln(rno)}+ {_marked(rtext, mark)}</div>')
    return "".join(parts), len(fd.rows)


def _run_dict(rr) -> dict:
    keys = ("max_abs_error", "max_rel_error", "allclose", "outputs", "tvm_ms", "torch_ms", "threads")
    d = {k: _jsonable(getattr(rr, k, None)) for k in keys}
    d["kernels"] = [{"name": getattr(k, "name", ""), "calls": getattr(k, "calls", None),
                     "ms": _jsonable(getattr(k, "ms", None)), "binding": getattr(k, "binding", None)}
                    for k in (getattr(rr, "kernels", None) or [])]
    return d


def _fmt(v, spec=".3g"):
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def _render_run(idx: int, rr) -> str:
    d = _run_dict(rr)
    ok = d.get("allclose")
    speed = ""
    if isinstance(d.get("tvm_ms"), (int, float)) and isinstance(d.get("torch_ms"), (int, float)) and d["torch_ms"]:
        r = d["tvm_ms"] / d["torch_ms"]
        speed = f" ({r:.2f}× torch's time)" if r >= 1 else f" ({1 / r:.2f}× faster than torch)"
    rows = [
        ("allclose", f'<span class="{"yes" if ok else "bad"}">{_fmt(ok)}</span>'),
        ("max abs error", _e(_fmt(d.get("max_abs_error")))),
        ("max rel error", _e(_fmt(d.get("max_rel_error")))),
        ("TVM ms", _e(_fmt(d.get("tvm_ms"), ".3f")) + _e(speed)),
        ("torch ms", _e(_fmt(d.get("torch_ms"), ".3f"))),
        ("threads", _e(_fmt(d.get("threads")))),
        ("outputs", _e(_fmt(d.get("outputs")))),
    ]
    out = [f"<h3>Build and run of step {idx}</h3><table>"]
    out += [f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows]
    out.append("</table>")
    kernels = sorted(d["kernels"], key=lambda k: -(k["ms"] or 0))
    if kernels:
        total = sum(k["ms"] or 0 for k in kernels) or 1.0
        out.append(f"<details><summary>{len(kernels)} kernels (slowest first)</summary><table>"
                   "<tr><th>kernel</th><th>calls</th><th>ms</th><th>%</th><th>binding</th></tr>")
        for k in kernels[:200]:
            ms = k["ms"] or 0
            out.append(f"<tr><td>{_e(k['name'])}</td><td class=num>{_e(_fmt(k['calls']))}</td>"
                       f"<td class=num>{ms:.3f}</td><td class=num>{100 * ms / total:.1f}</td>"
                       f"<td>{_e(k['binding'] or '')}</td></tr>")
        out.append("</table></details>")
    return "".join(out)


def _render_latency(session, trace) -> str:
    """The latency chart (inline SVG) and a table of its numbers."""
    from irviz.core.backend.latency import fmt_ms, latency_svg, torch_ms_of

    out = ["<h2>Latency per step</h2>", '<div class="chart">',
           latency_svg(trace, width=960, height=400), "</div>"]
    torch_ms = torch_ms_of(trace)
    threads = next((e.get("threads") for e in trace if e.get("threads")), None)
    out.append(f'<p class="meta">Every step built (the rest of default_build, then tvm.compile) and '
               f"run against PyTorch; median of the timed runs. torch eager "
               f"{_e(fmt_ms(torch_ms))} ms (the smallest of the steps' medians: a busy machine only adds time), {_e(_fmt(threads))} threads.</p>")
    out.append("<details><summary>numbers</summary><table><tr><th>#</th><th>pass</th><th>TVM ms</th>"
               "<th>torch ms</th><th>× torch</th><th>allclose</th><th>build s</th><th>note</th></tr>")
    for e in trace:
        tvm, tor = e.get("tvm_ms"), e.get("torch_ms")
        ratio = f"{tvm / tor:.3g}" if isinstance(tvm, (int, float)) and isinstance(tor, (int, float)) and tor else "–"
        ok = e.get("allclose")
        okc = "yes" if ok else ("bad" if ok is False else "no")
        note = e.get("error") or ("same module as an earlier step" if e.get("cached") else "")
        out.append(f'<tr><td class=num><a href="#step{e.get("step")}">{_e(e.get("step"))}</a></td>'
                   f"<td>{_e(e.get('pass'))}</td><td class=num>{_e(fmt_ms(tvm))}</td>"
                   f"<td class=num>{_e(fmt_ms(tor))}</td><td class=num>{ratio}</td>"
                   f'<td><span class="{okc}">{_e(_fmt(ok))}</span></td>'
                   f"<td class=num>{_e(_fmt(e.get('build_seconds'), '.2f'))}</td>"
                   f'<td class="{"err" if e.get("error") else "no"}">{_e(note)}</td></tr>')
    out.append("</table></details>")
    return "".join(out)


def html_report(session, run_results=None, files: dict | None = None, steps=None,
                latency=None) -> str:
    """The trace as one self-contained HTML page (inline CSS/JS, no external resources).

    run_results: a RunResult (for the cursor step) or {step index: RunResult}.  files: per-step
    export records (from export_trace) for links to the step files.  Diffs only, collapsed to
    hunks; the full text of each step is in the exported files.  latency: a latency trace
    (``irviz.core.backend.latency.latency_trace``), shown as an SVG chart and a table."""
    results = _normalize_results(session, run_results)
    files = files or {}
    n = len(session.steps)
    shown = list(range(n)) if steps is None else [i for i in steps if 0 <= i < n]
    title = f"irviz pass trace: {session.name}"
    total = sum(float(s.seconds) for s in session.steps[1:])
    head = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{_e(title)}</title><style>{_CSS}</style><script>{_JS}</script></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<div class="meta">importer {_e(getattr(session.imported, "importer", "?"))} · '
        f"{n - 1} passes · {total:.3f} s in passes · written "
        f"{_e(_dt.datetime.now().isoformat(timespec='seconds'))} by irviz</div>",
    ]
    if getattr(session, "error", None) is not None:
        head.append(f'<p class="err">The pipeline stopped with an error: {_e(session.error.user_message())}</p>')
    if session.pipeline:
        head.append('<p class="note">Not applied (planned): '
                    + _e(", ".join(inv.name for inv in session.pipeline)) + "</p>")
    if latency:
        head.append(_render_latency(session, latency))
    for idx in sorted(results):
        head.append(_render_run(idx, results[idx]))

    table = ["<h2>Passes</h2><table><tr><th>#</th><th>pass</th><th>params</th><th>seconds</th>"
             "<th>changed</th><th>functions</th><th>file</th></tr>"]
    for i in shown:
        s = session.steps[i]
        ch = s.changes
        funcs = " ".join(x for x in (f"+{len(ch.added)}" if ch.added else "",
                                     f"−{len(ch.removed)}" if ch.removed else "",
                                     f"~{len(ch.changed)}" if ch.changed else "") if x)
        rec = files.get(i) or {}
        link = ""
        if rec.get("file"):
            link = f'<a href="{_e(rec["file"])}">{_e(rec["file"])}</a>'
            if not rec.get("loadable", True):
                link += ' <span class="note">(text only)</span>'
        params = json.dumps(_jsonable(s.params)) if s.params else ""
        changed = '<span class="yes">yes</span>' if s.changed else '<span class="no">no</span>'
        cls = "" if s.changed else ' class="nochange"'
        table.append(f'<tr{cls}><td class=num><a href="#step{i}">{i}</a></td><td>{_e(s.pass_name)}</td>'
                     f"<td>{_e(params)}</td><td class=num>{float(s.seconds):.4f}</td><td>{changed}</td>"
                     f"<td>{_e(funcs)}</td><td>{link}</td></tr>")
    table.append("</table>")

    body = ['<h2>Changes per pass</h2><p><button onclick="setAll(true)">expand all</button>'
            '<button onclick="setAll(false)">collapse all</button></p>']
    for i in shown:
        if i == 0:
            continue
        s = session.steps[i]
        prev = session.steps[i - 1]
        ch = s.changes
        summary = f"Step {i}: {s.pass_name} — " + (
            f"{len(ch.added)} added, {len(ch.removed)} removed, {len(ch.changed)} changed"
            if s.changed else "no change")
        body.append(f'<details class="step" id="step{i}"{" open" if s.changed else ""}>'
                    f"<summary>{_e(summary)} <span class=no>({float(s.seconds):.4f} s)</span></summary>")
        if not s.changed:
            body.append("<p class=no>The module is structurally unchanged.</p></details>")
            continue
        budget = MAX_REPORT_ROWS_PER_STEP
        fds = diff_mod.side_by_side(prev.mod, s.mod)
        for k, fd in enumerate(fds):
            if budget <= 0:
                rest = len(fds) - k
                body.append(f'<p class="note">… {rest} more function(s) left out; see '
                            f"diffs/step_{i:02d}.diff.</p>")
                break
            html_rows, nrows = _render_rows(fd)
            budget -= nrows
            big = fd.status != "changed" and (len(fds) > 4 or nrows > 60)
            body.append(f"<details{'' if big else ' open'}><summary><code>{_e(fd.name)}</code>"
                        f'<span class="tag t-{fd.status}">{fd.status}</span> '
                        f"<span class=no>{nrows} lines</span></summary>"
                        f'<div class="diff">{html_rows}</div></details>')
        body.append("</details>")
    return "".join(head + table + body) + "</body></html>\n"
