"""report.html: a session's trace as one self-contained page (passes table, diffs per pass,
build/run results with the code of the slowest kernels, latency chart)."""
from __future__ import annotations

import datetime as _dt
import html
import json
import math

from irviz.core.backend.timing import describe
from irviz.core.export.report_code import slowest_kernels_html
from irviz.core.export.step_files import jsonable
from irviz.core.target import cpu_info
from irviz.core.views import module_diff as diff_mod
from irviz.core.views.highlight import highlighted_html, html_style_defs
from irviz.core.views.ir_size import ir_size
from irviz.core.views.latency_svg import fmt_ms, latency_svg, torch_ms_of

__all__ = ["html_report", "results_by_step", "run_dict"]

MAX_REPORT_ROWS_PER_STEP = 1500


def results_by_step(session, run_result=None, run_results=None) -> dict[int, object]:
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
            parts.append(f"<div>{_ln(rno)}  {highlighted_html(rtext, [])}</div>")
        else:
            if lno is not None:
                mark = lr if tag == "replace" else []
                parts.append(f'<div class="del">{_ln(lno)}- {highlighted_html(ltext, mark)}</div>')
            if rno is not None:
                mark = rr if tag == "replace" else []
                parts.append(f'<div class="add">{_ln(rno)}+ {highlighted_html(rtext, mark)}</div>')
    return "".join(parts), len(fd.rows)


def run_dict(rr) -> dict:
    keys = ("max_abs_error", "max_rel_error", "allclose", "outputs", "tvm_ms", "torch_ms", "threads", "func")
    d = {k: jsonable(getattr(rr, k, None)) for k in keys}
    d["kernels"] = [{"name": getattr(k, "name", ""), "calls": getattr(k, "calls", None),
                     "ms": jsonable(getattr(k, "ms", None)), "binding": getattr(k, "binding", None),
                     "reliable": getattr(k, "reliable", True), "reason": getattr(k, "reason", None),
                     "alone_ms": jsonable(getattr(k, "alone_ms", None))}
                    for k in (getattr(rr, "kernels", None) or [])]
    d["kernels_reliable"] = getattr(rr, "kernels_reliable", True)
    d["kernels_reason"] = getattr(rr, "kernels_reason", None)
    d["tvm_timing"] = jsonable(getattr(rr, "tvm_timing", None))
    d["torch_timing"] = jsonable(getattr(rr, "torch_timing", None))
    return d


def _how_timed(d: dict) -> str:
    """How the figures were taken and on which CPU, so a ratio is never read without them."""
    text = describe({"TVM": d.get("tvm_timing"), "PyTorch": d.get("torch_timing")}, d.get("threads"))
    return " · ".join(x for x in (text, cpu_info().summary()) if x)


def _fmt(v, spec=".3g"):
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "–" if math.isnan(v) else format(v, spec)  # NaN: nothing was compared
    return str(v)


def _render_run(idx: int, rr) -> str:
    d = run_dict(rr)
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
        ("timed", _e(_how_timed(d))),
    ]
    func = getattr(rr, "func", "main") or "main"
    of = "" if func == "main" else f" ({_e(func)})"
    out = [f"<h3>Build and run of step {idx}{of}</h3><table>"]
    out += [f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows]
    out.append("</table>")
    kernels = sorted(d["kernels"], key=lambda k: -(k["ms"] or 0))
    if kernels:
        total = sum(k["ms"] or 0 for k in kernels) or 1.0
        out.append(_kernels_summary(d, kernels))
        out.append("<tr><th>kernel</th><th>calls</th><th>ms</th><th>%</th><th>binding</th><th></th></tr>")
        for k in kernels[:200]:
            ms = k["ms"] or 0
            bad = k.get("reliable") is False
            mark = f'<span class="bad">unreliable: {_e(k.get("reason") or "")}</span>' if bad else ""
            out.append(f"<tr><td>{_e(k['name'])}</td><td class=num>{_e(_fmt(k['calls']))}</td>"
                       f'<td class="num{" bad" if bad else ""}">{ms:.3f}</td><td class=num>{100 * ms / total:.1f}</td>'
                       f"<td>{_e(k['binding'] or '')}</td><td>{mark}</td></tr>")
        out.append("</table></details>")
    return "".join(out)


