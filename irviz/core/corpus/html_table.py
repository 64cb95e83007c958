"""The corpus's rows as one self-contained HTML page: a table that sorts by any column when its
header is clicked (plain HTML and a few lines of inline script, nothing fetched)."""
from __future__ import annotations

import html
from pathlib import Path

from irviz.core.corpus.rows import RESULTS

COLUMNS = [("model", "model"), ("pipeline", "pipeline"), ("target", "target"), ("result", "result"),
           ("stage", "stage"), ("error", "error"), ("max_abs_error", "max abs error"),
           ("tvm_ms", "TVM ms"), ("torch_ms", "torch ms"), ("seconds", "wall s"), ("rss_mb", "peak RSS MB")]
NUMERIC = {"max_abs_error", "tvm_ms", "torch_ms", "seconds", "rss_mb"}
COLORS = {"ok": "#d7f5d7", "graceful": "#fff2c6", "crash": "#f8c9c9", "timeout": "#f3d2f0", "memory": "#f3d2f0"}

_SCRIPT = """
document.querySelectorAll('th').forEach((th, col) => th.addEventListener('click', () => {
  const body = th.closest('table').tBodies[0];
  const asc = th.dataset.dir !== 'asc';
  document.querySelectorAll('th').forEach(h => delete h.dataset.dir);
  th.dataset.dir = asc ? 'asc' : 'desc';
  const num = th.classList.contains('num');
  const val = tr => {
    const t = tr.cells[col].dataset.v ?? tr.cells[col].textContent;
    return num ? (t === '' ? Infinity : parseFloat(t)) : t.toLowerCase();
  };
  const rows = Array.from(body.rows).sort((a, b) => {
    const x = val(a), y = val(b);
    return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
  });
  rows.forEach(r => body.appendChild(r));
}));
"""

_STYLE = """
body { font: 13px system-ui, sans-serif; margin: 1em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 2px 6px; vertical-align: top; }
th { background: #eee; cursor: pointer; position: sticky; top: 0; }
th[data-dir=asc]::after { content: ' \\25B2'; } th[data-dir=desc]::after { content: ' \\25BC'; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.error { max-width: 60em; white-space: pre-wrap; font-family: monospace; font-size: 12px; }
"""


def _cell(name: str, value) -> str:
    if value is None:
        return f'<td class="{"num" if name in NUMERIC else name}" data-v=""></td>'
    if name in NUMERIC:
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        return f'<td class="num" data-v="{value}">{html.escape(shown)}</td>'
    if name == "result":
        color = COLORS.get(str(value), "#fff")
        return f'<td style="background:{color}">{html.escape(str(value))}</td>'
    return f'<td class="{name}">{html.escape(str(value))}</td>'


def render(rows: list[dict], summary: dict, title: str = "irviz corpus") -> str:
    counts = ", ".join(f"{summary.get(k, 0)} {k}" for k in RESULTS)
    head = "".join(f'<th class="{"num" if k in NUMERIC else ""}">{html.escape(label)}</th>'
                   for k, label in COLUMNS)
    body = "\n".join("<tr>" + "".join(_cell(k, r.get(k)) for k, _ in COLUMNS) + "</tr>" for r in rows)
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>\n<h1>{html.escape(title)}</h1>\n"
            f"<p>{summary.get('rows', len(rows))} rows: {counts}. Click a column's header to sort by it.</p>\n"
            f"<table><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>\n"
            f"<script>{_SCRIPT}</script></body></html>\n")


def write_html(path: str | Path, rows: list[dict], summary: dict, title: str = "irviz corpus") -> None:
    Path(path).write_text(render(rows, summary, title), encoding="utf-8")
