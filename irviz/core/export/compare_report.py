"""compare.html and compare.json: two pipelines on one model (irviz.core.pipeline_compare), as one
self-contained page (inline CSS, like report.html) and the JSON scripts read."""
from __future__ import annotations

import datetime as _dt
import json
import os

from irviz.core.export.report import _CSS, _JS, _e, _fmt, _render_rows
from irviz.core.export.step_files import jsonable
from irviz.core import pipeline_compare as compare_mod
from irviz.core.views.module_diff import FunctionDiff
from irviz.core.views.highlight import html_style_defs

__all__ = ["compare_html", "write_compare"]

_EXTRA_CSS = """
tr.only-a td{background:#ffebe9} tr.only-b td{background:#dafbe1}
.same{color:#1a7f37} .differs{color:#9a6700;font-weight:600}
"""
MAX_ROWS = 1500


def _diff_html(functions: list[dict]) -> str:
    parts, budget = [], MAX_ROWS
    for k, f in enumerate(functions):
        if budget <= 0:
            parts.append(f'<p class="note">… {len(functions) - k} more function(s) left out.</p>')
            break
        fd = FunctionDiff(f["name"], f["status"], f["rows"], f.get("hunk_starts") or [])
        rows, n = _render_rows(fd)
        budget -= n
        parts.append(f'<details open><summary><code>{_e(f["name"])}</code>'
                     f'<span class="tag t-{_e(f["status"])}">{_e(f["status"])}</span> '
                     f'<span class=no>{n} lines</span></summary><div class="diff">{rows}</div></details>')
    return "".join(parts)


def _graph_html(graph: dict) -> str:
    fn = graph["functions"]
    out = ["<table><tr><th></th><th>only in A</th><th>only in B</th><th>changed</th><th>same</th></tr>",
           f"<tr><td>functions</td><td>{_e(', '.join(fn['only_a']) or '–')}</td>"
           f"<td>{_e(', '.join(fn['only_b']) or '–')}</td><td>{_e(', '.join(fn['changed']) or '–')}</td>"
           f"<td class=num>{fn['same']}</td></tr>"]
    for name, n in graph["nodes"].items():
        changed = ", ".join(f"{a}↔{b}" for a, b in n["changed"])
        out.append(f"<tr><td>nodes of <code>{_e(name)}</code></td><td>{_e(', '.join(n['only_a']) or '–')}</td>"
                   f"<td>{_e(', '.join(n['only_b']) or '–')}</td><td>{_e(changed or '–')}</td>"
                   f"<td class=num>{n['same']}</td></tr>")
    out.append("</table>")
    return "".join(out)


def compare_html(cmp, model: str = "model") -> str:
    data = compare_mod.comparison_dict(cmp)
    title = f"irviz pipeline comparison: {model}"
    out = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
           f"<title>{_e(title)}</title><style>{_CSS}{_EXTRA_CSS}{html_style_defs('.diff')}</style>"
           f"<script>{_JS}</script></head><body><h1>{_e(title)}</h1>",
           f'<div class="meta">A: <code>{_e(cmp.texts[0])}</code> · B: <code>{_e(cmp.texts[1])}</code> · '
           f"written {_e(_dt.datetime.now().isoformat(timespec='seconds'))} by irviz</div>",
           "<h2>Pipelines</h2><table><tr><th></th><th>pipeline</th><th>passes</th><th>TVM ms</th>"
           "<th>max abs error</th><th>kernels</th><th>build s</th><th>error</th></tr>"]
    for k, r in enumerate(data["pipelines"]):
        out.append(f"<tr><td>{'AB'[k]}</td><td><code>{_e(r['pipeline'])}</code></td>"
                   f"<td class=num>{len(r['steps']) - 1}</td><td class=num>{_e(_fmt(r['tvm_ms'], '.3f'))}</td>"
                   f"<td class=num>{_e(_fmt(r['max_abs_error']))}</td><td class=num>{_e(_fmt(r['kernels']))}</td>"
                   f"<td class=num>{_e(_fmt(r['build_seconds'], '.2f'))}</td>"
                   f'<td class="err">{_e(r.get("error") or "")}</td></tr>')
    out.append("</table>")

    out.append("<h2>Steps, aligned by pass name</h2><table><tr><th>A</th><th>pass</th><th>B</th>"
               "<th>pass</th><th>what the pass did</th></tr>")
    effects = []
    for i, j in cmp.aligned:
        sa = cmp.steps[0][i] if i is not None else None
        sb = cmp.steps[1][j] if j is not None else None
        cls = ' class="only-a"' if sb is None else ' class="only-b"' if sa is None else ""
        what = "only in A" if sb is None else "only in B" if sa is None else ""
        if sa is not None and sb is not None and sa.index > 0:
            d = compare_mod.pass_diff(cmp, sa.index, sb.index)
            effects.append((sa, sb, d))
            what = ('<span class="same">same change</span>' if d["same_effect"] else
                    f'<a class="differs" href="#pass{sa.index}_{sb.index}">different change</a>')
        out.append(f"<tr{cls}><td class=num>{'' if sa is None else sa.index}</td>"
                   f"<td>{'' if sa is None else _e(sa.pass_name)}</td>"
                   f"<td class=num>{'' if sb is None else sb.index}</td>"
                   f"<td>{'' if sb is None else _e(sb.pass_name)}</td><td>{what}</td></tr>")
    out.append("</table>")

    la, lb = cmp.steps[0][-1], cmp.steps[1][-1]
    final = compare_mod.pair_diff(cmp, la.index, lb.index)
    out.append(f"<h2>Last steps: A {la.index} ({_e(la.pass_name)}) against B {lb.index} "
               f"({_e(lb.pass_name)})</h2>")
    out.append(_graph_html(final["graph"]))
    out.append(_diff_html(final["functions"]) if final["functions"] else
               "<p class=same>The two final modules are structurally equal.</p>")

    out.append('<h2>Diff of diffs: passes that changed the module differently</h2>'
               '<p><button onclick="setAll(true)">expand all</button>'
               '<button onclick="setAll(false)">collapse all</button></p>')
    shown = 0
    for sa, sb, d in effects:
        if d["same_effect"]:
            continue
        shown += 1
        out.append(f'<details class="step" id="pass{sa.index}_{sb.index}"><summary>{_e(sa.pass_name)}: '
                   f"A step {sa.index} against B step {sb.index}</summary>"
                   f"<p class=no>lines starting “-” are in A's diff only, “+” in B's only</p>"
                   f"{_diff_html(d['functions'])}</details>")
    if not shown:
        out.append("<p class=same>Every pass both pipelines ran changed the module the same way.</p>")
    return "".join(out) + "</body></html>\n"


def write_compare(cmp, out_dir, model: str = "model") -> tuple[str, str]:
    """Write compare.html and compare.json into `out_dir`; their paths."""
    os.makedirs(out_dir, exist_ok=True)
    html_path = os.path.join(out_dir, "compare.html")
    json_path = os.path.join(out_dir, "compare.json")
    with open(html_path, "w", encoding="utf-8") as f:
        f.write(compare_html(cmp, model))
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(jsonable(compare_mod.comparison_dict(cmp)), f, indent=2)
        f.write("\n")
    return html_path, json_path