def _kernels_summary(d: dict, kernels: list[dict]) -> str:
    """The kernel table's head: how many, their sum against the run's time, and whether either can
    be trusted (open at once when not: the figures below are then not what the run spent)."""
    run, total = d.get("tvm_ms"), sum(k["ms"] or 0 for k in kernels)
    against = f", the run {run:.3f} ms" if isinstance(run, (int, float)) else ""
    bad = [k for k in kernels if k.get("reliable") is False]
    head = f"{len(kernels)} kernels (slowest first): {total:.3f} ms per run{against}"
    if d.get("kernels_reliable") is False or bad:
        why = [d["kernels_reason"]] if d.get("kernels_reliable") is False and d.get("kernels_reason") else []
        why += [f"{len(bad)} kernel{'s' if len(bad) > 1 else ''} marked below"] if bad else []
        return (f'<details open><summary>{_e(head)} · <span class="bad">kernel times unreliable: '
                f"{_e('; '.join(why))}</span></summary><table>")
    return f"<details><summary>{_e(head)}</summary><table>"


def _render_latency(session, trace) -> str:
    """The latency chart (inline SVG) and a table of its numbers."""
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


def _bytes(n) -> str:
    if not isinstance(n, int):
        return "–"
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _render_memory(session, memory: dict, shown: list[int]) -> str:
    """One row per step: what StaticPlanBlockMemory allocates for main (backend.memory)."""
    out = ["<h2>Memory per step</h2>",
           '<p class="meta">Storage planned for main by StaticPlanBlockMemory. A step before it is '
           "planned on a copy (the rest of default_build up to StaticPlanBlockMemory). planned: the "
           "storage allocated; tensors: what the same tensors need without sharing; peak: the most "
           "tensor bytes alive at once, which no plan can go below.</p>",
           "<table><tr><th>#</th><th>pass</th><th>tokens</th><th>planned bytes</th>"
           "<th>tensor bytes</th><th>saved</th><th>peak bytes</th><th>note</th></tr>"]
    for i in shown:
        m = memory.get(i)
        if m is None:
            continue
        name = _e(session.steps[i].pass_name)
        if m.get("error"):
            out.append(f'<tr><td class=num>{i}</td><td>{name}</td><td colspan=5></td>'
                       f'<td class="err">{_e(m["error"])}</td></tr>')
            continue
        planned, tensors = m.get("planned_bytes"), m.get("tensor_bytes")
        saved = f"{100 * (1 - planned / tensors):.1f}%" if tensors else "–"
        note = "" if m.get("planned_by_step") else "planned on a copy"
        out.append(f'<tr><td class=num>{i}</td><td>{name}</td><td class=num>{_e(m.get("tokens"))}</td>'
                   f'<td class=num title="{_e(planned)} bytes">{_bytes(planned)}</td>'
                   f'<td class=num title="{_e(tensors)} bytes">{_bytes(tensors)}</td>'
                   f"<td class=num>{saved}</td>"
                   f'<td class=num title="{_e(m.get("peak_bytes"))} bytes">{_bytes(m.get("peak_bytes"))}</td>'
                   f'<td class="no">{note}</td></tr>')
    out.append("</table>")
    return "".join(out)


def step_diff_html(session, i: int, between=None) -> str:
    """Step ``i``'s diff against step ``i - 1``, function by function, within the row budget.
    between: called after each function, e.g. to tend work running beside this one."""
    budget = MAX_REPORT_ROWS_PER_STEP
    out = []
    fds = diff_mod.side_by_side(session.steps[i - 1].mod, session.steps[i].mod)
    for k, fd in enumerate(fds):
        if budget <= 0:
            rest = len(fds) - k
            out.append(f'<p class="note">… {rest} more function(s) left out; see '
                       f"diffs/step_{i:02d}.diff.</p>")
            break
        html_rows, nrows = _render_rows(fd)
        budget -= nrows
        big = fd.status != "changed" and (len(fds) > 4 or nrows > 60)
        out.append(f"<details{'' if big else ' open'}><summary><code>{_e(fd.name)}</code>"
                   f'<span class="tag t-{fd.status}">{fd.status}</span> '
                   f"<span class=no>{nrows} lines</span></summary>"
                   f'<div class="diff">{html_rows}</div></details>')
        if between is not None:
            between()
    return "".join(out)


def html_report(session, run_results=None, files: dict | None = None, steps=None,
                latency=None, memory: dict | None = None, diff_html: dict | None = None,
                name: str | None = None) -> str:
    """The trace as one self-contained HTML page (inline CSS/JS, no external resources).

    run_results: a RunResult (for the cursor step) or {step index: RunResult}.  files: per-step
    export records (from export_trace) for links to the step files.  Diffs only, collapsed to
    hunks; the full text of each step is in the exported files.  latency: a latency trace
    (``irviz.core.backend.latency.latency_trace``), shown as an SVG chart and a table.  memory:
    {step index: backend.memory summary or {"error"}}, shown as a table after the passes.
    diff_html: {step index: :func:`step_diff_html`} already rendered.  name: the model's name in
    the title (default: the session's; an IR file's session has none)."""
    results = results_by_step(session, run_results)
    files = files or {}
    n = len(session.steps)
    shown = list(range(n)) if steps is None else [i for i in steps if 0 <= i < n]
    title = f"irviz pass trace: {name or session.name}"
    total = sum(float(s.seconds) for s in session.steps[1:])
    head = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{_e(title)}</title><style>{_CSS}{html_style_defs('.diff')}</style>"
        f"<script>{_JS}</script></head><body>",
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
        if 0 <= idx < n:
            head.append(slowest_kernels_html(session.steps[idx].mod, run_dict(results[idx])["kernels"],
                                             getattr(session, "target", None)))

    # one row per step: what the pass did, how big the module is after it, and (after a latency
    # trace) how fast that step runs and how far its outputs are from PyTorch's
    by_step = {e.get("step"): e for e in latency or []}
    table = ['<h2>Passes</h2><table class="per-step"><tr><th>#</th><th>pass</th><th>params</th>'
             "<th>seconds</th><th>changed</th><th>functions</th><th>bindings in main</th>"
             "<th>prim_funcs</th><th>TensorIR lines</th><th>TVM ms</th><th>max abs error</th>"
             "<th>file</th></tr>"]
    for i in shown:
        s = session.steps[i]
        try:
            size = ir_size(s.mod)
        except Exception:  # a count for information never stops the report
            size = {}
        e = by_step.get(i)
        e = e if e is not None and e.get("pass") == s.pass_name else None
        tvm_ms = err = ""
        if e is not None:
            tvm_ms = fmt_ms(e.get("tvm_ms")) if e.get("ok") else "not built"
            err = _fmt(e.get("max_abs_error"), ".2e") if e.get("ok") else ""
        err_cls = ' class="num bad"' if e is not None and e.get("allclose") is False else " class=num"
        numbers = (f"<td class=num>{_e(size.get('bindings', ''))}</td>"
                   f"<td class=num>{_e(size.get('prim_funcs', ''))}</td>"
                   f"<td class=num>{_e(size.get('tir_lines', ''))}</td>"
                   f"<td class=num>{_e(tvm_ms)}</td><td{err_cls}>{_e(err)}</td>")
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
        if rec.get("irviz_lowers"):
            # plain TVM has no legalization for these: the file loads, tvm.compile fails on it
            link += (' <span class="note" title="plain tvm.compile(mod) fails; irviz lowers '
                     f'these with its own LegalizeOps map">(needs irviz\'s lowering of '
                     f'{_e(", ".join(rec["irviz_lowers"]))})</span>')
        params = json.dumps(jsonable(s.params)) if s.params else ""
        changed = ('<span class="no">no</span>' if not s.changed else
                   '<span class="yes">attributes only</span>' if s.changed_what == "attrs" else
                   '<span class="yes">yes</span>')
        if s.notes:
            changed += "".join(f'<br><span class="note">{_e(n)}</span>' for n in s.notes)
        cls = "" if s.changed else ' class="nochange"'
        table.append(f'<tr{cls}><td class=num><a href="#step{i}">{i}</a></td><td>{_e(s.pass_name)}</td>'
                     f"<td>{_e(params)}</td><td class=num>{float(s.seconds):.4f}</td><td>{changed}</td>"
                     f"<td>{_e(funcs)}</td>{numbers}<td>{link}</td></tr>")
    table.append("</table>")
    if memory:
        table.append(_render_memory(session, memory, shown))

    body = ['<h2>Changes per pass</h2><p><button onclick="setAll(true)">expand all</button>'
            '<button onclick="setAll(false)">collapse all</button></p>']
    for i in shown:
        if i == 0:
            continue
        s = session.steps[i]
        ch = s.changes
        summary = f"Step {i}: {s.pass_name} — " + (
            f"{len(ch.added)} added, {len(ch.removed)} removed, {len(ch.changed)} changed"
            + (" (attributes only)" if s.changed_what == "attrs" else "")
            if s.changed else "no change")
        body.append(f'<details class="step" id="step{i}"{" open" if s.changed else ""}>'
                    f"<summary>{_e(summary)} <span class=no>({float(s.seconds):.4f} s)</span></summary>")
        body.extend(f'<p class="note">{_e(n)}</p>' for n in s.notes)
        if not s.changed:
            body.append("<p class=no>The module is structurally unchanged.</p></details>")
            continue
        body.append(diff_html[i] if diff_html and i in diff_html else step_diff_html(session, i))
        body.append("</details>")
    return "".join(head + table + body) + "</body></html>\n"
